"""Instruction-only repair (selection stage 4): a new task version whose instruction states
what the verifier checks. Environment, solution and verifier are untouched.

Programmatic for hidden requirements: each checked-but-unstated path, key, value or format
token becomes a line of a "Requirements checked by the verifier" section. With the LLM judge
configured, the LLM rewrites the instruction instead; its rewrite is kept only when the
static check then finds none of the hidden items (else the programmatic repair is used).
"""

from __future__ import annotations

import re
from typing import Any

from audit.static_checks import Code, Finding, hidden_requirements
from tasks.model import Lineage, Task

REPAIR_OPERATOR = "instruction-repair"
SECTION = "## Requirements checked by the verifier"


def requirement_line(f: Finding) -> str | None:
    """The sentence stating one hidden requirement, or None for other findings."""
    if f.code != Code.HIDDEN_REQUIREMENT:
        return None
    m = re.match(r"path (\S+) is checked", f.detail)
    if m:
        return f"- `{m.group(1)}` must exist as the task describes; the verifier checks it."
    m = re.match(r"key '(.*)' is checked", f.detail)
    if m:
        return f"- Structured output must use the key `{m.group(1)}`."
    m = re.match(r"value '(.*)' is expected", f.detail)
    if m:
        return f"- The output must contain exactly `{m.group(1)}` where it applies."
    m = re.match(r"format token '(.*)' is checked", f.detail)
    if m:
        return f"- The output format includes the literal token `{m.group(1)}`."
    return None


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


def repair_instruction(
    task: Task,
    findings: list[Finding],
    *,
    llm: Any = None,
    client: Any = None,
    notes: list[str] | None = None,
) -> Task | None:
    """The repaired task, or None when no instruction-level defect is known.

    `notes` (LLM rationales of a low alignment score) feed the LLM rewrite when no hidden
    requirement was found statically.
    """
    lines = [ln for f in findings if (ln := requirement_line(f)) is not None]
    asks = [f.detail for f in findings if f.code == Code.HIDDEN_REQUIREMENT] or list(notes or [])
    if llm is not None and asks:
        from audit.judge_llm import repair_instruction_llm

        text = repair_instruction_llm(task, asks, llm, client=client)
        if text and text.strip() != task.instruction.strip():
            candidate = repaired_task(task, text)
            still = {f.detail for f in hidden_requirements(candidate)}
            if not still & {f.detail for f in findings}:
                return candidate
    if not lines:
        return None
    text = task.instruction.rstrip() + f"\n\n{SECTION}\n\n" + "\n".join(lines) + "\n"
    return repaired_task(task, text)
