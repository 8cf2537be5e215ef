"""Run one trial: environment up, agent phase, then (only then) the held-out verifier.

During the agent phase neither tests/ nor (for non-oracle agents) solution/ exists anywhere
inside the sandbox. Every failure of the task itself (timeouts, OOM, output limit, a broken
environment, unparseable verifier output) lands in the returned `TrialResult`; only
cancellation (KeyboardInterrupt) propagates.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from sandbox.backends import get_backend
from sandbox.base import EnvironmentBuildError, ExecResult, Sandbox, SandboxError
from tasks.model import Task
from tasks.reports import collect_report
from tasks.results import FailureMode, TrialResult

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


def verify(sandbox: Sandbox, task: Task, result: TrialResult) -> None:
    """Copy tests in, run the verifier under its own timeout, collect per-assertion outcomes."""
    t0 = time.monotonic()
    # Tests go to a fresh directory the agent could not have prepared, then replace /tests
    # and run, in one command.
    staging = f"/.t1-tests-{uuid.uuid4().hex[:8]}"
    sandbox.upload(task.verifier, staging)
    r = sandbox.exec(
        f"rm -rf {TESTS_DIR} && mv {staging} {TESTS_DIR} && mkdir -p {VERIFIER_LOGS} && "
        f"bash {TESTS_DIR}/test.sh",
        timeout_s=task.limits.verifier_timeout_s,
        cwd=task.environment.workdir,
    )
    files = sandbox.download(VERIFIER_LOGS)
    result.verifier_s = time.monotonic() - t0
    result.verifier_exit_code = r.exit_code
    result.verifier_output = (r.stdout + r.stderr)[-4000:]
    result.report = collect_report(files, r.stdout)
    if result.failure_mode != FailureMode.NONE:
        return
    if r.timed_out:
        result.failure_mode = FailureMode.VERIFIER_TIMEOUT
        result.failure_detail = f"verifier exceeded {task.limits.verifier_timeout_s}s"
    elif r.oom_killed:
        result.failure_mode = FailureMode.OUT_OF_MEMORY
        result.failure_detail = "verifier killed by the OOM killer"
    elif result.report.parse_error:
        result.failure_mode = FailureMode.PARSE_ERROR
        result.failure_detail = result.report.parse_error


def run_trial(
    task: Task,
    agent: Agent | str,
    backend: str = "local",
    *,
    hide: list[str] | None = None,
    trial_id: str | None = None,
) -> TrialResult:
    """One full trial; never raises for the task's own failures."""
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
    try:
        sandbox = get_backend(backend).open(task, hide=hide)
        result.environment_s = time.monotonic() - t_start
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
    except SandboxError as e:
        result.failure_mode = FailureMode.SANDBOX_ERROR
        result.failure_detail = str(e)
    finally:
        if sandbox is not None:
            sandbox.stop()
        result.total_s = time.monotonic() - t_start
    return result
