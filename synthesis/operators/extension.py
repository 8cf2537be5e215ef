"""The rewrite contract: what an operator adds to a task, and how a child task is built from it.

An operator never edits a task directly. It returns an `Extension`, and `build_child` applies
it in the order the paper prescribes, so difficulty lands on the executable path before the
public text changes:

1. the reference solution: `steps` are appended to solution/solve.sh (run from the workdir);
2. the environment: files merged (never overwritten), setup steps appended, tools required;
3. the verifier: `tests` (new top-level `test_*` functions) appended to tests/test_outputs.py,
   so they run under the same runner and report one assertion each. Every new test first
   requires the parent's checks on the files the steps consume (`synthesis.guards`), so it
   cannot pass unless the parent's work is done;
4. the instruction, last: rewritten whole (`synthesis.instruction.compose_instruction`) from
   the core task and every stage, this one included; an operator that writes the whole text
   itself (the LLM operator) sets `Extension.instruction`.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

from synthesis.guards import add_guards, guarding_tests
from synthesis.instruction import Stage, compose_instruction
from synthesis.profile import OutputFile, OutputKind, TaskProfile
from tasks.environment import is_rendered, render_dockerfile
from tasks.literals.python import parse_python
from tasks.model import Lineage, Task
from tasks.pools import Pool

VERIFIER_MODULE = "test_outputs.py"
SOURCE_POOL = Pool.RST.value


class RewriteError(ValueError):
    """An operator could not build a valid child (collision, bad generated code, ...)."""


@dataclass(frozen=True)
class Parent:
    """A task that seeds a rewrite: the task, its observed outputs, its operator chain, and
    the parts its instruction is composed from (the core task and the stages added since)."""

    task: Task
    profile: TaskProfile
    chain: tuple[str, ...] = ()  # operators applied from the root seed, oldest first
    core: str | None = None  # the root seed's instruction (None: this task is the root)
    core_title: str | None = None
    stages: tuple[Stage, ...] = ()

    @property
    def hash(self) -> str:
        return self.task.content_hash

    @property
    def root_seed(self) -> str:
        return self.task.lineage.root_seed or self.hash

    @property
    def workdir(self) -> str:
        return self.task.environment.workdir.rstrip("/")

    @property
    def core_instruction(self) -> str:
        return self.core if self.core is not None else self.task.instruction

    @property
    def core_name(self) -> str:
        return self.core_title or self.task.name.split(" [+", 1)[0]

    @property
    def core_outputs(self) -> list[str]:
        """Outputs of the core task's solution (every output no stage produced)."""
        later = {p for s in self.stages for p in s.produces}
        return [f.path for f in self.profile.outputs if not _under_any(f.path, later)]

    @property
    def depth(self) -> int:
        return len(self.stages) + 1

    @cached_property
    def guards(self) -> dict[str, list[str]]:
        """Output path -> the parent's checks that read it (see synthesis.guards). A pure
        function of the parent's verifier and outputs (never of timings), so a re-derived
        assignment builds the same candidate."""
        source = self.task.verifier.get(VERIFIER_MODULE, b"").decode("utf-8", "replace")
        try:
            return guarding_tests(source, [f.path for f in self.profile.outputs], self.workdir)
        except SyntaxError:
            return {}

    def taken_paths(self) -> set[str]:
        """Absolute paths a new step must not create: outputs and environment app files."""
        wd = self.workdir
        taken = {f.path for f in self.profile.outputs}
        taken |= {f"{wd}/{p.removeprefix('app/')}" for p in self.task.environment.files}
        return taken


def _under_any(path: str, roots: set[str]) -> bool:
    return path in roots or any(path.startswith(r.rstrip("/") + "/") for r in roots)


@dataclass(frozen=True)
class RewriteContext:
    """Where a rewrite happens: the round, and a random stream seeded for this assignment.

    `backend` is the sandbox backend an operator may use to observe its own steps (the LLM
    operator runs its proposed steps before writing tests)."""

    round: int
    rng: random.Random
    backend: str = "local"

    @property
    def tag(self) -> str:
        """Suffix of every name this rewrite creates (paths, test functions)."""
        return f"r{self.round}"


@dataclass(frozen=True)
class Extension:
    """What one rewrite adds.

    `text` is the family's phrasing of the new requirement (one paragraph, no heading), from
    which the whole instruction is recomposed; `instruction`, when set, replaces the composed
    text (an operator that rewrote the whole instruction itself). `consumes` lists the
    absolute paths of earlier results the steps read or change (every new test is guarded by
    the parent's checks on them); `creates` the absolute paths the steps write.
    """

    title: str
    steps: list[str]
    tests: str
    text: str
    consumes: list[str] = field(default_factory=list)
    env_files: dict[str, bytes] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    creates: list[str] = field(default_factory=list)
    instruction: str | None = None


@dataclass(frozen=True)
class Feedback:
    """What validation found wrong with a candidate, for an operator that can revise it."""

    verdict: str  # a `synthesis.validate.Verdict` value
    detail: str
    offending: list[str]  # the literals or assertion names the verdict is about
    failing: list[str]  # "name: message" of new assertions the reference solution failed


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
        """Eligible outputs some fast parent check reads (so a new test can be guarded)."""
        out = [f for f in parent.profile.eligible(*self.kinds) if parent.guards.get(f.path)]
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
            return f"needs {self.min_outputs} guarded output(s) of kind {kinds}"
        return None

    def pick(self, parent: Parent, ctx: RewriteContext, k: int | None = None) -> list[OutputFile]:
        """`k` (default: 1..max_outputs) eligible outputs, chosen by the context's rng.

        Half the time the choice is limited to what the parent's latest stage produced (when
        enough of it is eligible), so chains of stages that build on each other grow deeper.
        """
        pool = self.targets(parent)
        if k is None:
            k = ctx.rng.randint(self.min_outputs, max(self.min_outputs, self.max_outputs))
        latest = set(parent.stages[-1].produces) if parent.stages else set()
        recent = [f for f in pool if _under_any(f.path, latest)]
        if len(recent) >= max(1, self.min_outputs) and ctx.rng.random() < 0.5:
            pool = recent
        return sorted(ctx.rng.sample(pool, min(k, len(pool))), key=lambda f: f.rel)

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        raise NotImplementedError

    def revise(
        self, parent: Parent, ctx: RewriteContext, ext: Extension, feedback: Feedback
    ) -> Extension | None:
        """A revised extension answering validation's `feedback`, or None (the default:
        programmatic operators do not revise; validation's own repairs still apply)."""
        return None


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
    tree = parse_python(source)
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
    if not ext.steps or not ext.tests.strip() or not (ext.text.strip() or ext.instruction):
        raise RewriteError(f"{operator}: an extension needs steps, tests and an instruction")
    taken = parent.taken_paths()
    clash = sorted(set(ext.creates) & taken)
    if clash:
        raise RewriteError(f"{operator}: would overwrite existing paths {clash}")
    tag = f"r{round_}"
    # (1) the reference solution: parent's script, then the new executable steps.
    if task.solution is None:
        raise RewriteError(f"{operator}: the parent has no reference solution")
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
    if environment != env and not spec_rendered(task):
        raise RewriteError(
            f"{operator}: the parent's environment/Dockerfile is hand-written; an extension "
            "that changes the environment needs a spec-rendered one"
        )
    # (3) the verifier: new assertions, each guarded by the parent's checks on what the
    # steps consume, appended to the same module.
    old_tests = task.verifier[VERIFIER_MODULE].decode("utf-8")
    checks = list(dict.fromkeys(c for p in ext.consumes for c in parent.guards.get(p, [])))
    try:
        new_names = test_names(ext.tests)
        old_names = set(test_names(old_tests))
        tests = add_guards(ext.tests, tag, checks)
    except SyntaxError as e:
        raise RewriteError(f"{operator}: generated tests do not parse: {e}") from e
    if not new_names:
        raise RewriteError(f"{operator}: extension adds no test_* function")
    if old_names & set(new_names) or len(set(new_names)) != len(new_names):
        raise RewriteError(f"{operator}: test names collide: {sorted(old_names & set(new_names))}")
    header = f"# ---- round {round_}: {operator} ({family}) ----"
    verifier = dict(task.verifier)
    verifier[VERIFIER_MODULE] = f"{old_tests.rstrip()}\n\n\n{header}\n{tests}".encode()
    # (4) the instruction, last: the whole workflow, this stage included.
    stage = child_stage(parent, operator, family, round_, ext)
    instruction = compose_instruction(
        parent.core_instruction,
        parent.core_name,
        parent.core_outputs,
        [*parent.stages, stage],
        parent.workdir,
    )
    digest = hashlib.sha256(
        repr((parent.hash, operator, round_, block, tests, instruction)).encode()
    ).hexdigest()
    tags = list(dict.fromkeys([*task.tags, "rst", family]))
    child = Task(
        id=child_id(task, operator, round_, digest),
        name=f"{parent.core_name} [+{len(parent.chain) + 1} rewrites]",
        instruction=instruction.rstrip("\n") + "\n",
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
    return rerender(child)


def spec_rendered(task: Task) -> bool:
    """True when the task's Dockerfile is absent or rendered from its environment spec (it
    carries the rendered mark), so a changed spec must be rendered again."""
    docker = task.environment.files.get("Dockerfile")
    return docker is None or is_rendered(docker.decode("utf-8", "replace"))


def rerender(task: Task) -> Task:
    """The task with its Dockerfile (if it has one) rendered from its current spec: after an
    extension or a repair changed `requires`, `setup` or the files, the Dockerfile the docker
    backend builds must say the same."""
    env = task.environment
    if "Dockerfile" not in env.files:
        return task
    docker = render_dockerfile(task).encode()
    if env.files["Dockerfile"] == docker:
        return task
    files = {**env.files, "Dockerfile": docker}
    return task.model_copy(update={"environment": env.model_copy(update={"files": files})})


def child_stage(parent: Parent, operator: str, family: str, round_: int, ext: Extension) -> Stage:
    """The stage `ext` adds to the parent's workflow."""
    return Stage(
        round=round_,
        operator=operator,
        family=family,
        title=ext.title,
        text=ext.text,
        consumes=tuple(ext.consumes),
        produces=tuple(ext.creates),
        instruction=ext.instruction,
    )


def extension_block(child: Task, parent: Task) -> str:
    """The lines the child's solve.sh adds to the parent's (its `cd` and the new steps)."""
    old = (parent.solution or {}).get("solve.sh", b"").decode("utf-8").rstrip("\n")
    new = (child.solution or {}).get("solve.sh", b"").decode("utf-8")
    if not new.startswith(old):
        raise ValueError("child's solve.sh does not extend its parent's")
    return new[len(old) :].strip("\n") + "\n"


def new_assertions(child: Task, parent: Task) -> list[str]:
    """Names of the child's assertions that the parent's verifier does not have."""
    old = set(test_names(parent.verifier[VERIFIER_MODULE].decode("utf-8")))
    return [n for n in test_names(child.verifier[VERIFIER_MODULE].decode("utf-8")) if n not in old]
