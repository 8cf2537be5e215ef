"""Run one trial: environment up, agent phase, then (only then) the held-out verifier.

During the agent phase neither tests/ nor (for non-oracle agents) solution/ exists anywhere
inside the sandbox. Every failure of the task itself (timeouts, OOM, output limit, a broken
environment, unparseable verifier output) lands in the returned `TrialResult`; only
cancellation (KeyboardInterrupt) propagates.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from sandbox.backends import get_backend
from sandbox.base import (
    AgentSabotage,
    DiskFull,
    EnvironmentBuildError,
    ExecResult,
    Sandbox,
    SandboxError,
)
from sandbox.git_guards import GUARD_FILES, fixed_env
from sandbox.policy import network_policy
from sandbox.verdict_channel import Channel, RecordsStatus, open_channel
from tasks.literals.model import RUNNER
from tasks.model import Healthcheck, Task
from tasks.reports import (
    CHECKRUNNER_SOURCE,
    collect_report,
    declared_sources,
    report_runner,
    report_verdict,
)
from tasks.results import (
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    TrialResult,
    VerifierReport,
)

TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
VERIFIER_LOGS = "/logs/verifier"


@dataclass(frozen=True)
class AgentOutcome:
    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    output_truncated: bool = False
    detail: str = ""

    @classmethod
    def from_exec(cls, r: ExecResult) -> AgentOutcome:
        tail = (r.stdout + r.stderr)[-2000:]
        return cls(r.exit_code, r.timed_out, r.oom_killed, r.output_truncated, tail)


class Agent(Protocol):
    """Something that acts in a sandbox until `deadline` (time.monotonic() seconds)."""

    name: str

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome: ...


def run_solution(
    sandbox: Sandbox, task: Task, solution: dict[str, bytes], deadline: float
) -> AgentOutcome:
    """Upload `solution` (a solution/ bundle) and run its solve.sh in the task's workdir."""
    sandbox.upload(solution, SOLUTION_DIR)
    r = sandbox.session().run(
        f"bash {SOLUTION_DIR}/solve.sh", timeout_s=max(0.1, deadline - time.monotonic())
    )
    return AgentOutcome.from_exec(r)


class OracleAgent:
    """Runs the reference solution (solution/solve.sh)."""

    name = "oracle"

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if task.solution is None:
            return AgentOutcome(exit_code=None, detail="task has no reference solution")
        return run_solution(sandbox, task, task.solution, deadline)


class NopAgent:
    """Does nothing: a verifier that passes everything after a nop run is too weak."""

    name = "nop"

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        return AgentOutcome(exit_code=0)


class CommandAgent:
    """Runs a fixed shell command as the agent (tests, adversarial probes, scripted agents)."""

    def __init__(self, command: str, name: str = "command") -> None:
        self.command = command
        self.name = name

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        r = sandbox.session().run(self.command, timeout_s=max(0.1, deadline - time.monotonic()))
        return AgentOutcome.from_exec(r)


AGENTS: dict[str, type] = {"oracle": OracleAgent, "nop": NopAgent}


def agent_by_name(name: str) -> Agent:
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r} (choose from {', '.join(AGENTS)})")
    agent: Agent = AGENTS[name]()
    return agent


def _agent_failure(outcome: AgentOutcome) -> FailureMode:
    if outcome.oom_killed:
        return FailureMode.OUT_OF_MEMORY
    if outcome.output_truncated:
        return FailureMode.OUTPUT_LIMIT
    if outcome.timed_out:
        return FailureMode.AGENT_TIMEOUT
    return FailureMode.NONE


# Fixed parts of every verifier's environment (the image's ENV and the task's verifier env
# come first; these win): no user site directory, whose packages the agent could have planted.
VERIFIER_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# git run by the verifier in the agent's repositories ignores the programs the agent could
# have configured there (command-scope settings win over the repository's, the user's and the
# system's): sandbox.git_guards.GIT_GUARDS here, the programs they name staged with the tests
# (GIT_GUARD_DIR); the drivers the agent named are added by the backend from the configuration
# files the agent wrote (sandbox.git_guards.guard_env).
GIT_GUARD_DIR = ".t1-git"  # under /tests
VERIFIER_ENV |= fixed_env(f"{TESTS_DIR}/{GIT_GUARD_DIR}")
SIGNAL_EXIT_CODES = range(129, 129 + 64)  # 128 + N: the entry (or its last command) was killed


def verifier_env(task: Task) -> dict[str, str]:
    return {**task.verifier_config.env, "TEST_DIR": TESTS_DIR, **VERIFIER_ENV}


def verify(sandbox: Sandbox, task: Task, result: TrialResult) -> None:
    """Run the held-out verifier in its own view and collect per-assertion outcomes.

    A verifier that runs pytest or the seeds' runner is judged by what that runner itself
    reports through the report channel (sandbox.verdict_channel), never by files or output
    its tests' programs could write. Otherwise only the report formats the task's verifier
    declares are read (`declared_sources`), from the verifier's report directory.
    """
    t0 = time.monotonic()
    runner = report_runner(task.verifier)
    channel = open_channel(runner) if runner is not None else None
    tests = {**task.verifier, **{f"{GIT_GUARD_DIR}/{n}": b for n, b in GUARD_FILES.items()}}
    command, env = f"bash {TESTS_DIR}/test.sh", verifier_env(task)
    if channel is not None:
        tests = {**tests, **channel.files()}
        if runner == ReportSource.RUN_CHECKS:  # an earlier version: the current one speaks
            tests[RUNNER] = CHECKRUNNER_SOURCE
        command = channel.command(command, TESTS_DIR, VERIFIER_LOGS)
        env = {**env, **channel.env(VERIFIER_LOGS)}
    run = sandbox.verify(
        tests,
        command,
        timeout_s=task.limits.verifier_timeout_s,
        cwd=sandbox.workdir,
        env=env,
        user=task.verifier_config.user or "",
        network=network_policy(task, task.verifier_config),
        keep_agent_processes=task.keep_agent_processes,
    )
    r = run.result
    result.verifier_s = time.monotonic() - t0
    result.verifier_exit_code = r.exit_code
    result.verifier_output = (r.stdout + r.stderr)[-4000:]
    result.report = collect_report(run.files, r.stdout, declared_sources(task.verifier))
    if run.tampered:
        result.failure_mode = FailureMode.TAMPERED
        result.failure_detail = "the agent wrote where the verifier's run depends on it: " + (
            ", ".join(run.tampered[:20])
        )
        return
    if result.failure_mode != FailureMode.NONE:
        return
    if killed_by_signal(r):
        result.failure_mode = FailureMode.VERIFIER_KILLED
        result.failure_detail = (
            f"the verifier was killed by signal {r.exit_code - 128}: no report it left counts"
        )
    elif run.disk_full:
        result.failure_mode = FailureMode.DISK_LIMIT
        result.failure_detail = f"the sandbox's disk ({task.limits.disk_mb} MB) was full"
    elif r.timed_out:
        result.failure_mode = FailureMode.VERIFIER_TIMEOUT
        result.failure_detail = f"verifier exceeded {task.limits.verifier_timeout_s}s"
    elif r.oom_killed:
        result.failure_mode = FailureMode.OUT_OF_MEMORY
        result.failure_detail = "verifier killed by the OOM killer"
    elif channel is not None and channel.loaded(run.files):
        _channel_verdict(channel, run.files, result)
    else:
        # The report, or its absence, scored as Terminal-Bench does (tasks.reports): without
        # a report a non-zero exit or a compile failure is a failed attempt, and only what
        # the agent cannot cause (the verifier's own runner missing) is verifier_error.
        verdict = report_verdict(result.report, r.exit_code, r.stdout + r.stderr)
        result.report = verdict.report
        if verdict.failure_mode != FailureMode.NONE:
            result.failure_mode = verdict.failure_mode
        result.failure_detail = verdict.detail


def _channel_verdict(channel: Channel, files: dict[str, bytes], result: TrialResult) -> None:
    """The verdict of a channel verifier: its runner's authenticated records. A record that
    does not authenticate is tampering; records missing, cut short or from a keyless second
    session are a failed attempt (reward 0, the agent's doing: its program can delete them,
    or stop or kill the runner), never infrastructure."""
    verdict = channel.verdict(files)
    if verdict.status == RecordsStatus.VERIFIED:
        result.report = verdict.report.model_copy(update={"authenticated": True})
        return
    result.failure_detail = f"no verdict from {channel.runner}'s report channel: {verdict.detail}"
    if verdict.status == RecordsStatus.FORGED:
        result.failure_mode = FailureMode.TAMPERED
        result.report = VerifierReport(source=channel.runner, parse_error=verdict.detail)
        return
    failed = AssertionResult(name="verifier", status=AssertionStatus.FAILED, message=verdict.detail)
    result.report = VerifierReport(assertions=[failed], source=ReportSource.REWARD, reward=0.0)


def killed_by_signal(r: ExecResult) -> bool:
    """The verifier's entry ended by a signal (bash reports 128 + N, the sandbox's init passes
    it on) and not by our own timeout or the OOM killer: a program it ran may have written a
    report and killed it before the real one, so no record of that run is a verdict."""
    return not r.timed_out and not r.oom_killed and r.exit_code in SIGNAL_EXIT_CODES


def run_trial(
    task: Task,
    agent: Agent | str,
    backend: str = "local",
    *,
    trial_id: str | None = None,
    cancel: threading.Event | None = None,
) -> TrialResult:
    """One full trial; never raises (a failure of the task, the agent or the harness is a
    failure mode of the result). Setting `cancel` from another thread stops the trial: its
    sandbox is reclaimed and the result is CANCELLED."""
    agent = agent_by_name(agent) if isinstance(agent, str) else agent
    result = TrialResult(
        trial_id=trial_id or uuid.uuid4().hex,
        task_id=task.id,
        task_hash=task.content_hash,
        agent=agent.name,
        backend=backend,
    )
    t_start = time.monotonic()
    sandbox: Sandbox | None = None
    finished = threading.Event()
    try:
        sandbox = get_backend(backend).open(task)
        if task.environment.healthcheck is not None:
            healthcheck(sandbox, task.environment.healthcheck)
        result.environment_s = time.monotonic() - t_start
        if cancel is not None:
            _stop_on_cancel(sandbox, cancel, finished)
        t_agent = time.monotonic()
        try:
            outcome = agent.run(sandbox, task, t_agent + task.limits.agent_timeout_s)
        except SandboxError:
            raise
        except Exception as e:  # noqa: BLE001 - an agent's crash is the trial's result
            outcome = AgentOutcome(detail=f"agent raised {type(e).__name__}: {e}")
            result.failure_mode = FailureMode.AGENT_ERROR
            result.failure_detail = outcome.detail
        result.agent_s = time.monotonic() - t_agent
        result.agent_exit_code = outcome.exit_code
        if result.failure_mode == FailureMode.NONE:
            result.failure_mode = _agent_failure(outcome)
            if result.failure_mode != FailureMode.NONE:
                result.failure_detail = outcome.detail[-1000:]
        verify(sandbox, task, result)
    except EnvironmentBuildError as e:
        result.failure_mode = FailureMode.ENVIRONMENT_ERROR
        result.failure_detail = str(e)
    except DiskFull as e:
        result.failure_mode = FailureMode.DISK_LIMIT
        result.failure_detail = str(e)
    except AgentSabotage as e:
        result.failure_mode = FailureMode.AGENT_ERROR
        result.failure_detail = str(e)
    except SandboxError as e:
        result.failure_mode = FailureMode.SANDBOX_ERROR
        result.failure_detail = str(e)
    except Exception as e:  # noqa: BLE001 - the harness's own failure is a row, never a crash
        result.failure_mode = FailureMode.SANDBOX_ERROR
        result.failure_detail = f"harness error: {type(e).__name__}: {e}"
    finally:
        finished.set()
        if sandbox is not None:
            try:
                sandbox.stop()
            except Exception as e:  # noqa: BLE001 - recorded; the trial itself is over
                result.failure_detail += f" (reclaiming the sandbox failed: {e})"
        if cancel is not None and cancel.is_set():
            result.failure_mode = FailureMode.CANCELLED
            result.failure_detail = "cancelled by the caller"
        result.total_s = time.monotonic() - t_start
    return result


def healthcheck(sandbox: Sandbox, hc: Healthcheck) -> None:
    """Harbor's [environment.healthcheck]: the environment is ready when `command` succeeds
    (after `start_period_sec`, up to `retries` failures `interval_sec` apart); else the task's
    environment is broken (ENVIRONMENT_ERROR)."""
    time.sleep(hc.start_period_sec)
    last: ExecResult | None = None
    for attempt in range(hc.retries + 1):
        last = sandbox.exec(hc.command, timeout_s=hc.timeout_sec)
        if last.ok:
            return
        if attempt < hc.retries:
            time.sleep(hc.interval_sec)
    assert last is not None
    tail = (last.stdout + last.stderr)[-300:]
    raise EnvironmentBuildError(
        f"healthcheck {hc.command!r} failed {hc.retries + 1} times (exit {last.exit_code}): {tail}"
    )


def _stop_on_cancel(sandbox: Sandbox, cancel: threading.Event, finished: threading.Event) -> None:
    def watch() -> None:
        while not finished.is_set():
            if cancel.wait(0.05):
                sandbox.stop()
                return

    threading.Thread(target=watch, daemon=True, name="trial-cancel").start()
