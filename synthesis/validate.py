"""Validation of a candidate in fresh sandboxes, with bounded repair.

A candidate is accepted only when, in sandboxes started fresh for each trial:
- the reference solution passes every assertion (`oracle_failed` otherwise);
- N oracle runs agree assertion by assertion (`oracle_flaky`);
- a nop agent fails at least one assertion (`nop_passes`);
- the parent's reference solution, run as the agent on the child, fails at least one of the
  NEW assertions (`not_load_bearing`: the extension added nothing the parent already did).

Recoverable failures are repaired up to `max_repairs` times: a verifier (or agent) timeout
raises the limit; a tool the solution could not find is added to `requires`; a new assertion
that reads a path the solution wrote elsewhere is aligned to where it was written. Anything
else, or a failed repair, discards the candidate with its reason. Never raises for the
candidate's own failures.
"""

from __future__ import annotations

import posixpath
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum

from sandbox import AgentOutcome, Sandbox, run_trial
from sandbox.trial import run_solution
from synthesis.operators.extension import VERIFIER_MODULE, Parent, new_assertions
from synthesis.profile import ProfilingOracle, TaskProfile
from tasks.model import Task
from tasks.results import FailureMode, TrialResult

MAX_TIMEOUT_S = 600.0


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
    ORACLE_FLAKY = "oracle_flaky"
    NOP_PASSES = "nop_passes"
    NOT_LOAD_BEARING = "not_load_bearing"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class ValidationConfig:
    """How hard to check a candidate. `reruns` counts oracle runs in total (>= 1)."""

    reruns: int = 2
    max_repairs: int = 2
    backend: str = "local"

    def __post_init__(self) -> None:
        if self.reruns < 1:
            raise ValueError(f"reruns must be >= 1, got {self.reruns!r}")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs must be >= 0, got {self.max_repairs!r}")


@dataclass
class Check:
    """One attempt's findings: the verdict and what a repair needs to know."""

    verdict: Verdict
    detail: str = ""
    failing: list[tuple[str, str]] = field(default_factory=list)  # (assertion, message)
    agent_stderr: str = ""


@dataclass
class Validation:
    """The outcome for one candidate; `task` is the final (possibly repaired) version."""

    task: Task
    verdict: Verdict
    detail: str = ""
    trials: list[TrialResult] = field(default_factory=list)
    profile: TaskProfile | None = None
    repairs: list[str] = field(default_factory=list)
    new_assertions: list[str] = field(default_factory=list)
    sandbox_s: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.verdict == Verdict.ACCEPTED


class ParentSolutionAgent:
    """Runs the PARENT's reference solution on the child task (the load-bearing probe)."""

    name = "parent-solution"

    def __init__(self, parent_solution: dict[str, bytes]) -> None:
        self.solution = parent_solution

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        return run_solution(sandbox, task, self.solution, deadline)


def _statuses(r: TrialResult) -> list[tuple[str, bool]]:
    return [(a.name, a.ok) for a in r.assertions]


def _trial_problem(r: TrialResult, who: str) -> Check | None:
    """A check for trials that failed as trials (not by assertions), else None."""
    mode = r.failure_mode
    if mode == FailureMode.NONE:
        return None
    if mode == FailureMode.VERIFIER_TIMEOUT:
        return Check(Verdict.VERIFIER_TIMEOUT, f"{who}: {r.failure_detail}")
    if mode == FailureMode.AGENT_TIMEOUT and who == "oracle":
        return Check(Verdict.AGENT_TIMEOUT, f"{who}: {r.failure_detail}")
    if mode == FailureMode.ENVIRONMENT_ERROR:
        verdict = Verdict.MISSING_TOOL if "tools missing" in r.failure_detail else None
        return Check(verdict or Verdict.ENVIRONMENT_ERROR, f"{who}: {r.failure_detail[:600]}")
    if mode == FailureMode.SANDBOX_ERROR:
        return Check(Verdict.SANDBOX_ERROR, f"{who}: {r.failure_detail[:600]}")
    if who == "oracle":
        return Check(Verdict.ORACLE_FAILED, f"{who}: {mode}: {r.failure_detail[:600]}")
    return None


def check_once(
    task: Task, parent: Parent, cfg: ValidationConfig, trials: list[TrialResult]
) -> tuple[Check, TaskProfile | None]:
    """One validation attempt; appends every trial it runs to `trials`."""
    probe = ProfilingOracle()
    first = run_trial(task, probe, cfg.backend)
    trials.append(first)
    profile = probe.profile(task, first)
    stderr = probe.outcome.detail if probe.outcome else ""
    problem = _trial_problem(first, "oracle")
    if problem:
        problem.agent_stderr = stderr
        return problem, profile
    if not first.resolved:
        failing = [(a.name, a.message) for a in first.assertions if not a.ok]
        names = ", ".join(n for n, _ in failing) or "no assertions reported"
        return Check(Verdict.ORACLE_FAILED, f"oracle fails {names}", failing, stderr), profile
    for i in range(1, cfg.reruns):
        again = run_trial(task, "oracle", cfg.backend)
        trials.append(again)
        if _statuses(again) != _statuses(first) or again.failure_mode != first.failure_mode:
            diff = sorted(set(_statuses(again)) ^ set(_statuses(first)))
            return Check(Verdict.ORACLE_FLAKY, f"oracle run {i + 1} disagrees: {diff[:4]}"), profile
    nop = run_trial(task, "nop", cfg.backend)
    trials.append(nop)
    problem = _trial_problem(nop, "nop")
    if problem:
        return problem, profile
    if nop.total > 0 and nop.passed == nop.total:
        return Check(Verdict.NOP_PASSES, "nop passes every assertion"), profile
    assert parent.task.solution is not None
    probe_parent = run_trial(task, ParentSolutionAgent(parent.task.solution), cfg.backend)
    trials.append(probe_parent)
    problem = _trial_problem(probe_parent, "parent-solution")
    if problem:
        return problem, profile
    new = set(new_assertions(task, parent.task))
    failed_new = [a.name for a in probe_parent.assertions if a.name in new and not a.ok]
    if not failed_new:
        return Check(
            Verdict.NOT_LOAD_BEARING, "the parent's solution passes every new assertion"
        ), profile
    return Check(Verdict.ACCEPTED, f"parent solution fails {len(failed_new)} new"), profile


_NOT_FOUND = re.compile(
    r"(?:^|\n)(?:[^\n:]*: )?(?:line \d+: )?([A-Za-z0-9_.+-]+): command not found"
)
_MISSING_PATH = re.compile(r"No such file or directory: '([^']+)'")


def _split(task: Task, parent: Task) -> tuple[str, str, str, str]:
    """(parent tests, new tests, parent instruction, new section) of a child."""
    tests = task.verifier[VERIFIER_MODULE].decode("utf-8")
    base = parent.verifier[VERIFIER_MODULE].decode("utf-8").rstrip()
    inst_base = parent.instruction.rstrip()
    if not tests.startswith(base) or not task.instruction.startswith(inst_base):
        raise ValueError("child does not extend its parent's verifier and instruction")
    return base, tests[len(base) :], inst_base, task.instruction[len(inst_base) :]


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
            return task.model_copy(update={"environment": env}), f"requires += {tools}"
        return _align_paths(task, parent, check, profile)
    return None


def _align_paths(
    task: Task, parent: Parent, check: Check, profile: TaskProfile | None
) -> tuple[Task, str] | None:
    """Point new assertions (and the instruction) at where the solution actually wrote."""
    if profile is None:
        return None
    try:
        base, new_tests, inst_base, section = _split(task, parent.task)
    except ValueError:
        return None
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
    for old, new in moves.items():
        new_tests = new_tests.replace(old, new)
        section = section.replace(old, new)
    verifier = dict(task.verifier)
    verifier[VERIFIER_MODULE] = (base + new_tests).encode()
    fixed = task.model_copy(update={"verifier": verifier, "instruction": inst_base + section})
    return fixed, "aligned paths " + ", ".join(f"{a} -> {b}" for a, b in moves.items())


def validate(child: Task, parent: Parent, cfg: ValidationConfig | None = None) -> Validation:
    """Validate `child` (see the module docstring); never raises for the child's failures."""
    cfg = cfg or ValidationConfig()
    t0 = time.monotonic()
    out = Validation(task=child, verdict=Verdict.ORACLE_FAILED)
    task = child
    for attempt in range(cfg.max_repairs + 1):
        check, profile = check_once(task, parent, cfg, out.trials)
        out.task, out.verdict, out.detail, out.profile = task, check.verdict, check.detail, profile
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
