"""Rewrite operators: the registry of programmatic operators, by family.

Each operator declares its `family`, a `feasible(parent)` check, and `extend(parent, ctx)`
returning an `Extension` that `build_child` applies in the contract's order (solution,
environment, verifier, instruction last). The LLM operator (`synthesis.llm`) joins the registry
only when an endpoint is configured.
"""

from __future__ import annotations

from synthesis.operators import (
    conversion,
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

PROGRAMMATIC: tuple[Operator, ...] = tuple(
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
