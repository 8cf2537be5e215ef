"""The rewrite contract: what an operator adds to a task, and how a child task is built from it.

An operator never edits a task directly. It returns an `Extension`, and `build_child` applies
it in the order the paper prescribes, so difficulty lands on the executable path before the
public text changes:

1. the reference solution: `steps` are appended to solution/solve.sh (run from the workdir);
2. the environment: files merged (never overwritten), setup steps appended, tools required;
3. the verifier: `tests` (new top-level `test_*` functions) appended to tests/test_outputs.py,
   so they run under the same runner and report one assertion each;
4. the instruction, last: `section` (a requirement stating every path, format and value the
   new assertions check) appended to instruction.md.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from synthesis.profile import OutputFile, OutputKind, TaskProfile
from tasks.model import Lineage, Task
from tasks.pools import Pool

VERIFIER_MODULE = "test_outputs.py"
SOURCE_POOL = Pool.RST.value


class RewriteError(ValueError):
    """An operator could not build a valid child (collision, bad generated code, ...)."""


@dataclass(frozen=True)
class Parent:
    """A task that seeds a round: the task, its observed outputs, and its operator chain."""

    task: Task
    profile: TaskProfile
    chain: tuple[str, ...] = ()  # operators applied from the root seed, oldest first

    @property
    def hash(self) -> str:
        return self.task.content_hash

    @property
    def root_seed(self) -> str:
        return self.task.lineage.root_seed or self.hash

    @property
    def workdir(self) -> str:
        return self.task.environment.workdir.rstrip("/")

    def taken_paths(self) -> set[str]:
        """Absolute paths a new step must not create: outputs and environment app files."""
        wd = self.workdir
        taken = {f.path for f in self.profile.outputs}
        taken |= {f"{wd}/{p.removeprefix('app/')}" for p in self.task.environment.files}
        return taken


@dataclass(frozen=True)
class RewriteContext:
    """Where a rewrite happens: the round, and a random stream seeded for this assignment."""

    round: int
    rng: random.Random

    @property
    def tag(self) -> str:
        """Suffix of every name this rewrite creates (paths, test functions)."""
        return f"r{self.round}"


@dataclass(frozen=True)
class Extension:
    """What one rewrite adds. `creates` lists the absolute paths the new steps write."""

    title: str
    steps: list[str]
    tests: str
    section: str
    env_files: dict[str, bytes] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    creates: list[str] = field(default_factory=list)


class Operator:
    """A programmatic rewrite operator. Subclasses set the class fields and `extend`.

    `feasible` returns None when the operator applies to the parent, else the reason it does
    not. `extend` must be deterministic given the parent and the context's random stream.
    """

    name: ClassVar[str]
    family: ClassVar[str]
    kinds: ClassVar[tuple[OutputKind, ...]] = ()  # eligible output kinds; () means any
    min_outputs: ClassVar[int] = 1
    max_outputs: ClassVar[int] = 3
    max_lines: ClassVar[int | None] = None  # text outputs longer than this are not eligible

    def targets(self, parent: Parent) -> list[OutputFile]:
        out = parent.profile.eligible(*self.kinds)
        if self.max_lines is not None:
            out = [f for f in out if f.lines is not None and f.lines <= self.max_lines]
        return out

    def feasible(self, parent: Parent) -> str | None:
        problem = runner_problem(parent.task)
        if problem:
            return problem
        if not parent.profile.ok:
            return "parent oracle did not pass when profiled"
        if len(self.targets(parent)) < self.min_outputs:
            kinds = "/".join(self.kinds) or "any"
            return f"needs {self.min_outputs} eligible output(s) of kind {kinds}"
        return None

    def pick(self, parent: Parent, ctx: RewriteContext, k: int | None = None) -> list[OutputFile]:
        """`k` (default: 1..max_outputs) eligible outputs, chosen by the context's rng."""
        pool = self.targets(parent)
        if k is None:
            k = ctx.rng.randint(self.min_outputs, max(self.min_outputs, self.max_outputs))
        return sorted(ctx.rng.sample(pool, min(k, len(pool))), key=lambda f: f.rel)

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        raise NotImplementedError


def runner_problem(task: Task) -> str | None:
    """Why the task's verifier cannot take appended assertions (None when it can)."""
    if task.solution is None or "solve.sh" not in task.solution:
        return "no reference solution/solve.sh"
    if VERIFIER_MODULE not in task.verifier:
        return f"verifier has no {VERIFIER_MODULE}"
    entry = task.verifier.get("test.sh", b"").decode("utf-8", "replace")
    if "run_checks.py" not in entry and "pytest" not in entry:
        return "verifier entry does not run test_outputs.py per assertion"
    return None


def test_names(source: str) -> list[str]:
    """Top-level `test_*` function names of a Python module's source (SyntaxError raises)."""
    tree = ast.parse(source)
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
    ]


def render_tests(template: str, tag: str, spec: Mapping[str, object]) -> str:
    """A test block: `@T@` becomes the tag and `@SPEC@` the spec as a Python literal."""
    return template.replace("@SPEC@", repr(spec)).replace("@T@", tag).strip("\n") + "\n"


_SLUG = re.compile(r"[^a-z0-9]+")


def child_id(parent: Task, operator: str, round_: int, digest: str) -> str:
    base = parent.id.split("--", 1)[0][:60]
    op = _SLUG.sub("-", operator.lower()).strip("-")[:24]
    return f"{base}--r{round_}-{op}-{digest[:8]}"


def build_child(parent: Parent, operator: str, family: str, round_: int, ext: Extension) -> Task:
    """Apply `ext` to the parent in the contract's order (see the module docstring).

    Raises RewriteError when the extension collides with the parent (a created path or
    environment file that exists, a test name already defined) or its tests do not parse.
    """
    task = parent.task
    if not ext.steps or not ext.tests.strip() or not ext.section.strip():
        raise RewriteError(f"{operator}: an extension needs steps, tests and an instruction")
    taken = parent.taken_paths()
    clash = sorted(set(ext.creates) & taken)
    if clash:
        raise RewriteError(f"{operator}: would overwrite existing paths {clash}")
    # (1) the reference solution: parent's script, then the new executable steps.
    assert task.solution is not None  # runner_problem guards this
    solve = task.solution["solve.sh"].decode("utf-8").rstrip("\n")
    block = "\n".join([f"# --- round {round_}: {operator} ({family}) ---", *ext.steps])
    solution = dict(task.solution)
    solution["solve.sh"] = (f"{solve}\n\ncd {parent.workdir}\n{block}\n").encode()
    # (2) the environment: new files only, setup after the parent's, tools as a union.
    env = task.environment
    dup = sorted(set(ext.env_files) & set(env.files))
    if dup:
        raise RewriteError(f"{operator}: environment files exist already: {dup}")
    environment = env.model_copy(
        update={
            "files": {**env.files, **ext.env_files},
            "setup": [*env.setup, *ext.setup],
            "requires": list(dict.fromkeys([*env.requires, *ext.requires])),
        }
    )
    # (3) the verifier: new assertions appended to the same module.
    old_tests = task.verifier[VERIFIER_MODULE].decode("utf-8")
    try:
        new_names = test_names(ext.tests)
        old_names = set(test_names(old_tests))
    except SyntaxError as e:
        raise RewriteError(f"{operator}: generated tests do not parse: {e}") from e
    if not new_names:
        raise RewriteError(f"{operator}: extension adds no test_* function")
    if old_names & set(new_names) or len(set(new_names)) != len(new_names):
        raise RewriteError(f"{operator}: test names collide: {sorted(old_names & set(new_names))}")
    header = f"# ---- round {round_}: {operator} ({family}) ----"
    verifier = dict(task.verifier)
    verifier[VERIFIER_MODULE] = f"{old_tests.rstrip()}\n\n\n{header}\n{ext.tests}".encode()
    # (4) the instruction, last: the new requirement, stated in full.
    instruction = f"{task.instruction.rstrip()}\n\n{ext.section.strip()}\n"
    digest = hashlib.sha256(
        repr((parent.hash, operator, round_, block, ext.tests, instruction)).encode()
    ).hexdigest()
    tags = list(dict.fromkeys([*task.tags, "rst", family]))
    return Task(
        id=child_id(task, operator, round_, digest),
        name=f"{task.name.split(' [+', 1)[0]} [+{len(parent.chain) + 1} rewrites]",
        instruction=instruction,
        category=task.category,
        difficulty=task.difficulty,
        tags=tags,
        author=task.author,
        limits=task.limits,
        environment=environment,
        solution=solution,
        verifier=verifier,
        binary_verifier=task.binary_verifier,
        lineage=Lineage(
            parents=[parent.hash],
            root_seed=parent.root_seed,
            round=round_,
            operator=operator,
            family=family,
            source_pool=SOURCE_POOL,
        ),
    )


def new_assertions(child: Task, parent: Task) -> list[str]:
    """Names of the child's assertions that the parent's verifier does not have."""
    old = set(test_names(parent.verifier[VERIFIER_MODULE].decode("utf-8")))
    return [n for n in test_names(child.verifier[VERIFIER_MODULE].decode("utf-8")) if n not in old]
