"""The sandbox protocol and its records. Backends implement `Sandbox`; the rest of the project
uses free functions over it (`sandbox.trial`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one command. A command that hit a limit still returns a result."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.oom_killed)


class NetworkMode(StrEnum):
    """What a sandbox's network namespace reaches (the loopback always works)."""

    NONE = "none"  # loopback only
    INTERNET = "internet"  # egress through user-mode NAT; the host itself unreachable
    ALLOWLIST = "allowlist"  # egress to `allowed_hosts` only
    BUILD = "build"  # the package registries only (Dockerfile RUN steps)


@dataclass(frozen=True)
class NetworkPolicy:
    mode: NetworkMode = NetworkMode.NONE
    allowed_hosts: tuple[str, ...] = ()


# The agent's uid and gid in the verifier's sandbox (sandbox.judge): what the agent produced
# belongs to it (and every program a test runner starts, where the kernel has no Landlock).
# No image account uses it (Debian reserves the range, allocates none of it); below 65536,
# inside both backends' id maps.
AGENT_UID = AGENT_GID = 64999
# The held-out tests' group for a root verifier (sandbox.judge.tests_group): the files the
# agent's programs may not read are root's and this group's, mode 0640, so that where the kernel
# has no Landlock a program of the task's (a validator shipped with the tests), which runs as the
# agent's uid with this as its effective group, reads them, and nothing else of the agent's does.
TESTS_GID = 64998


@dataclass(frozen=True)
class VerifierSpec:
    """How to run a verifier as the judge (sandbox.judge): in a fresh sandbox of the image,
    with `outputs` (absolute paths of the agent's sandbox; empty for the pristine image)
    copied in as data owned by `agent_uid`; `tests` at /tests (the judge's, with the modes of
    `judge.tests_layout`), `report_files` in /logs/verifier (the judge's alone); `command` run
    by bash as `user` (root when empty) in `cwd`, with the image's ENV updated by `env`, as
    the first process of its own PID namespace, under the verifier phase's system-call
    filter."""

    tests: Mapping[str, bytes]
    report_files: Mapping[str, bytes]
    command: str
    timeout_s: float
    cwd: str
    env: Mapping[str, str]
    user: str = ""
    network: NetworkPolicy | None = None
    keep_agent_processes: bool = False
    outputs: tuple[str, ...] = ()
    agent_uid: int = AGENT_UID
    agent_gid: int = AGENT_GID


@dataclass(frozen=True)
class VerifierRun:
    """One verifier run: the command's result and what the verifier left in its report
    directory, read once its whole process tree had ended."""

    result: ExecResult
    files: dict[str, bytes]
    disk_full: bool = False  # the agent left the sandbox's disk full
    outputs_changed: bool = False
    """The verifier changed the agent's own copy of an output (the local backend hands the
    judge the agent's files themselves, no bytes copied): a later run would not see the
    outputs as the agent left them."""


@runtime_checkable
class Session(Protocol):
    """The agent's long-lived shell in a sandbox: one shell, one PID namespace, for a trial.

    `run` types one command and waits for it: cwd, exported variables and background processes
    persist to the next command. Its `ExecResult.stdout` is what the terminal showed (stdout and
    stderr interleaved), `stderr` is empty. On timeout the command is interrupted and the
    result has `timed_out`. `send_keys` writes raw keystrokes (to an interactive program that a
    command left running); `read` returns terminal output not yet returned. `close` ends the
    shell and everything it started.
    """

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult: ...

    def send_keys(self, keys: str) -> None: ...

    def read(self, wait_s: float = 0.0) -> str: ...

    def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """A running, isolated environment for one task trial.

    `start` brings the environment up (setup layer applied, working directory populated);
    `exec` runs a one-off shell command (bash -c) under the sandbox's limits, in a clean
    environment (harness and verifier use); `session` is the agent's long-lived shell;
    `upload`/`download` move files across the boundary; `stop` kills everything and reclaims
    all resources. `stop` is idempotent and safe after a failed start.
    """

    id: str
    workdir: str  # where the agent starts and the verifier runs (the image's WORKDIR)

    def start(self) -> None: ...

    def exec(
        self, command: str, *, timeout_s: float | None = None, cwd: str | None = None
    ) -> ExecResult: ...

    def session(self) -> Session:
        """The agent's shell (started on first use; the same one afterwards)."""
        ...

    def verify(self, spec: VerifierSpec) -> VerifierRun:
        """End the agent phase and run the held-out verifier as `spec` says (sandbox.judge).

        The agent's processes are killed first unless `spec.keep_agent_processes` (they then
        share only the network with the verifier). Raises DiskFull when the agent's outputs
        cannot be carried over for want of room, SandboxError when the verifier's sandbox
        cannot be made.
        """
        ...

    def upload(self, files: dict[str, bytes], dest_dir: str, *, mode: int = 0o644) -> None: ...

    def download(self, path: str) -> dict[str, bytes]: ...

    def stop(self) -> None: ...


class SandboxError(RuntimeError):
    """The sandbox machinery itself failed (not the task)."""


class SandboxUnavailable(SandboxError):
    """The backend cannot run here (no root, no bwrap, no Docker daemon ...)."""


class DiskFull(SandboxError):
    """The sandbox's disk is full: a harness write into it failed (ENOSPC). The agent's doing,
    recorded as the DISK_LIMIT failure mode."""


class AgentSabotage(SandboxError):
    """The agent left the sandbox so that the verifier cannot start (e.g. /etc/passwd made a
    FIFO, which the engine reads when it starts a container). The agent's doing: a failed
    attempt (AGENT_ERROR, reward 0), never an infrastructure failure."""


class EnvironmentBuildError(SandboxError):
    """The task's environment could not be built: a setup step failed or a tool is missing.

    A task error, reported as the ENVIRONMENT_ERROR failure mode of its trial.
    """


def normalize_dest(dest_dir: str, rel: str) -> str:
    """Join an absolute sandbox dir and a relative path, refusing escapes like '../'."""
    if not dest_dir.startswith("/"):
        raise ValueError(f"sandbox paths are absolute, got {dest_dir!r}")
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if any(p == ".." for p in parts) or Path(rel).is_absolute():
        raise ValueError(f"relative path escapes its directory: {rel!r}")
    return "/".join([dest_dir.rstrip("/"), *parts])
