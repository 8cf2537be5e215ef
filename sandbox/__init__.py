"""Run tasks safely: a small `Sandbox` protocol, the local bubblewrap+overlay backend (default),
a Docker backend, and the trial runner."""

from sandbox.backends import Backend, get_backend
from sandbox.base import (
    EnvironmentBuildError,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    Session,
)
from sandbox.trial import (
    Agent,
    AgentOutcome,
    CommandAgent,
    NopAgent,
    OracleAgent,
    agent_by_name,
    run_trial,
)

__all__ = [
    "Agent",
    "AgentOutcome",
    "Backend",
    "CommandAgent",
    "EnvironmentBuildError",
    "ExecResult",
    "NopAgent",
    "OracleAgent",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "Session",
    "agent_by_name",
    "get_backend",
    "run_trial",
]
