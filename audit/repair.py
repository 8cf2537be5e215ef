"""Instruction-only repair (selection stage 4): a new task version whose instruction states
what the verifier checks. Environment, solution and verifier are untouched.

Programmatic for hidden requirements: each asserted literal the evidence names as hidden
becomes a line of a "Requirements checked by the verifier" section, phrased by its kind
(recomputed from the verifier, never parsed from a message). With the LLM judge configured,
the LLM rewrites the instruction instead; its rewrite is kept only when the static check
then finds none of the hidden literals (else the programmatic repair is used).
"""

from __future__ import annotations

from typing import Any

from audit.static_checks import static_findings
from audit.verdict import Code, Finding
from tasks.literals import Literal, LiteralKind
from tasks.model import Lineage, Task

REPAIR_OPERATOR = "instruction-repair"
SECTION = "## Requirements checked by the verifier"


def requirement_line(lit: Literal) -> str:
    """The sentence stating one hidden literal."""
    v = lit.value
    if lit.kind == LiteralKind.PATH:
        return f"- `{v}` must exist as the task describes; the verifier checks it."
    if lit.kind in (LiteralKind.KEY, LiteralKind.HEADER):
        return f"- Structured output must use the {lit.kind.value} `{v}` exactly."
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


def repair_instruction(
    task: Task,
    findings: list[Finding],
    *,
    llm: Any = None,
    client: Any = None,
    notes: list[Finding] | None = None,
) -> Task | None:
    """The repaired task, or None when no instruction-level defect is known.

    `notes` (the LLM's alignment findings) feed the LLM rewrite when no hidden requirement
    was found statically.
    """
    hidden = list({lit.value: lit for lit in _hidden(task, findings)}.values())
    asks = [f"{lit.kind.value} {lit.value!r}" for lit in hidden] or [
        n.evidence for n in notes or []
    ]
    if llm is not None and asks:
        from audit.judge_llm import repair_instruction_llm

        text = repair_instruction_llm(task, asks, llm, client=client)
        if text and text.strip() != task.instruction.strip():
            candidate = repaired_task(task, text)
            still = {lit.value for lit in static_findings(candidate).hidden}
            if not still & {lit.value for lit in hidden}:
                return candidate
    if not hidden:
        return None
    lines = [requirement_line(lit) for lit in hidden]
    text = task.instruction.rstrip() + f"\n\n{SECTION}\n\n" + "\n".join(lines) + "\n"
    return repaired_task(task, text)
