"""Progress lines for long steps: no asset, flow step or command runs silently for more than
about half a minute.

`Heartbeat` turns a stage's `progress(phase, done, total)` callbacks into lines (each phase's
first and last, at most one per `every_s` in between) and, from a thread, says
`<label>: still <last status> (N s)` whenever `quiet_s` pass without a line: a stretch with no
callback (a slow trial, building the warm start, starting the engine) is still heard of. The
log function is whatever the orchestrator gives (Dagster's `context.log.info`, Prefect's run
logger, stderr), so the same lines reach Dagster's and Prefect's logs and the terminal.

Regression (issue 36): the audit asset logged nothing between STEP_START and its output
(215 s in the UI, 1,925 s inside a loaded `make demo`), and a campaign started from a UI on a
fresh checkout built the warm start inside the flow run without a line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Log = Callable[[str], None]


class Heartbeat:
    """Progress lines of one long step; use as a context manager (the thread runs inside)."""

    def __init__(
        self,
        log: Log,
        label: str,
        *,
        every_s: float = 10.0,
        quiet_s: float = 25.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.label = log, label
        self.every_s, self.quiet_s, self.clock = every_s, quiet_s, clock
        self.started = self.last_line = clock()
        self.status = "starting"
        self._phase_logged: dict[str, int] = {}
        self._last_update = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _say(self, text: str, now: float) -> None:
        self.last_line = now
        self.log(text)

    def note(self, text: str) -> None:
        """Log `text` now; it is also the status a later heartbeat repeats."""
        with self._lock:
            self.status = text
            self._say(f"{self.label}: {text}", self.clock())

    def heard(self, status: str) -> None:
        """The caller logged a line of its own: `status` is what a heartbeat repeats, and the
        quiet time starts again."""
        with self._lock:
            self.status, self.last_line = status, self.clock()

    def update(self, phase: str, done: int, total: int) -> None:
        """A stage's progress callback: logs a phase's first and last count, and in between
        at most one line per `every_s`."""
        now = self.clock()
        with self._lock:
            self.status = f"{phase} {done}/{total}"
            first = phase not in self._phase_logged
            last = done >= total and self._phase_logged.get(phase) != done
            if first or last or now - self._last_update >= self.every_s:
                self._phase_logged[phase] = done
                self._last_update = now
                self._say(f"{self.label}: {self.status} ({now - self.started:.0f} s)", now)

    def due(self, now: float) -> str | None:
        """The heartbeat line to log at `now`, when `quiet_s` passed without one (pure)."""
        if now - self.last_line < self.quiet_s:
            return None
        return f"{self.label}: still {self.status} ({now - self.started:.0f} s)"

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.quiet_s / 5)):
            with self._lock:
                now = self.clock()
                line = self.due(now)
                if line is not None:
                    try:
                        self._say(line, now)
                    except Exception:  # noqa: BLE001 - a logger that fails stops the beat only
                        return

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"hb-{self.label}")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
