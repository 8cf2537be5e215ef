"""The import graph of our packages: no circles, and the layering of ARCHITECTURE.md.

Every import counts, module-level or inside a function (a lazy import is still a circle);
imports under `if TYPE_CHECKING:` do not (they never run). `from pkg import x` counts as
importing the package `pkg` (its `__init__`) unless every `x` is a submodule.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "tasks",
    "executor",
    "sandbox",
    "synthesis",
    "audit",
    "warehouse",
    "training",
    "pipelines",
)
# Who may import whom (ARCHITECTURE.md): a package imports only these of ours.
MAY_IMPORT = {
    "tasks": set(),
    "executor": set(),  # a leaf: where trial work runs (threads or Ray)
    "sandbox": {"tasks"},
    "warehouse": {"tasks"},
    "synthesis": {"tasks", "executor", "sandbox", "warehouse"},
    "audit": {"tasks", "executor", "sandbox", "warehouse"},
    "training": {"tasks", "executor", "sandbox", "warehouse"},
    "pipelines": {"tasks", "executor", "sandbox", "warehouse", "synthesis", "audit", "training"},
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            if "seeds" in f.relative_to(ROOT).parts:
                continue
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                named = [s for s in subs if s in mods]
                targets = named if len(named) == len(subs) else [node.module, *named]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r is not None and r != m:
                    graph[m].add(r)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, f"import circles: {found}"


def test_packages_import_only_the_layers_below():
    wrong = sorted(
        f"{m} imports {t}"
        for m, targets in import_graph().items()
        for t in targets
        if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in MAY_IMPORT[m.split(".")[0]]
    )
    assert not wrong, wrong
