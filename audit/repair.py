"""Instruction-only repair (selection stage 4): a new task version whose instruction states
what the verifier checks. Environment, solution and verifier are untouched.

Programmatic for hidden requirements: each asserted literal the evidence names as hidden
becomes a line of a "Requirements checked by the verifier" section, phrased by its kind
(recomputed from the verifier, never parsed from a message). With the LLM judge configured,
the LLM rewrites the instruction instead.

A repair states the required positions and forms, never the computed answer. The answers
are the `oracle_answer` findings of the executable judge (values of checked outputs the
solution computes and nothing visible holds, `audit.answers`) and the asserted literals the
static check calls derived (the solution computes them): a hidden literal holding one is
stated by its position and kind ("line 1 of /app/out.txt holds a number computed from the
inputs"), and a rewrite that states one is refused. Every rewrite is also checked against
the coverage of all the verifier's literals (`tasks.literals.task_literal_coverage`, the
check the audit itself uses): one that leaves a hidden literal hidden, or stops stating a
literal the original stated, is refused. A refusal is a `repair_refused` finding appended to
`refused`; after a refused LLM rewrite the programmatic repair is tried.
"""

from __future__ import annotations

from typing import Any

from audit.answers import answers_of, bounded, stated_answers
from audit.static_checks import static_findings, visible_texts
from audit.verdict import Code, Finding, Source
from tasks.literals import Literal, LiteralKind, task_literal_coverage
from tasks.model import Lineage, Task

REPAIR_OPERATOR = "instruction-repair"
SECTION = "## Requirements checked by the verifier"


def requirement_line(lit: Literal, answers: dict[str, str] | None = None) -> str:
    """The sentence stating one hidden literal; a literal holding a computed answer is
    stated by where it stands and its form, never by its value."""
    v = lit.value
    held = [a for a in answers or {} if bounded(a, v)]
    if held:
        where = answers[held[0]] if answers else "the output"
        form = "number" if lit.kind == LiteralKind.NUMBER else f"{lit.kind.value} value"
        return (
            f"- {where[:1].upper() + where[1:]} must hold the {form} computed from the task's "
            "inputs (the verifier checks its exact value)."
        )
    if lit.kind == LiteralKind.PATH:
        return f"- `{v}` must exist as the task describes; the verifier checks it."
    if lit.kind in (LiteralKind.KEY, LiteralKind.HEADER):
        return f"- Structured output must use the {lit.kind.value} `{v}` exactly."
    if lit.kind == LiteralKind.MODE:
        return f"- The file the verifier checks must have the mode `{v}` (octal)."
    if lit.kind == LiteralKind.OWNER:
        return f"- The file the verifier checks must be owned by `{v}`."
    if lit.kind == LiteralKind.ORDER:
        return f"- The lines of the output must be in {v} order."
    if lit.kind == LiteralKind.ENCODING:
        return f"- The output must be written in `{v}` (encoding or line endings)."
    if lit.kind == LiteralKind.FORMAT:
        return f"- The output must match the pattern `{v}`."
    return f"- The output must contain exactly `{v}` where it applies (case-sensitive)."


def repaired_task(task: Task, instruction: str) -> Task:
    """`task` with a new instruction; lineage names `task` as the parent."""
    lin = task.lineage
    root = lin.root_seed or (task.content_hash if not lin.parents else None)
    lineage = Lineage(
        parents=[task.content_hash],
        root_seed=root,
        round=lin.round,
        operator=REPAIR_OPERATOR,
        family=lin.family,
        source_pool=lin.source_pool,
    )
    return task.model_copy(update={"instruction": instruction, "lineage": lineage})


def _hidden(task: Task, findings: list[Finding]) -> list[Literal]:
    items = {f.item for f in findings if f.code == Code.HIDDEN_REQUIREMENT}
    return [lit for lit in static_findings(task).facts.literals if lit.value in items]


def answers(task: Task, findings: list[Finding]) -> dict[str, str]:
    """{value: where it stands} of what the repaired instruction must not state: the
    executable judge's `oracle_answer`s and the asserted literals derived by the solution,
    less what the instruction or an environment file already holds."""
    out = answers_of(findings)
    measured = list(out)
    for f in findings:  # a derived literal holding a measured answer is refused by that answer
        if f.code == Code.LITERAL_DERIVED and not any(bounded(a, f.item) for a in measured):
            out[f.item] = "the output the verifier reads"
    seen = "\n".join(visible_texts(task).values())  # what the agent reads is no answer
    return {v: w for v, w in out.items() if not bounded(v, seen)}


def refusals(
    original: Task,
    candidate: Task,
    hidden: list[Literal],
    known: dict[str, str],
    by: str,
    *,
    must_state: bool = True,
) -> list[Finding]:
    """Why `candidate`'s instruction is not a repair of `original` (empty when it is): it
    states a computed answer, drops a literal the original stated (coverage over every
    test), or (`must_state`) leaves a hidden literal without an answer in it hidden."""
    out = []
    for v in stated_answers(candidate.instruction, known, original.instruction):
        why = f"{by} states {v!r}, the computed answer at {known[v]}"
        out.append(Finding(code=Code.REPAIR_REFUSED, source=Source.STATIC, item=v, evidence=why))
    before = {c.literal: c.covered for c in task_literal_coverage(original)}
    after = {c.literal: c.covered for c in task_literal_coverage(candidate)}
    wanted = {lit.value for lit in hidden}
    for lit, covered in sorted(after.items(), key=lambda kv: kv[0].where):
        if covered:
            continue
        if before.get(lit):
            why = f"{by} no longer states the {lit.kind.value} asserted at {lit.where}"
        elif must_state and lit.value in wanted and not any(bounded(a, lit.value) for a in known):
            why = f"{by} leaves the {lit.kind.value} asserted at {lit.where} hidden"
        else:
            continue
        out.append(
            Finding(code=Code.REPAIR_REFUSED, source=Source.STATIC, item=lit.value, evidence=why)
        )
    return out


def repair_instruction(
    task: Task,
    findings: list[Finding],
    *,
    llm: Any = None,
    client: Any = None,
    notes: list[Finding] | None = None,
    refused: list[Finding] | None = None,
) -> Task | None:
    """The repaired task, or None when no instruction-level defect is known or every repair
    was refused (the reasons appended to `refused`).

    `notes` (the LLM's alignment findings) feed the LLM rewrite when no hidden requirement
    was found statically.
    """
    sink = refused if refused is not None else []
    hidden = list({lit.value: lit for lit in _hidden(task, findings)}.values())
    known = answers(task, findings)
    asks = [requirement_line(lit, known)[2:] for lit in hidden] or [n.evidence for n in notes or []]
    if llm is not None and asks:
        from audit.judge_llm import repair_instruction_llm

        text = repair_instruction_llm(task, asks, llm, client=client)
        if text and text.strip() != task.instruction.strip():
            candidate = repaired_task(task, text)
            why = refusals(task, candidate, hidden, known, "the LLM's rewrite")
            if not why:
                return candidate
            sink.extend(why)
    if not hidden:
        return None
    lines = list(dict.fromkeys(requirement_line(lit, known) for lit in hidden))
    text = task.instruction.rstrip() + f"\n\n{SECTION}\n\n" + "\n".join(lines) + "\n"
    candidate = repaired_task(task, text)
    # phrased by kind, a literal may still read as unstated: the re-audit judges that
    why = refusals(task, candidate, hidden, known, "the programmatic repair", must_state=False)
    if why:
        sink.extend(why)
        return None
    return candidate
