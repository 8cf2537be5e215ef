"""Prerequisite guards: a new assertion passes only if the earlier work it builds on is correct.

An extension's steps read results of earlier stages (`Extension.consumes`). Its assertions
compute what they expect from those files at verify time, so without more they would pass on
ANY file at that path: an agent could write a stub and skip the real work. A guard closes that
hole: every new test first runs the parent's checks that read the consumed files (found by
`guarding_tests`, a static closure over the verifier module), so the new assertions cannot pass
unless the parent's work is done and still correct. Validation measures which new tests
actually depend on the consumed files (`synthesis.probes.DataFlowAgent`: perturbed before the
new steps, restored after them) and removes the guard from the others (`unguard`): a test that
does not read the consumed state is not zeroed when the earlier stage failed.

Guard outcomes (pass or failure message) are memoized per verifier run (one process runs every
check in order), so a guarded check costs its own time once however many tests require it.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterable

from tasks.literals.python import parse_python

GUARD_MEMO = "_t1_prerequisite_outcomes"


def _globals(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level name -> its defining node (functions, classes, assignments)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


_CLOCKS = frozenset({"monotonic", "perf_counter", "time", "process_time", "monotonic_ns"})


def _closure(name: str, defs: dict[str, ast.AST]) -> tuple[set[str], bool]:
    """(string constants in `name`'s definition and every module global it reaches, whether
    that closure reads a clock: a timing check)."""
    seen: set[str] = set()
    todo = [name]
    strings: set[str] = set()
    timed = False
    while todo:
        n = todo.pop()
        if n in seen or n not in defs:
            continue
        seen.add(n)
        for node in ast.walk(defs[n]):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
            elif isinstance(node, ast.Name) and node.id in defs:
                todo.append(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in _CLOCKS
                and isinstance(node.value, ast.Name)
                and node.value.id == "time"
            ):
                timed = True
    return strings, timed


def _mentions(strings: set[str], path: str, workdir: str) -> bool:
    wd = workdir.rstrip("/")
    rel = posixpath.relpath(path, wd) if path.startswith(wd + "/") else None
    for s in strings:
        if path in s or (rel is not None and s == rel):
            return True
        # A directory the check walks (not the workdir itself, which every check "reads").
        d = s.rstrip("/")
        if d.startswith("/") and d != wd and len(d) > 1 and path.startswith(d + "/"):
            return True
    return False


def guarding_tests(
    source: str, paths: Iterable[str], workdir: str, exclude: Iterable[str] = ()
) -> dict[str, list[str]]:
    """For each path, the top-level `test_*` functions of `source` that read it.

    A test reads a path when a string constant in its closure (the test and every module-level
    function or constant it reaches) is the path, contains it, is its workdir-relative name, or
    is a directory above it. Timing checks (their closure reads the clock: performance
    budgets) are never guards: they are slow by design and measure the helper, not the file.
    `exclude` names further tests not to use. SyntaxError propagates.
    """
    tree = parse_python(source)
    defs = _globals(tree)
    skip = set(exclude)
    tests = [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test_") and n.name not in skip
    ]
    closures = {t: _closure(t, defs) for t in tests}
    return {
        p: [t for t in tests if not closures[t][1] and _mentions(closures[t][0], p, workdir)]
        for p in paths
    }


def guard_block(tag: str, checks: list[str]) -> str:
    """The prerequisite function of one rewrite (none of its text is compared to anything).

    Each check's outcome (passed, or its failure message) is kept for the rest of the
    verifier run, so later tests requiring it do not run it again."""
    names = ", ".join(checks) + ("," if len(checks) == 1 else "")
    return (
        f"def _{tag}_prerequisites():\n"
        f'    """This stage builds on earlier results: their own checks must pass first."""\n'
        f"    seen = globals().setdefault({GUARD_MEMO!r}, {{}})\n"
        f"    for check in ({names}):\n"
        f"        if check.__name__ not in seen:\n"
        f"            try:\n"
        f"                check()\n"
        f"                seen[check.__name__] = None\n"
        f"            except Exception as e:\n"
        f"                seen[check.__name__] = f'{{type(e).__name__}}: {{e}}'\n"
        f"        if seen[check.__name__] is not None:\n"
        f"            msg = f'prerequisite {{check.__name__}} fails: {{seen[check.__name__]}}'\n"
        f"            raise AssertionError(msg)\n"
    )


def add_guards(tests: str, tag: str, checks: list[str]) -> str:
    """`tests` with a call to `_<tag>_prerequisites()` opening every top-level test function,
    preceded by the prerequisite function itself. Unchanged when `checks` is empty."""
    if not checks:
        return tests
    tree = parse_python(tests)
    lines = tests.split("\n")
    inserts: list[tuple[int, str]] = []
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        body = node.body
        first = body[0]
        if first.lineno == node.lineno:  # `def test_x(): ...` on one line: rebuild it
            return add_guards(_unfold(tests), tag, checks)
        is_doc = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        anchor = body[1] if is_doc and len(body) > 1 else first
        if is_doc and len(body) == 1:
            line, col = (first.end_lineno or first.lineno), first.col_offset
            inserts.append((line, " " * col + f"_{tag}_prerequisites()"))
        else:
            inserts.append((anchor.lineno - 1, " " * anchor.col_offset + f"_{tag}_prerequisites()"))
    for at, text in sorted(inserts, reverse=True):
        lines.insert(at, text)
    return guard_block(tag, checks) + "\n\n" + "\n".join(lines)


def _unfold(tests: str) -> str:
    """The module re-rendered by `ast.unparse` (every body on its own lines)."""
    return ast.unparse(parse_python(tests)) + "\n"


def prerequisite_name(tag: str) -> str:
    """The name of the prerequisite function of the rewrite tagged `tag`."""
    return f"_{tag}_prerequisites"


def _guard_call(node: ast.FunctionDef, guard: str) -> ast.stmt | None:
    """The statement calling `guard()` at the top of `node`'s body (after a docstring)."""
    for stmt in node.body[:2]:
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == guard
        ):
            return stmt
    return None


def guarded_tests(tests: str, tag: str) -> dict[str, list[str]]:
    """Top-level test of `tests` -> the checks its prerequisite guard runs ([] unguarded)."""
    tree = parse_python(tests)
    guard = prerequisite_name(tag)
    checks: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == guard:
            for n in ast.walk(node):
                if isinstance(n, ast.For) and isinstance(n.iter, ast.Tuple):
                    checks = [e.id for e in n.iter.elts if isinstance(e, ast.Name)]
    return {
        node.name: (checks if _guard_call(node, guard) is not None else [])
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def unguard(tests: str, tag: str, names: Iterable[str]) -> str:
    """`tests` with the prerequisite call removed from the named test functions (tests that
    do not read the consumed state need not wait for the earlier work). The prerequisite
    function itself stays (other tests may still call it); unchanged when none is guarded."""
    drop = set(names)
    tree = parse_python(tests)
    guard = prerequisite_name(tag)
    lines = tests.split("\n")
    cut: list[tuple[int, int]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in drop:
            call = _guard_call(node, guard)
            if call is not None:
                cut.append((call.lineno - 1, call.end_lineno or call.lineno))
    for start, end in sorted(cut, reverse=True):
        del lines[start:end]
    return "\n".join(lines)
