"""Instruction coverage of a candidate's new tests: every literal they read or compare must be
stated by the instruction or exist in the environment before the agent starts.

The literals and the text matching are `tasks.literals` (one home, shared with the audit); this
module adds what only a sandbox knows. `pending` runs before the oracle: literals the
instruction and the environment spec (its files and rendered Dockerfile) do not state. The
profiling oracle then probes those in the sandbox before the solution runs (paths exist?
strings in a file under the workdir?), and `finish` decides: what is still uncovered is a
hidden requirement, or, for a path the reference solution itself creates, an artifact of the
reference solution (any other correct solution may not produce it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from synthesis.profile import TaskProfile
from tasks.environment import render_dockerfile
from tasks.literals import Literal, LiteralKind, asserted_literals, literal_coverage
from tasks.literals.python import parse_expression, parse_python
from tasks.model import Task

# Kinds the sandbox probe can look for: paths by existence, the rest by text search.
_SEARCHABLE = frozenset(
    {LiteralKind.STRING, LiteralKind.LINE, LiteralKind.HEADER, LiteralKind.NAME, LiteralKind.KEY}
)


@dataclass(frozen=True)
class Uncovered:
    """A literal a new test relies on that nothing the agent sees states."""

    literal: str
    kind: str
    artifact: bool  # a path only the reference solution creates


@dataclass
class Pending:
    """Coverage after the static pass: the literals, and those still to probe."""

    literals: list[Literal]
    uncovered: list[Literal] = field(default_factory=list)

    @property
    def probe_paths(self) -> list[str]:
        return [lit.value for lit in self.uncovered if lit.kind == LiteralKind.PATH]

    @property
    def probe_strings(self) -> list[str]:
        return [lit.value for lit in self.uncovered if lit.kind in _SEARCHABLE]


@dataclass
class Coverage:
    literals: int
    uncovered: list[Uncovered]

    @property
    def ratio(self) -> float:
        return 1.0 if not self.literals else 1 - len(self.uncovered) / self.literals


def environment_files(task: Task) -> dict[str, bytes]:
    """What the environment spec shows: its files and the Dockerfile it renders to."""
    files = dict(task.environment.files)
    files.setdefault("Dockerfile", render_dockerfile(task).encode())
    return files


class _FoldSubscripts(ast.NodeTransformer):
    """`SPEC["key"]` (and `spec["key"]` after `spec = SPEC`) -> the constant it names."""

    def __init__(self, consts: dict[str, object]) -> None:
        self.consts = consts

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        base, key = node.value, node.slice
        if isinstance(base, ast.Name) and isinstance(key, ast.Constant):
            table = self.consts.get(base.id)
            if isinstance(table, dict) and key.value in table:
                value = parse_expression(repr(table[key.value])).body
                return ast.copy_location(value, node)
        return node


def fold_constant_subscripts(source: str) -> str:
    """The test module with subscripts of constant dicts folded to their values, so literals
    kept in a spec dict (how generated tests carry them) are compared visibly."""
    tree = parse_python(source)
    consts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    consts[target.id] = ast.literal_eval(node.value)
                except (ValueError, SyntaxError, TypeError):
                    pass
    for sub in ast.walk(tree):  # local aliases: `spec = _r3_SPEC`
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
            target, value = sub.targets[0], sub.value
            if isinstance(target, ast.Name) and isinstance(value, ast.Name):
                if value.id in consts and target.id not in consts:
                    consts[target.id] = consts[value.id]
    return ast.unparse(_FoldSubscripts(consts).visit(tree)) + "\n"


def pending(task: Task, new_tests: str) -> Pending:
    """The new tests' literals, and those neither the instruction nor the spec states."""
    try:
        folded = fold_constant_subscripts(new_tests)
    except SyntaxError:
        folded = new_tests
    literals = asserted_literals({"test_outputs.py": folded.encode()})
    verdicts = literal_coverage(
        literals, task.instruction, environment_files(task), task.environment.workdir
    )
    return Pending(literals, [v.literal for v in verdicts if not v.covered])


def _created_by_solution(path: str, profile: TaskProfile | None) -> bool:
    if profile is None:
        return False
    prefix = path.rstrip("/") + "/"
    return any(f.path == path or f.path.startswith(prefix) for f in profile.outputs)


def finish(p: Pending, present: set[str], profile: TaskProfile | None) -> Coverage:
    """Coverage once the sandbox probe reported what exists before the agent starts."""
    groups_found = {
        lit.group for lit in p.uncovered if lit.value in present and lit.group is not None
    }
    out = []
    for lit in p.uncovered:
        if lit.value in present or (lit.group is not None and lit.group in groups_found):
            continue
        artifact = lit.kind == LiteralKind.PATH and _created_by_solution(lit.value, profile)
        out.append(Uncovered(lit.value, lit.kind.value, artifact))
    return Coverage(len(p.literals), out)
