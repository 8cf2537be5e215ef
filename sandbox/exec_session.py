"""A `Session` over one-off execs, for backends without a persistent shell.

The working directory and exported variables are carried from one command to the next in a
state file; background processes do not survive a command and keystrokes cannot reach a
program. Backends with a real long-lived shell use their own session instead.
"""

from __future__ import annotations

import shlex

from sandbox.base import ExecResult, Sandbox

STATE = "/tmp/.t1-session-state"


class ExecSession:
    def __init__(self, sandbox: Sandbox, cwd: str) -> None:
        self.sandbox = sandbox
        self.cwd = cwd
        self._pending = ""

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        script = (
            f"cd {shlex.quote(self.cwd)} 2>/dev/null; [ -f {STATE} ] && . {STATE} 2>/dev/null\n"
            f"eval {shlex.quote(command)}\n"
            "__t1_rc=$?; { export -p; printf 'cd %q\\n' \"$PWD\"; } > " + STATE + "\n"
            "exit $__t1_rc"
        )
        r = self.sandbox.exec(script, timeout_s=timeout_s, cwd="/")
        return ExecResult(
            exit_code=r.exit_code,
            stdout=r.stdout + r.stderr,
            stderr="",
            duration_s=r.duration_s,
            timed_out=r.timed_out,
            oom_killed=r.oom_killed,
            output_truncated=r.output_truncated,
        )

    def send_keys(self, keys: str) -> None:
        raise NotImplementedError("this backend's session has no terminal to send keys to")

    def read(self, wait_s: float = 0.0) -> str:
        return ""

    def close(self) -> None:
        return None
