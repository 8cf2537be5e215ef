"""Rewrite operators: the registry of programmatic operators, by family.

Each operator declares its `family`, a `feasible(parent)` check, and `extend(parent, ctx)`
returning an `Extension` that `build_child` applies in the contract's order (solution,
environment, verifier, instruction last). The default operators (`PROGRAMMATIC`) derive the
new work from what the parent actually produced (`synthesis.operators.derived`: typed steps
over its outputs' columns, keys and values). The clerical chores of the first versions
(`CHORES`: archive, checksum, commit, schedule, chmod the results, ...) stay available
(`registry(CHORES)`) but are not sampled by default: their instructions spell out commands,
and most of their new assertions need the parent's work done, not its output (several fail
the dependent-share gate, `synthesis.validate`). The LLM operator (`synthesis.llm`) joins the
registry only when an endpoint is configured.
"""

from __future__ import annotations

from synthesis.operators import (
    conversion,
    derived,
    fault_injection,
    integrity,
    packaging,
    performance,
    permissions,
    regression,
    reports,
    scheduling,
    version_control,
)
from synthesis.operators.extension import (
    Extension,
    Operator,
    Parent,
    RewriteContext,
    RewriteError,
    build_child,
    new_assertions,
    runner_problem,
    test_names,
)

PROGRAMMATIC: tuple[Operator, ...] = tuple(derived.OPERATORS)
CHORES: tuple[Operator, ...] = tuple(
    op
    for module in (
        packaging,
        conversion,
        integrity,
        version_control,
        scheduling,
        permissions,
        reports,
        fault_injection,
        performance,
        regression,
    )
    for op in module.OPERATORS
)


def registry(extra: tuple[Operator, ...] = ()) -> dict[str, Operator]:
    """Operators by name: the programmatic ones plus `extra` (e.g. the LLM operator)."""
    ops: dict[str, Operator] = {}
    for op in (*PROGRAMMATIC, *extra):
        if op.name in ops:
            raise ValueError(f"duplicate operator name {op.name!r}")
        ops[op.name] = op
    return ops


def families(ops: dict[str, Operator] | None = None) -> dict[str, list[str]]:
    """Family -> operator names."""
    out: dict[str, list[str]] = {}
    for op in (ops or registry()).values():
        out.setdefault(op.family, []).append(op.name)
    return out


__all__ = [
    "CHORES",
    "PROGRAMMATIC",
    "Extension",
    "Operator",
    "Parent",
    "RewriteContext",
    "RewriteError",
    "build_child",
    "families",
    "new_assertions",
    "registry",
    "runner_problem",
    "test_names",
]
