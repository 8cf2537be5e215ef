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
from sandbox.judge import judge
from tasks.model import Healthcheck, Task
from tasks.results import FailureMode, TrialResult

SOLUTION_DIR = "/solution"


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


def verify(sandbox: Sandbox, task: Task, result: TrialResult, backend: str = "") -> None:
    """End the agent phase and judge it (sandbox.judge): the verifier in a fresh sandbox of the
    image with the agent's outputs as data; a verifier that did not run is rerun on the
    pristine image of `backend` (when given) to decide whose failure it was."""
    pristine = (lambda: get_backend(backend).open(task)) if backend else None
    judge(sandbox, task, result, backend=backend, open_pristine=pristine)


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
        verify(sandbox, task, result, backend)
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
