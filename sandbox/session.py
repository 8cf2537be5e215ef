"""The agent's long-lived shell: one interactive bash on a pseudo-terminal, as terminal agents
(Terminus, Harbor's and Terminal-Bench's harnesses) use one tmux pane.

The shell runs for the whole agent phase in one PID namespace, so cwd, exported variables and
background processes persist between commands. A command is typed as a few short lines that
assign its text (ANSI-C quoted, so any bytes survive) and one line that evaluates it and prints
an end marker carrying a per-session nonce and the exit status; its output is what the terminal
showed in between. The terminal does not echo what is typed: the runner clears ECHO on it (an
ioctl on its side of the terminal) before the shell starts, when a command's end marker comes
and before each command is typed, so a command that turned echo on cannot make the next one's
typed lines part of its output, and no `stty` process runs per command. The command's stdin
is the terminal: `send_keys` reaches a program it left running (a REPL, a pager, a prompt),
and the next `run` interrupts such a program first (Ctrl-C, then SIGKILL of the terminal's
foreground process group). A command that ends the shell
(`exit`) returns the shell's exit status; the next command starts a new shell.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Sequence

from sandbox.base import ExecResult, SandboxError

CHUNK = 768  # characters of quoted command per typed line (the tty's line buffer is 4 KiB)
INTERRUPT_GRACE_S = 1.0
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]")


def ansi_c_quote(text: str) -> str:
    """`text` as a bash $'...' word of printable ASCII only (no tab, newline, quote or `!`
    reaches the terminal raw, so nothing is completed, expanded or cut at a line end)."""
    out = []
    for b in text.encode("utf-8", "surrogateescape"):
        ch = chr(b)
        if 0x20 <= b < 0x7F and ch not in "\\'!":
            out.append(ch)
        else:
            out.append(f"\\x{b:02x}")
    return "$'" + "".join(out) + "'"


def typed_lines(command: str, nonce: str) -> list[str]:
    """The lines typed for one command (pure): chunked assignments, then eval + end marker."""
    quoted = ansi_c_quote(command)[2:-1]
    chunks = [quoted[i : i + CHUNK] for i in range(0, len(quoted), CHUNK)] or [""]
    # never split an escape (\xHH) across two chunks
    fixed: list[str] = []
    carry = ""
    for c in chunks:
        c = carry + c
        cut = c.rfind("\\", max(0, len(c) - 3))
        carry = c[cut:] if cut >= 0 and len(c) - cut < 4 else ""
        fixed.append(c[: len(c) - len(carry)])
    if carry:
        fixed.append(carry)
    lines = [f"__t1_c=$'{fixed[0]}'"] + [f"__t1_c+=$'{c}'" for c in fixed[1:]]
    # A command that completes prints its marker on the same line; one whose foreground job
    # is interrupted (Ctrl-C aborts the rest of the line) gets it from the prompt hook.
    lines.append(
        'PROMPT_COMMAND=__t1_prompt; __t1_armed=1; eval "$__t1_c"; __t1_rc=$?; __t1_armed=; '
        f"printf '\\036T1END {nonce} %d\\036\\n' \"$__t1_rc\""
    )
    return lines


SETUP = (
    "set +H; set +o history 2>/dev/null; unset HISTFILE; "
    '__t1_prompt() {{ local rc=$?; if [ -n "$__t1_armed" ]; then __t1_armed=; '
    "printf '\\036T1END {nonce} %d\\036\\n' \"$rc\"; fi; }}; "
    "PS1=''; PS2=''; PROMPT_COMMAND=__t1_prompt; printf '\\036T1READY {nonce}\\036\\n'"
)


class PtySession:
    """An interactive bash on a pseudo-terminal. `spawn(slave_fd)` starts the process whose
    stdin/stdout/stderr is the terminal (and makes it its controlling terminal)."""

    def __init__(
        self,
        spawn: Callable[[int], subprocess.Popen[bytes]],
        *,
        output_cap: int,
        on_close: Callable[[], None] | None = None,
        oom_kills: Callable[[], int] = lambda: 0,
        start_timeout_s: float = 20.0,
    ) -> None:
        self._nonce = secrets.token_hex(8)
        self._end = re.compile(rb"\x1eT1END " + self._nonce.encode() + rb" (-?\d+)\x1e\n?")
        self._ready = b"\x1eT1READY " + self._nonce.encode() + b"\x1e\n"
        self._spawn = spawn
        self._cap = output_cap
        self._on_close = on_close
        self._oom_kills = oom_kills
        self._start_timeout_s = start_timeout_s
        self._cond = threading.Condition()
        self._master = -1
        self._start()

    def _start(self) -> None:
        """A new shell on a new terminal (the first, or the next after `exit`)."""
        self._buf = bytearray()
        self._eof = False
        self._busy = False  # a command was typed and its end marker has not come yet
        self._dropped = 0
        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # oflag: "\n" stays "\n"
        attrs[3] &= ~termios.ECHO  # lflag: no echo of what we type, from the first byte
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self._master = master
        try:
            self.proc = self._spawn(slave)
        finally:
            os.close(slave)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self._type([SETUP.format(nonce=self._nonce)])
        if not self._wait_for(lambda: self._ready in self._buf, self._start_timeout_s):
            tail = bytes(self._buf[-500:]).decode(errors="replace")
            self.close()
            raise SandboxError(f"the agent shell did not start: {tail!r}")
        with self._cond:
            del self._buf[: self._buf.index(self._ready) + len(self._ready)]

    def _restart(self) -> None:
        """After the shell exited (`exit`, `exec`): reap it and start a new one. Its background
        processes died with it (the shell's PID namespace ends with the shell)."""
        self.proc.wait()
        self._reader.join(timeout=5)
        if self._master >= 0 and not self._reader.is_alive():
            os.close(self._master)
        self._master = -1
        self._start()

    # -- the Session protocol -------------------------------------------------------------
    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        if not self.alive:
            self._restart()
        if self._busy:
            self.interrupt()
        self._take()  # what arrived since the last read belongs to no command
        self._no_echo()
        oom_before = self._oom_kills()
        t0 = time.monotonic()
        self._busy = True
        self._type(typed_lines(command, self._nonce))
        timeout = 600.0 if timeout_s is None else max(0.05, timeout_s)
        done = self._wait_for(
            lambda: self._end.search(self._buf) is not None or self._dropped > 0, timeout
        )
        done = done and self._end.search(self._buf) is not None
        truncated = self._dropped > 0
        if truncated and not done:
            self.interrupt()
            done = True
        out, code = self._take_command()
        if code is not None:
            self._busy = False
        elif self._eof:  # the command ended the shell: its exit status is the shell's
            self.proc.wait()
            code = self.proc.returncode
        return ExecResult(
            exit_code=code if code is not None else 124,
            stdout=clean(out),
            stderr="",
            duration_s=time.monotonic() - t0,
            timed_out=not done and not self._eof,
            oom_killed=self._oom_kills() > oom_before,
            output_truncated=truncated,
        )

    def send_keys(self, keys: str) -> None:
        if not self.alive:
            self._restart()
        self._write(keys.encode("utf-8", "surrogateescape"))

    def read(self, wait_s: float = 0.0) -> str:
        if wait_s > 0:
            self._wait_for(lambda: False, wait_s)
        out, code = self._take_command()
        if code is not None:
            self._busy = False
        return clean(out)

    def close(self, *, kill: bool = True) -> None:
        """End the shell; with `kill` (default) its whole process tree too (the caller may
        already have killed it, as a sandbox's stop does)."""
        if self._on_close is not None and kill:
            self._on_close()  # kills the session's process tree (its cgroup)
        self._on_close = None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        # The reader ends at EOF, once the last process holding the terminal is gone; the
        # master is closed after it (closing an fd another thread reads could hand the
        # number to a new file under it).
        self._reader.join(timeout=5)
        if self._master >= 0 and not self._reader.is_alive():
            os.close(self._master)
            self._master = -1

    # -- helpers ------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._eof and self.proc.poll() is None

    def interrupt(self) -> None:
        """Stop whatever the last command left in the foreground: Ctrl-C, then SIGKILL."""
        if not self._busy or not self.alive:
            return
        self._write(b"\x03")
        if self._wait_for(lambda: self._end.search(self._buf) is not None, INTERRUPT_GRACE_S):
            self._take_command()
            self._busy = False
            return
        try:
            pgrp = os.tcgetpgrp(self._master)
            if pgrp > 0 and pgrp != os.getpgid(self.proc.pid):
                os.killpg(pgrp, signal.SIGKILL)
        except OSError:
            pass
        if not self._wait_for(lambda: self._end.search(self._buf) is not None, INTERRUPT_GRACE_S):
            # the command replaced our prompt hook: the shell is back at its prompt anyway
            self._type([f"printf '\\036T1END {self._nonce} 130\\036\\n'"])
            self._wait_for(lambda: self._end.search(self._buf) is not None, INTERRUPT_GRACE_S)
        self._take_command()
        self._busy = False

    def _no_echo(self) -> None:
        """Clear the terminal's ECHO if something turned it on (on a pty, the master's
        termios ioctls act on the terminal itself). An exited shell's terminal is left as
        it is."""
        try:
            attrs = termios.tcgetattr(self._master)
            if attrs[3] & termios.ECHO:
                attrs[3] &= ~termios.ECHO
                termios.tcsetattr(self._master, termios.TCSANOW, attrs)
        except (termios.error, OSError):
            pass

    def _type(self, lines: Sequence[str]) -> None:
        self._write("".join(line + "\n" for line in lines).encode())

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._master < 0 or self._eof:
                raise SandboxError("the agent shell has exited")
            try:
                n = os.write(self._master, view)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError as e:
                raise SandboxError(f"the agent shell has exited: {e}") from e
            view = view[n:]

    def _read_loop(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                chunk = b""
            with self._cond:
                if not chunk:
                    self._eof = True
                    self._cond.notify_all()
                    return
                room = self._cap - len(self._buf)
                if room < len(chunk):
                    # keep the end marker even when the output is over the cap
                    marker = self._end.search(chunk)
                    keep = chunk[: max(0, room)]
                    self._dropped += len(chunk) - len(keep)
                    if marker:
                        keep += marker.group(0)
                    chunk = keep
                self._buf += chunk
                self._cond.notify_all()

    def _wait_for(self, cond: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not cond():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._eof:
                    return cond()
                self._cond.wait(remaining)
            return True

    def _take(self) -> bytes:
        with self._cond:
            out = bytes(self._buf)
            self._buf.clear()
            self._dropped = 0
            return out

    def _take_command(self) -> tuple[bytes, int | None]:
        """Output up to (not including) the end marker and its exit status, or everything so
        far and None while the command is still running."""
        with self._cond:
            m = self._end.search(self._buf)
            if m is None:
                out = bytes(self._buf)
                self._buf.clear()
                return out, None
            out, code = bytes(self._buf[: m.start()]), int(m.group(1))
            del self._buf[: m.end()]
            self._dropped = 0
        self._no_echo()  # the command is over: what it left on is undone, as `stty -echo` did
        return out, code


def clean(raw: bytes) -> str:
    """Terminal output as text: escape sequences and carriage returns removed."""
    text = _ANSI.sub(b"", raw).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return text.decode("utf-8", "replace")
