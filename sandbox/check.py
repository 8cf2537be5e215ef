"""`t1 task check`: the oracle must pass every assertion and a nop run must fail one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sandbox.trial import run_trial
from tasks.model import Task
from tasks.results import FailureMode, TrialResult

# Failures of the host, not the task: an environment build or verifier error is the task's.
HOST_FAILURES = frozenset({FailureMode.SANDBOX_ERROR, FailureMode.CANCELLED})


@dataclass
class TaskCheck:
    task: Task
    oracle: TrialResult | None
    nop: TrialResult
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def environment_failure(self) -> str | None:
        """Why this check says nothing about the task: a trial the harness could not run
        (the sandbox did not start, it was cancelled), or None. Such a task is not invalid;
        the host is (`t1 task check` exits 2)."""
        for name, trial in (("oracle", self.oracle), ("nop", self.nop)):
            if trial is not None and trial.failure_mode in HOST_FAILURES:
                return f"{name} trial: {trial.failure_mode}: {trial.failure_detail}"
        return None


def judge(task: Task, oracle: TrialResult | None, nop: TrialResult) -> list[str]:
    """Why a task is not valid, from its oracle and nop trials (empty when valid)."""
    problems: list[str] = []
    if oracle is None:
        problems.append("no reference solution: oracle not run")
    else:
        if oracle.failure_mode != FailureMode.NONE:
            problems.append(f"oracle trial failed: {oracle.failure_mode}: {oracle.failure_detail}")
        if oracle.total == 0:
            problems.append("verifier reported no assertions")
        elif oracle.passed < oracle.total:
            failing = [a.name for a in oracle.assertions if not a.ok]
            problems.append(f"oracle fails {len(failing)} assertion(s): {', '.join(failing)}")
    if nop.failure_mode not in (FailureMode.NONE,):
        problems.append(f"nop trial failed: {nop.failure_mode}: {nop.failure_detail}")
    elif nop.total > 0 and nop.passed == nop.total:
        problems.append("nop passes every assertion: the verifier checks nothing the agent does")
    return problems


def check_task(task: Task, backend: str = "local") -> TaskCheck:
    oracle = run_trial(task, "oracle", backend) if task.solution is not None else None
    nop = run_trial(task, "nop", backend)
    return TaskCheck(task, oracle, nop, judge(task, oracle, nop))


def check_tasks(tasks: list[Task], backend: str = "local", workers: int = 2) -> list[TaskCheck]:
    """Check many tasks concurrently (each trial in its own sandbox)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda t: check_task(t, backend), tasks))
