"""The agent's long-lived shell in a container: one interactive shell in a `docker exec` with a
TTY, attached through a socket for the whole trial (the `Session` protocol).

The shell is `bash --noediting -i` (or `sh -i` where the image has no bash), started as the
agent phase's user (the image's USER by default) in its WORKDIR with its ENV (plus the task's
env), like `docker exec -it`. At start it is set up with
`stty -echo -onlcr` and empty prompts, so what comes back is what the commands print. `run`
types one line per command: `eval` of the command (sent base64-encoded, in chunks below the
terminal's line limit) followed by a marker carrying a per-command sequence number and `$?`.
Output is read until that marker. On a timeout or the output cap the command is interrupted
(Ctrl-C, then SIGKILL to the terminal's foreground process group) and the shell re-synced;
background jobs and the shell itself survive.
"""

from __future__ import annotations

import base64
import re
import select
import socket
import time
import uuid
from typing import TYPE_CHECKING

from sandbox.base import ExecResult, SandboxError

if TYPE_CHECKING:
    from sandbox.docker import DockerSandbox

CHUNK = 2048  # base64 characters per typed line (the tty's canonical line limit is 4095)
START_TIMEOUT_S = 15.0
INTERRUPT_GRACE_S = 1.0
SHELL = "command -v bash >/dev/null 2>&1 && exec bash --noediting -i || exec sh -i"
# The terminal's foreground process group, if it is not the shell's own: killed on timeout.
KILL_FOREGROUND = (
    "s=$(cat /proc/$0/stat) || exit 0; s=${s##*) }; set -- $s; "
    '[ "$6" -gt 0 ] && [ "$6" != "$3" ] && kill -KILL -- "-$6"; true'
)


class DockerSession:
    def __init__(self, sandbox: DockerSandbox) -> None:
        self.sandbox = sandbox
        self._token = uuid.uuid4().hex[:12]
        self._seq = 0
        self._buf = bytearray()  # read from the terminal, not yet returned
        self._sock: socket.socket | None = None
        self._io: object = None
        self._shell_pid = 0
        self._exec_id = ""
        self._start()

    # -- the shell ---------------------------------------------------------------------
    def _start(self) -> None:
        api = self.sandbox.client.api
        ex = api.exec_create(
            self.sandbox.container_id,
            ["/bin/sh", "-c", SHELL],
            stdin=True,
            tty=True,
            environment={"TERM": "xterm", **self.sandbox.env},
            user=self.sandbox.user or "0",
        )
        self._exec_id = str(ex["Id"])
        self._io = api.exec_start(ex["Id"], socket=True, tty=True)
        sock = getattr(self._io, "_sock", self._io)
        if not isinstance(sock, socket.socket):
            raise SandboxError(f"exec attach gave no socket ({type(self._io).__name__})")
        sock.setblocking(False)
        self._sock = sock
        self._buf.clear()
        setup = " stty -echo -onlcr cols 200 rows 50 2>/dev/null; PS1=''; PS2=''; "
        setup += "unset PROMPT_COMMAND; HISTCONTROL=ignorespace"
        code, out, how = self._type_and_wait(setup + "; " + self._marker("$$"), START_TIMEOUT_S)
        if how != "done":
            self.detach()
            raise SandboxError(f"the agent's shell did not start: {out[-500:]!r}")
        self._shell_pid = code

    def _marker(self, status: str) -> str:
        self._seq += 1
        return f"printf '\\036T1{self._token}:{self._seq}:%d\\037' {status}"

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise SandboxError("the agent's shell is closed")
        self._sock.setblocking(True)
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise SandboxError(f"the agent's shell is gone: {e}") from e
        finally:
            self._sock.setblocking(False)

    def _pump(self, wait_s: float) -> bool:
        """Read what the terminal has (waiting up to wait_s for the first byte); False at EOF."""
        if self._sock is None:
            return False
        ready, _, _ = select.select([self._sock], [], [], max(0.0, wait_s))
        while ready:
            try:
                data = self._sock.recv(65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self._buf += data
            ready, _, _ = select.select([self._sock], [], [], 0)
        return True

    def _take_until_marker(self, seq: int) -> tuple[bytes, int] | None:
        """Output before this command's marker and its status; stale markers are dropped."""
        pattern = re.compile(rb"\x1eT1" + self._token.encode() + rb":(\d+):(-?\d+)\x1f")
        while (m := pattern.search(bytes(self._buf))) is not None:
            start, end, marker_seq, status = m.start(), m.end(), int(m.group(1)), int(m.group(2))
            if marker_seq == seq:
                out = bytes(self._buf[:start])
                del self._buf[:end]
                return _strip_markers(out), status
            del self._buf[start:end]
        return None

    def _type_and_wait(
        self, line: str, timeout_s: float, cap: int | None = None
    ) -> tuple[int, bytes, str]:
        """Type `line` (ending in a marker) and wait for the marker.

        Returns (status, output, how): how is "done", "timeout", "cap" or "eof" (the shell
        ended); without the marker, the output is everything read so far.
        """
        seq = self._seq
        self._send(line.encode() + b"\n")
        deadline = time.monotonic() + timeout_s
        while True:
            found = self._take_until_marker(seq)
            if found is not None:
                return found[1], found[0], "done"
            if cap is not None and len(self._buf) > cap:
                return -1, self._take_all(), "cap"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return -1, self._take_all(), "timeout"
            if not self._pump(min(remaining, 0.5)):
                return -1, self._take_all(), "eof"

    def _take_all(self) -> bytes:
        out = _strip_markers(bytes(self._buf))
        self._buf.clear()
        return out

    def _interrupt(self) -> bytes:
        """Stop the foreground command, re-sync the shell; the output seen meanwhile."""
        try:
            self._send(b"\x03")
            self._pump(INTERRUPT_GRACE_S)
            self.sandbox.exec(KILL_FOREGROUND.replace("$0", str(self._shell_pid)), timeout_s=10)
            code, out, how = self._type_and_wait(" " + self._marker("0"), 5.0)
        except SandboxError:
            out, how = b"", "eof"
        if how != "done":  # the shell itself is stuck or gone: start a fresh one
            self.detach()
            self._start()
            return out + b"\n[t1: the shell did not respond and was restarted]\n"
        return out

    # -- the Session protocol ------------------------------------------------------------
    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        if self._sock is None:
            self._start()
        limits = self.sandbox.limits
        timeout = timeout_s if timeout_s is not None else limits.agent_timeout_s
        cap = limits.output_bytes
        encoded = base64.b64encode(command.encode()).decode()
        t0 = time.monotonic()
        oom_before = self.sandbox.oom_kills()
        chunks = [encoded[i : i + CHUNK] for i in range(0, len(encoded), CHUNK)] or [""]
        typed = [f' __t1c="{chunks[0]}"'] + [f' __t1c="${{__t1c}}{c}"' for c in chunks[1:]]
        for part in typed[:-1]:
            self._send(part.encode() + b"\n")
        line = (
            f'{typed[-1]}; eval "$(printf %s "$__t1c" | base64 -d)"; '
            f"__t1rc=$?; unset __t1c; {self._marker('$__t1rc')}"
        )
        code, out, how = self._type_and_wait(line, timeout, cap)
        timed_out, truncated = how == "timeout", how == "cap"
        if how == "eof":  # the shell itself was killed (or exited): the next run starts one
            from sandbox.docker_api import exec_exit_code

            self.detach()
            code = exec_exit_code(self.sandbox.client.api, self._exec_id)
        elif how != "done":
            out += self._interrupt()
            code = 124 if timed_out else 137
        return ExecResult(
            exit_code=code,
            stdout=out[:cap].decode("utf-8", "replace"),
            stderr="",
            duration_s=time.monotonic() - t0,
            timed_out=timed_out,
            oom_killed=self.sandbox.oom_kills() > oom_before,
            output_truncated=truncated,
        )

    def send_keys(self, keys: str) -> None:
        if self._sock is None:
            self._start()
        self._send(keys.encode())

    def read(self, wait_s: float = 0.0) -> str:
        self._pump(wait_s)
        out = _strip_markers(bytes(self._buf))
        self._buf.clear()
        return out.decode("utf-8", "replace")

    def close(self) -> None:
        """End the shell and everything in the container it started (all but its init)."""
        if self._sock is not None:
            self.detach()
            self.sandbox.exec("kill -KILL -1", timeout_s=10)

    def detach(self) -> None:
        """Drop the terminal connection; the shell's processes keep running."""
        if self._sock is None:
            return
        try:
            self._sock.close()
        finally:
            self._sock = None
            close = getattr(self._io, "close", None)
            if callable(close):
                close()


def _strip_markers(data: bytes) -> bytes:
    return re.sub(rb"\x1eT1[0-9a-f]+:\d+:-?\d+\x1f", b"", data)
