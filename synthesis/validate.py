"""Validation of a candidate: static checks, then trials in fresh sandboxes, with bounded repair.

A candidate is accepted only when every check below holds. Each failed check is a typed
`Verdict`, with the offending literals or assertion names in `Validation.offending`:

before any sandbox time (`synthesis.assertion_checks`, `synthesis.coverage`):
- no new test is vacuous (cannot fail) → `vacuous_assertion`;
- no new test depends on chance or the clock → `flaky_check`;
in fresh sandboxes (`sandbox.run_trial`):
0. data flow (`synthesis.probes.DataFlowAgent`): the parent's solution, the consumed files
   perturbed, the new steps, the files restored exactly, the verifier. A new assertion that
   fails here checks something derived from (or done to) the parent's output: it is
   *dependent*; one that passes is *independent* and loses its prerequisite guard (it does
   not read the consumed state, so the parent's failure must not zero it). The oracle below
   runs on the task so re-guarded;
1. oracle (profiling, probing the environment before the solution runs):
   - every literal a new test reads or compares is in the instruction or in the environment
     before the agent starts → else `solution_artifact` (a path only the reference solution
     creates) or `hidden_requirement`;
   - it passes every assertion → else, after one more run, `flaky_check` (the runs disagree)
     or `oracle_failed`; `reruns - 1` more runs agree assertion by assertion → `flaky_check`;
2. nop: no new assertion passes → else `vacuous_assertion` (it also passes after the workdir
   is wiped) or `free_reward`; nop's share of the dense reward is at most the cap →
   `free_reward`; then at least one new assertion is dependent (`dependency_ok`, the
   data-flow measurement) → else `dependency_missing` (reward for nothing done is the finding
   named first when both hold);
3. the extension's steps alone (`synthesis.probes.ExtensionOnlyAgent`): every dependent new
   assertion fails (the reward needs the earlier work too) → else `dependency_missing`;
   what they earn beyond their own independent assertions is at most the cap → `free_reward`;
4. the parent's solution: every new assertion fails → else `not_load_bearing` (its share of
   the child's reward is recorded: `parent_share`);
5. every scripted hack of `tasks.hacks` (stub the named paths, echo the instruction's
   literals into the outputs, copy inputs to outputs, ...: what an agent can do without the
   work): every new assertion fails → else `hackable`, naming the hack and the assertions;
6. the scripted hacks again, each AFTER the parent's solution (`AFTER_PARENT_HACKS`, with
   `sentence_literals`: the constant a sentence states beside its file): a new assertion
   one of them earns there needs nothing of the parent's output (a guard passed by the
   parent's work, then a constant or a copy), so it is independent whatever the data-flow
   probe saw. The dependent share (`Measures.dependent_share`: new assertions dependent by
   data flow and earned by no hack after the parent's solution, over all new assertions)
   must reach `min_dependent_share` → else `dependency_missing`. (Checked on the data-flow
   evidence alone right after the oracle, so a candidate short of it costs no hack trials.)

A trial that fails for infrastructure (`result.rewardable` false: sandbox, an environment that
built for the parent, cancelled) is no evidence about the candidate: it is retried, and if it
keeps failing the candidate is recorded as `infrastructure_error`, never as a defect.

Recoverable failures are repaired up to `max_repairs` times: a verifier (or agent) timeout
raises the limit; a tool the solution could not find is added to `requires`; a new assertion
that reads a path the solution wrote elsewhere is aligned to where it was written. Never
raises for the candidate's own failures.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum

from sandbox import Agent, CommandAgent, run_trial
from synthesis import coverage as cov
from synthesis.assertion_checks import nondeterministic_tests, vacuous_tests
from synthesis.guards import guarded_tests, unguard
from synthesis.instruction import Stage
from synthesis.operators.extension import (
    VERIFIER_MODULE,
    Parent,
    extension_block,
    new_assertions,
    rerender,
)
from synthesis.probes import (
    DataFlowAgent,
    ExtensionOnlyAgent,
    ParentSolutionAgent,
    ParentThenCommandAgent,
    WipeAgent,
)
from synthesis.profile import ProfilingOracle, TaskProfile
from tasks.hacks import AFTER_WORK, HACK_TIMEOUT_S, HACKS, hack_outcome, hack_scripts
from tasks.model import Task
from tasks.results import FailureMode, TrialResult

MAX_TIMEOUT_S = 600.0
INFRA_BACKOFF_S = 1.0

__all__ = [
    "ParentSolutionAgent",
    "Validation",
    "ValidationConfig",
    "Verdict",
    "new_tests_source",
    "validate",
]


class Verdict(StrEnum):
    """Outcome of validating a candidate: accepted, or the reason it was discarded."""

    ACCEPTED = "accepted"
    CONTAMINATED = "contaminated"
    REWRITE_ERROR = "rewrite_error"
    INVALID_LLM_OUTPUT = "invalid_llm_output"
    ENVIRONMENT_ERROR = "environment_error"
    MISSING_TOOL = "missing_tool"
    VERIFIER_TIMEOUT = "verifier_timeout"
    AGENT_TIMEOUT = "agent_timeout"
    ORACLE_FAILED = "oracle_failed"
    FLAKY_CHECK = "flaky_check"
    VACUOUS_ASSERTION = "vacuous_assertion"
    HIDDEN_REQUIREMENT = "hidden_requirement"
    SOLUTION_ARTIFACT = "solution_artifact"
    FREE_REWARD = "free_reward"
    DEPENDENCY_MISSING = "dependency_missing"
    NOT_LOAD_BEARING = "not_load_bearing"
    HACKABLE = "hackable"  # a scripted hack passes a new assertion
    INFRASTRUCTURE_ERROR = "infrastructure_error"  # not evidence about the candidate

    @property
    def about_candidate(self) -> bool:
        """False for a verdict that says nothing about the candidate itself."""
        return self != Verdict.INFRASTRUCTURE_ERROR


@dataclass(frozen=True)
class ValidationConfig:
    """How hard to check a candidate. `reruns` counts oracle runs in total (>= 1);
    `free_reward_cap` is the largest share of the dense reward that nop, or the extension's
    steps alone, may earn; `infra_retries` how often a trial that failed for infrastructure
    is run again; `hacks` runs the scripted hacks (step 5), `hack_workers` of them at once,
    each cut after `hack_timeout_s`."""

    reruns: int = 2
    max_repairs: int = 2
    backend: str = "local"
    free_reward_cap: float = 0.2
    infra_retries: int = 2
    hacks: bool = True
    hack_workers: int = 2
    hack_timeout_s: float = HACK_TIMEOUT_S
    min_dependent_share: float = 0.5
    """Share of the new assertions that must need the parent's output (step 6)."""
    hacks_only: tuple[str, ...] = ()
    """Run only these scripted hacks in steps 5 and 6 (quick runs, tests); () runs all."""

    def __post_init__(self) -> None:
        if self.reruns < 1:
            raise ValueError(f"reruns must be >= 1, got {self.reruns!r}")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs must be >= 0, got {self.max_repairs!r}")
        if not 0 <= self.free_reward_cap <= 1:
            raise ValueError(f"free_reward_cap must be in [0, 1], got {self.free_reward_cap!r}")
        if self.infra_retries < 0:
            raise ValueError(f"infra_retries must be >= 0, got {self.infra_retries!r}")
        if self.hack_workers < 1:
            raise ValueError(f"hack_workers must be >= 1, got {self.hack_workers!r}")
        if self.hack_timeout_s <= 0:
            raise ValueError(f"hack_timeout_s must be > 0, got {self.hack_timeout_s!r}")
        unknown = sorted(set(self.hacks_only) - set(HACKS) - set(AFTER_WORK))
        if unknown:
            raise ValueError(f"hacks_only: unknown hacks {unknown}")
        if not 0 <= self.min_dependent_share <= 1:
            raise ValueError(
                f"min_dependent_share must be in [0, 1], got {self.min_dependent_share!r}"
            )


@dataclass
class Check:
    """One attempt's findings: the verdict, what it is about, and what a repair needs."""

    verdict: Verdict
    detail: str = ""
    offending: list[str] = field(default_factory=list)  # literals or assertion names
    failing: list[tuple[str, str]] = field(default_factory=list)  # (assertion, message)
    agent_stderr: str = ""


@dataclass
class Measures:
    """What validation measured, stored per candidate (None: not reached)."""

    coverage: float | None = None  # share of the new tests' literals that are stated
    uncovered: list[str] = field(default_factory=list)
    nop_share: float | None = None
    nop_passed: int | None = None
    ext_only_share: float | None = None
    # The share of the reward the extension's steps alone earn on assertions they cannot
    # earn by their own work (the parent's, and the dependent new ones): free reward.
    ext_only_free_share: float | None = None
    dependency_ok: bool | None = None  # the data-flow measurement (see `DataFlow`)
    flow: DataFlow | None = None
    parent_share: float | None = None  # the parent's solution alone: share of the reward
    hacks: int | None = None  # scripted hacks run
    hack_new_share: float | None = None  # the largest share of the new assertions a hack passed
    # New assertions a scripted hack earned after the parent's solution (step 6): independent
    hacked_after_parent: list[str] | None = None
    # Share of the new assertions that need the parent's output: dependent by data flow and
    # earned by no hack after the parent's solution
    dependent_share: float | None = None

    @property
    def free_reward_share(self) -> float | None:
        shares = [s for s in (self.nop_share, self.ext_only_free_share) if s is not None]
        return max(shares) if shares else None


@dataclass(frozen=True)
class DataFlow:
    """The data-flow probe's evidence, over the new assertions that passed for the oracle.

    `dependent`: failed once the consumed files were perturbed before the new steps and
    restored after them (what they check was derived from, or done to, the parent's output);
    `independent`: passed all the same; `inconclusive`: failed while a parent check guarding
    them failed too (the restoration did not bring the parent's state back, so the failure
    may be the guard's); `perturbed`: the files perturbed (absolute paths); `hacked`: new
    assertions a scripted hack earned after the parent's solution (step 6), moved from
    `dependent` to `independent`: they need the parent's work done (a guard), not its
    output."""

    dependent: tuple[str, ...] = ()
    independent: tuple[str, ...] = ()
    inconclusive: tuple[str, ...] = ()
    perturbed: tuple[str, ...] = ()
    hacked: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.dependent)

    def share(self, new: int) -> float:
        """The dependent share of `new` assertions (0 when there are none)."""
        return len(self.dependent) / new if new else 0.0

    def after_hacks(self, hacked: set[str]) -> DataFlow:
        """This evidence with the assertions a hack earned after the parent's solution
        counted independent."""
        moved = tuple(n for n in self.dependent if n in hacked)
        return replace(
            self,
            dependent=tuple(n for n in self.dependent if n not in hacked),
            independent=(*self.independent, *moved),
            inconclusive=tuple(n for n in self.inconclusive if n not in hacked),
            hacked=tuple(sorted(hacked)),
        )


def data_flow(
    flow: TrialResult, oracle: TrialResult, guards: dict[str, list[str]], perturbed: list[str]
) -> DataFlow:
    """Classify the new assertions (the keys of `guards`: test -> its guard checks) by the
    data-flow trial against the oracle's (see `DataFlow`). A new assertion the oracle failed
    is evidence of nothing and is left out. A failure is inconclusive when the assertion is
    missing from the trial's report, or the trial failed as a trial (a timeout, a limit, the
    probe crashing: the failure may be that); steps exiting non-zero on the perturbed input
    are what the probe expects."""
    ok_flow = {a.name: a.ok for a in flow.assertions}
    ok_oracle = {a.name: a.ok for a in oracle.assertions}
    trusted = flow.failure_mode == FailureMode.NONE  # a non-zero exit of the steps is NONE
    dependent, independent, inconclusive = [], [], []
    for name, checks in guards.items():
        if not ok_oracle.get(name, False):
            continue
        if ok_flow.get(name, False):
            independent.append(name)
        elif not trusted or name not in ok_flow or any(not ok_flow.get(c, False) for c in checks):
            inconclusive.append(name)
        else:
            dependent.append(name)
    return DataFlow(tuple(dependent), tuple(independent), tuple(inconclusive), tuple(perturbed))


@dataclass
class Validation:
    """The outcome for one candidate; `task` is the final (possibly repaired) version."""

    task: Task
    verdict: Verdict
    detail: str = ""
    offending: list[str] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    profile: TaskProfile | None = None
    repairs: list[str] = field(default_factory=list)
    new_assertions: list[str] = field(default_factory=list)
    measures: Measures = field(default_factory=Measures)
    sandbox_s: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED


def new_tests_source(child: Task, parent: Task) -> str:
    """The test code the child adds to its parent's verifier module."""
    tests = child.verifier[VERIFIER_MODULE].decode("utf-8")
    base = parent.verifier[VERIFIER_MODULE].decode("utf-8").rstrip()
    if not tests.startswith(base):
        raise ValueError("child does not extend its parent's verifier")
    return tests[len(base) :]


def _share(r: TrialResult) -> float:
    return r.passed / r.total if r.total else 0.0


def _statuses(r: TrialResult) -> list[tuple[str, bool]]:
    return [(a.name, a.ok) for a in r.assertions]


class _Trials:
    """Runs trials for one candidate, retrying infrastructure failures, recording each."""

    def __init__(self, task: Task, parent: Parent, cfg: ValidationConfig, out: list[TrialResult]):
        self.task, self.parent, self.cfg, self.out = task, parent, cfg, out

    def run(self, make_agent: Callable[[], Agent | str]) -> tuple[TrialResult, Agent | str]:
        for attempt in range(self.cfg.infra_retries + 1):
            agent = make_agent()
            r = run_trial(self.task, agent, self.cfg.backend)
            self.out.append(r)
            if r.rewardable or self._candidate_environment(r):
                return r, agent
            if attempt < self.cfg.infra_retries:
                time.sleep(INFRA_BACKOFF_S * (2**attempt))
        return r, agent

    def _candidate_environment(self, r: TrialResult) -> bool:
        """An environment error of an environment the candidate changed is the candidate's."""
        return (
            r.failure_mode == FailureMode.ENVIRONMENT_ERROR
            and self.task.environment_hash != self.parent.task.environment_hash
        )


def _brief(detail: str, limit: int = 600) -> str:
    """`detail` cut to `limit` characters, keeping its last line: a build's reason (apt's
    "E: Unable to locate package ...") comes after pages of output."""
    if len(detail) <= limit:
        return detail
    last = ([ln for ln in detail.splitlines() if ln.strip()] or [""])[-1][-200:]
    return f"{detail[: limit - len(last) - 5]} ... {last}"


def _trial_problem(r: TrialResult, who: str, candidate_env: bool) -> Check | None:
    """A check for trials that failed as trials (not by assertions), else None."""
    mode = r.failure_mode
    if mode == FailureMode.NONE:
        return None
    detail = f"{who}: {mode}: {_brief(r.failure_detail)}"
    if mode == FailureMode.ENVIRONMENT_ERROR and candidate_env:
        missing = _MISSING_PACKAGE.search(r.failure_detail)
        return Check(Verdict.MISSING_TOOL if missing else Verdict.ENVIRONMENT_ERROR, detail)
    if not r.rewardable:
        return Check(Verdict.INFRASTRUCTURE_ERROR, detail)
    if mode == FailureMode.VERIFIER_TIMEOUT:
        return Check(Verdict.VERIFIER_TIMEOUT, detail)
    if mode == FailureMode.AGENT_TIMEOUT and who == "oracle":
        return Check(Verdict.AGENT_TIMEOUT, detail)
    if who == "oracle":
        return Check(Verdict.ORACLE_FAILED, detail)
    return None


def static_check(task: Task, parent: Parent) -> Check | None:
    """The checks that need no sandbox: vacuous and nondeterministic new tests."""
    source = new_tests_source(task, parent.task)
    names = new_assertions(task, parent.task)
    vacuous = vacuous_tests(source, names)
    if vacuous:
        return Check(Verdict.VACUOUS_ASSERTION, f"cannot fail: {vacuous}", vacuous)
    flaky = nondeterministic_tests(source, names)
    if flaky:
        return Check(Verdict.FLAKY_CHECK, f"depend on chance or the clock: {flaky}", flaky)
    return None


def stage_tag(stage: Stage | None) -> str:
    """The name tag of the stage's new tests and guard (`r<round>`)."""
    return f"r{stage.round}" if stage is not None else "r0"


def reguard(task: Task, parent: Task, tag: str, independent: list[str]) -> Task:
    """`task` with the prerequisite guard removed from the `independent` new tests."""
    block = new_tests_source(task, parent)
    cut = unguard(block, tag, independent)
    if cut == block:
        return task
    verifier = dict(task.verifier)
    verifier[VERIFIER_MODULE] = (
        task.verifier[VERIFIER_MODULE].decode("utf-8")[: -len(block)] + cut
    ).encode()
    return task.model_copy(update={"verifier": verifier})


@dataclass
class _FlowRun:
    """The data-flow trial and what it needs to be read once the oracle has run."""

    result: TrialResult
    guards: dict[str, list[str]]  # new test -> its guard checks, as the trial ran it
    perturbed: list[str]


def check_once(
    task: Task, parent: Parent, stage: Stage | None, cfg: ValidationConfig, out: Validation
) -> tuple[Check, TaskProfile | None, Task]:
    """One validation attempt (see the module docstring); appends its trials to `out`.
    Returns the check, the oracle's profile and the task as validated (re-guarded)."""
    out.measures = Measures()
    static = static_check(task, parent)
    if static:
        return static, None, task
    # 0. data flow: the parent's solution, perturbed consumed files, the new steps, restored.
    if parent.task.solution is None:
        raise ValueError("a parent without a reference solution cannot be extended")
    tag = stage_tag(stage)
    consumes = list(stage.consumes) if stage else []
    block = extension_block(task, parent.task)
    parent_solve = parent.task.solution.get("solve.sh", b"").decode("utf-8")
    trials = _Trials(task, parent, cfg, out.trials)
    cand_env = task.environment_hash != parent.task.environment_hash
    flow, agent = trials.run(lambda: DataFlowAgent(parent_solve, block, consumes))
    assert isinstance(agent, DataFlowAgent)
    problem = _trial_problem(flow, "data-flow", cand_env)
    if problem:
        return problem, None, task
    run = _FlowRun(flow, guarded_tests(new_tests_source(task, parent.task), tag), agent.perturbed)
    passed = {a.name for a in flow.assertions if a.ok}
    task = reguard(task, parent.task, tag, [n for n in run.guards if n in passed])
    check, profile = _check_trials(task, parent, consumes, cfg, out, run)
    return check, profile, task


def _check_trials(
    task: Task,
    parent: Parent,
    consumes: list[str],
    cfg: ValidationConfig,
    out: Validation,
    run: _FlowRun,
) -> tuple[Check, TaskProfile | None]:
    """Steps 1-5 of one attempt on the re-guarded task (see the module docstring)."""
    m = out.measures
    trials = _Trials(task, parent, cfg, out.trials)
    cand_env = task.environment_hash != parent.task.environment_hash
    new = set(new_assertions(task, parent.task))
    pending = cov.pending(task, new_tests_source(task, parent.task))
    # 1. oracle, probing the environment for literals the instruction does not state.
    first, probe = trials.run(lambda: ProfilingOracle(pending.probe_paths, pending.probe_strings))
    assert isinstance(probe, ProfilingOracle)
    profile = probe.profile(task, first)
    stderr = probe.outcome.detail if probe.outcome else ""
    problem = _trial_problem(first, "oracle", cand_env)
    if problem and problem.verdict != Verdict.ORACLE_FAILED:
        problem.agent_stderr = stderr
        return problem, profile
    result = cov.finish(pending, probe.present, profile)
    m.coverage, m.uncovered = result.ratio, [u.literal for u in result.uncovered]
    if result.uncovered:
        artifacts = [u.literal for u in result.uncovered if u.artifact]
        if artifacts:
            return Check(
                Verdict.SOLUTION_ARTIFACT,
                f"tests read {artifacts}, which only the reference solution creates and the "
                "instruction never names",
                artifacts,
            ), profile
        return Check(
            Verdict.HIDDEN_REQUIREMENT,
            f"tests compare literals neither the instruction nor the environment states: "
            f"{m.uncovered[:8]}",
            m.uncovered,
        ), profile
    if problem or not first.resolved:
        failing = [(a.name, a.message) for a in first.assertions if not a.ok]
        if first.assertions:  # the verifier ran: does a second run agree?
            again, _ = trials.run(lambda: "oracle")
            if again.rewardable and _statuses(again) != _statuses(first):
                names = sorted({n for n, _ in set(_statuses(again)) ^ set(_statuses(first))})
                return Check(
                    Verdict.FLAKY_CHECK, f"oracle runs disagree on {names[:6]}", names
                ), profile
        if problem:
            problem.agent_stderr = stderr
            return problem, profile
        said = ", ".join(n for n, _ in failing) or "no assertions reported"
        return Check(
            Verdict.ORACLE_FAILED, f"oracle fails {said}", [n for n, _ in failing], failing, stderr
        ), profile
    for i in range(1, cfg.reruns):
        again, _ = trials.run(lambda: "oracle")
        problem = _trial_problem(again, "oracle", cand_env)
        if problem and problem.verdict != Verdict.ORACLE_FAILED:
            return problem, profile  # a timeout (repairable) or infrastructure, not chance
        if _statuses(again) != _statuses(first) or again.failure_mode != first.failure_mode:
            names = sorted({n for n, _ in set(_statuses(again)) ^ set(_statuses(first))})
            return Check(
                Verdict.FLAKY_CHECK, f"oracle run {i + 1} disagrees on {names[:6]}", names
            ), profile
    # The data-flow evidence, read against the oracle: enough dependent assertions.
    m.flow = data_flow(run.result, first, run.guards, run.perturbed)
    m.dependent_share = m.flow.share(len(new))
    m.dependency_ok = m.flow.ok and m.dependent_share >= cfg.min_dependent_share
    no_flow: Check | None = None  # decided after nop: reward for nothing is the finding to name
    if m.flow.ok and not m.dependency_ok:
        no_flow = _short_share(m.flow, len(new), cfg)
    elif not m.flow.ok:
        said = (
            f"no consumed file of the parent's was perturbed (consumes {consumes})"
            if not m.flow.perturbed
            else f"with {list(m.flow.perturbed)} perturbed before the new steps and restored "
            "after them"
        )
        others = sorted([*m.flow.independent, *m.flow.inconclusive])
        no_flow = Check(
            Verdict.DEPENDENCY_MISSING,
            f"{said}, no new assertion changes (independent: {list(m.flow.independent)}, "
            f"inconclusive: {list(m.flow.inconclusive)}): the new work does not use the "
            "parent's output",
            others,
        )
    # 2. nop: no new assertion passes; nop's share within the cap.
    nop, _ = trials.run(lambda: "nop")
    problem = _trial_problem(nop, "nop", cand_env)
    if problem:
        return problem, profile
    m.nop_share, m.nop_passed = _share(nop), nop.passed
    free = sorted(a.name for a in nop.assertions if a.name in new and a.ok)
    if free:
        wipe, _ = trials.run(WipeAgent)
        problem = _trial_problem(wipe, "wipe", cand_env)
        if problem:
            return problem, profile
        vacuous = sorted(a.name for a in wipe.assertions if a.name in free and a.ok)
        if vacuous:
            return Check(
                Verdict.VACUOUS_ASSERTION,
                f"pass with nothing done and with the workdir wiped: {vacuous}",
                vacuous,
            ), profile
        return Check(Verdict.FREE_REWARD, f"new assertions pass with nothing done: {free}", free), (
            profile
        )
    if m.nop_share > cfg.free_reward_cap:
        return Check(
            Verdict.FREE_REWARD,
            f"nop earns {nop.passed}/{nop.total} of the reward (cap {cfg.free_reward_cap:.0%})",
            sorted(a.name for a in nop.assertions if a.ok),
        ), profile
    if no_flow is not None:
        return no_flow, profile
    # 3. the extension's steps alone, on the untouched environment with stubbed inputs.
    block = extension_block(task, parent.task)
    ext, _ = trials.run(lambda: ExtensionOnlyAgent(block, consumes))
    problem = _trial_problem(ext, "extension-only", cand_env)
    if problem:
        return problem, profile
    own = set(m.flow.independent)  # the new steps' own work: theirs to earn
    m.ext_only_share = _share(ext)
    unearned = sorted(a.name for a in ext.assertions if a.ok and a.name not in own)
    m.ext_only_free_share = len(unearned) / ext.total if ext.total else 0.0
    without = sorted(n for n in unearned if n in new)
    if without:
        m.dependency_ok = False
        return Check(
            Verdict.DEPENDENCY_MISSING,
            f"pass with only the new steps, the earlier work not done: {without}",
            without,
        ), profile
    if m.ext_only_free_share > cfg.free_reward_cap:
        return Check(
            Verdict.FREE_REWARD,
            f"the new steps alone earn {len(unearned)}/{ext.total} beyond their own "
            f"assertions (cap {cfg.free_reward_cap:.0%})",
            unearned,
        ), profile
    # 4. the parent's solution: every new assertion fails.
    if parent.task.solution is None:
        raise ValueError("a parent without a reference solution cannot be extended")
    solution = parent.task.solution
    probe_parent, _ = trials.run(lambda: ParentSolutionAgent(solution))
    problem = _trial_problem(probe_parent, "parent-solution", cand_env)
    if problem:
        return problem, profile
    m.parent_share = _share(probe_parent)
    already = sorted(a.name for a in probe_parent.assertions if a.name in new and a.ok)
    if already:
        return Check(
            Verdict.NOT_LOAD_BEARING, f"the parent's solution already passes {already}", already
        ), profile
    # 5. the scripted hacks: no new assertion passes.
    if cfg.hacks:
        hacked = _hack_check(task, trials, new, cfg, cand_env, m)
        if hacked:
            return hacked, profile
        # 6. the scripted hacks after the parent's solution: what they earn is independent.
        problem, earned = _after_parent_hacks(task, parent, trials, new, cfg, cand_env)
        if problem:
            return problem, profile
        m.flow = m.flow.after_hacks(earned)
        m.hacked_after_parent = sorted(earned)
        m.dependent_share = m.flow.share(len(new))
        m.dependency_ok = m.flow.ok and m.dependent_share >= cfg.min_dependent_share
        if not m.dependency_ok:
            return _short_share(m.flow, len(new), cfg), profile
    share = f"{len(m.flow.dependent)}/{len(new)} need the parent's output"
    return Check(Verdict.ACCEPTED, f"{len(new)} new assertions, all load-bearing; {share}"), (
        profile
    )


def _short_share(flow: DataFlow, new: int, cfg: ValidationConfig) -> Check:
    """`dependency_missing`: too few new assertions need the parent's output."""
    hacked = f"; earned by a scripted hack after the parent's solution: {list(flow.hacked)}"
    return Check(
        Verdict.DEPENDENCY_MISSING,
        f"only {len(flow.dependent)} of {new} new assertions need the parent's output "
        f"({flow.share(new):.0%} < {cfg.min_dependent_share:.0%}; dependent: "
        f"{list(flow.dependent)}, independent: {list(flow.independent)}"
        + (hacked if flow.hacked else "")
        + ")",
        sorted([*flow.independent, *flow.inconclusive]),
    )


def _only(cfg: ValidationConfig, names: list[str]) -> list[str]:
    return [n for n in names if n in cfg.hacks_only] if cfg.hacks_only else names


AFTER_PARENT_HACKS = (
    "stub_paths", "echo_literals", "sentence_literals", "shaped_outputs", "copy_inputs",
    "exit_zero", "git_commit", "everything",
)  # fmt: skip
"""The hacks step 6 runs after the parent's solution: those that put content where the new
outputs go (the rest only touch what exists: modes, times, the verifier's reports)."""


def _after_parent_hacks(
    task: Task,
    parent: Parent,
    trials: _Trials,
    new: set[str],
    cfg: ValidationConfig,
    cand_env: bool,
) -> tuple[Check | None, set[str]]:
    """Step 6: each of AFTER_PARENT_HACKS run after the parent's reference solution; the
    new assertions any of them passes (an infrastructure failure after the retries stops
    the check)."""
    solution = parent.task.solution or {}
    names = _only(cfg, list(AFTER_PARENT_HACKS))
    scripts = hack_scripts(task.instruction, task.environment.workdir, names) if names else []

    def one(h):
        command = h.cut_after(cfg.hack_timeout_s)
        r, _ = trials.run(lambda: ParentThenCommandAgent(solution, command, f"parent+{h.name}"))
        return h, r

    with ThreadPoolExecutor(max_workers=cfg.hack_workers) as pool:
        runs = list(pool.map(one, scripts))
    earned: set[str] = set()
    for h, r in runs:
        problem = None if r.rewardable else _trial_problem(r, f"parent+{h.name}", cand_env)
        if problem:
            return problem, earned
        earned |= set(hack_outcome(h.name, r).passed) & new
    return None, earned


def _hack_check(
    task: Task, trials: _Trials, new: set[str], cfg: ValidationConfig, cand_env: bool, m: Measures
) -> Check | None:
    """Step 5: each scripted hack as the agent; a new assertion one passes is hackable."""
    names = _only(cfg, list(HACKS))
    scripts = hack_scripts(task.instruction, task.environment.workdir, names) if names else []

    def one(h):
        command = h.cut_after(cfg.hack_timeout_s)
        r, _ = trials.run(lambda: CommandAgent(command, name=f"hack-{h.name}"))
        return h, r

    with ThreadPoolExecutor(max_workers=cfg.hack_workers) as pool:
        runs = list(pool.map(one, scripts))
    m.hacks, m.hack_new_share = len(runs), 0.0
    worst: tuple[str, list[str]] | None = None
    for h, r in runs:
        # A hack trial that fails as a trial (its verifier timed out on the hack's files, it
        # tampered) is a failed attempt that earned what it passed; only a trial that says
        # nothing (infrastructure, after the retries) stops the check.
        problem = None if r.rewardable else _trial_problem(r, f"hack {h.name}", cand_env)
        if problem:
            return problem
        passed = sorted(set(hack_outcome(h.name, r).passed) & new)
        if new and len(passed) / len(new) > m.hack_new_share:
            m.hack_new_share = len(passed) / len(new)
            worst = (h.name, passed)
    if worst is None:
        return None
    name, passed = worst
    return Check(
        Verdict.HACKABLE, f"the scripted hack {name!r} passes new assertions {passed}", passed
    )


# A required tool the environment cannot provide: the package manager's words for it (a
# Dockerfile build), or the sandbox's own check of `requires`.
_MISSING_PACKAGE = re.compile(
    r"Unable to locate package|has no installation candidate|tools missing", re.IGNORECASE
)
_NOT_FOUND = re.compile(
    r"(?:^|\n)(?:[^\n:]*: )?(?:line \d+: )?([A-Za-z0-9_.+-]+): command not found"
)
_MISSING_PATH = re.compile(r"No such file or directory: '([^']+)'")


def repair(
    task: Task, parent: Parent, check: Check, profile: TaskProfile | None
) -> tuple[Task, str] | None:
    """A repaired task and a note saying what changed, or None if `check` is unrecoverable."""
    limits = task.limits
    if check.verdict == Verdict.VERIFIER_TIMEOUT and limits.verifier_timeout_s < MAX_TIMEOUT_S:
        new = min(MAX_TIMEOUT_S, limits.verifier_timeout_s * 2)
        fixed = task.model_copy(
            update={"limits": limits.model_copy(update={"verifier_timeout_s": new})}
        )
        return fixed, f"verifier timeout {limits.verifier_timeout_s:g}s -> {new:g}s"
    if check.verdict == Verdict.AGENT_TIMEOUT and limits.agent_timeout_s < MAX_TIMEOUT_S * 3:
        new = min(MAX_TIMEOUT_S * 3, limits.agent_timeout_s * 2)
        fixed = task.model_copy(
            update={"limits": limits.model_copy(update={"agent_timeout_s": new})}
        )
        return fixed, f"agent timeout {limits.agent_timeout_s:g}s -> {new:g}s"
    if check.verdict == Verdict.ORACLE_FAILED:
        tools = [t for t in _NOT_FOUND.findall(check.agent_stderr)]
        tools = [t for t in dict.fromkeys(tools) if t not in task.environment.requires]
        if tools:
            env = task.environment.model_copy(
                update={"requires": [*task.environment.requires, *tools]}
            )
            fixed = rerender(task.model_copy(update={"environment": env}))
            return fixed, f"requires += {tools}"
        return _align_paths(task, parent, check, profile)
    return None


def _align_paths(
    task: Task, parent: Parent, check: Check, profile: TaskProfile | None
) -> tuple[Task, str] | None:
    """Point new assertions (and the instruction) at where the solution actually wrote."""
    if profile is None:
        return None
    try:
        new_tests = new_tests_source(task, parent.task)
    except ValueError:
        return None
    base = task.verifier[VERIFIER_MODULE].decode("utf-8")[: -len(new_tests) or None]
    new_names = set(new_assertions(task, parent.task))
    created = [f.path for f in profile.outputs if f.created]
    moves: dict[str, str] = {}
    for name, message in check.failing:
        if name not in new_names:
            return None  # a parent assertion broke: not a path mismatch of ours
        for missing in _MISSING_PATH.findall(message):
            same = [p for p in created if posixpath.basename(p) == posixpath.basename(missing)]
            if len(same) == 1 and missing in new_tests:
                moves[missing] = same[0]
    if not moves:
        return None
    instruction = task.instruction
    for old, new in moves.items():
        new_tests = new_tests.replace(old, new)
        instruction = instruction.replace(old, new)
    verifier = dict(task.verifier)
    verifier[VERIFIER_MODULE] = (base + new_tests).encode()
    fixed = task.model_copy(update={"verifier": verifier, "instruction": instruction})
    return fixed, "aligned paths " + ", ".join(f"{a} -> {b}" for a, b in moves.items())


def validate(
    child: Task,
    parent: Parent,
    cfg: ValidationConfig | None = None,
    stage: Stage | None = None,
) -> Validation:
    """Validate `child` (see the module docstring); never raises for the child's failures.

    `stage` is what the child adds to the parent's workflow (its `consumes` feed the
    extension-only probe); None means the extension consumes nothing it declares."""
    cfg = cfg or ValidationConfig()
    t0 = time.monotonic()
    out = Validation(task=child, verdict=Verdict.ORACLE_FAILED)
    task = child
    for attempt in range(cfg.max_repairs + 1):
        check, profile, task = check_once(task, parent, stage, cfg, out)
        out.task, out.verdict, out.detail, out.profile = task, check.verdict, check.detail, profile
        out.offending = check.offending
        if check.verdict == Verdict.ACCEPTED or attempt == cfg.max_repairs:
            break
        fixed = repair(task, parent, check, profile)
        if fixed is None:
            break
        task, note = fixed
        out.repairs.append(f"{check.verdict}: {note}")
    out.new_assertions = new_assertions(out.task, parent.task)
    out.sandbox_s = time.monotonic() - t0
    return out
