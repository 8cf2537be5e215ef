"""Several Docker-API engines as one docker backend: `T1_DOCKER_HOSTS` lists them
(`unix:///…`, `tcp://host:2376` with DOCKER_TLS_VERIFY/DOCKER_CERT_PATH, `ssh://user@host`),
`T1_DOCKER_SLOTS` is each one's number of concurrent sandboxes (default 4).

Placement: a sandbox goes to an engine with a free slot, preferring one that already holds the
task's environment image (image affinity: the image is built on the engine that runs the
trial, once, and reused there), then the one with the most free slots. An engine that does
not answer is taken out of the rotation for `DOWN_S` seconds and the sandbox is placed on
another: an unreachable host is an infrastructure failure retried elsewhere, never the
trial's. A trial already running on an engine that dies ends as `sandbox_error` (not
rewardable); re-running it is the executor's work (idempotent trial ids).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.base import SandboxError, SandboxUnavailable

HOSTS_ENV = "T1_DOCKER_HOSTS"
SLOTS_ENV = "T1_DOCKER_SLOTS"
DEFAULT_SLOTS = 4
DOWN_S = 30.0  # how long an engine that did not answer stays out of the rotation


@dataclass
class Engine:
    """One engine of the pool and what the pool knows of it."""

    url: str
    slots: int
    live: int = 0
    placed: int = 0  # sandboxes ever placed here (for the record and tests)
    images: set[str] = field(default_factory=set)  # environment images it built or holds
    down_until: float = 0.0
    last_error: str = ""
    client: Any = None


def parse_hosts(text: str) -> list[str]:
    """'a, b ,c' -> ['a', 'b', 'c'] (order kept, duplicates dropped)."""
    return list(dict.fromkeys(h.strip() for h in text.split(",") if h.strip()))


class EnginePool:
    """Engines with slots; `acquire` blocks while every engine that answers is full."""

    def __init__(
        self,
        urls: Sequence[str],
        slots: int = DEFAULT_SLOTS,
        connect: Callable[[str], Any] | None = None,
    ) -> None:
        if not urls:
            raise ValueError(f"{HOSTS_ENV}: no engine listed")
        if slots < 1:
            raise ValueError(f"{SLOTS_ENV}: must be >= 1, got {slots}")
        self.engines = [Engine(url, slots) for url in urls]
        self._connect = connect or _connect
        self._cond = threading.Condition()

    def choose(self, image_key: str, now: float) -> Engine | None:
        """The engine for a sandbox of `image_key`, or None when none has a free slot (pure
        over the pool's state): free slots first, then affinity, then the most free slots."""
        up = [e for e in self.engines if e.down_until <= now and e.live < e.slots]
        if not up:
            return None
        return max(up, key=lambda e: (image_key in e.images, e.slots - e.live, -e.placed))

    def acquire(self, image_key: str, timeout_s: float = 600.0) -> Engine:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                now = time.monotonic()
                engine = self.choose(image_key, now)
                if engine is not None:
                    engine.live += 1
                    engine.placed += 1
                    return engine
                if all(e.down_until > now for e in self.engines):
                    why = "; ".join(f"{e.url}: {e.last_error}" for e in self.engines)
                    raise SandboxUnavailable(f"no engine of {HOSTS_ENV} answers ({why})")
                if now > deadline:
                    raise SandboxError(f"no free sandbox slot on {HOSTS_ENV} in {timeout_s:.0f}s")
                self._cond.wait(timeout=0.5)

    def release(self, engine: Engine) -> None:
        with self._cond:
            engine.live = max(0, engine.live - 1)
            self._cond.notify_all()

    def mark_down(self, engine: Engine, why: str) -> None:
        with self._cond:
            engine.down_until = time.monotonic() + DOWN_S
            engine.last_error = why[:300]
            engine.client = None
            self._cond.notify_all()

    def client(self, engine: Engine) -> Any:
        """A connected client for `engine` (made once; SandboxUnavailable when it does not
        answer)."""
        if engine.client is None:
            engine.client = self._connect(engine.url)
        return engine.client


def _connect(url: str) -> Any:
    from sandbox.docker_api import docker_client

    return docker_client(url)


def answers(client: Any) -> bool:
    """Whether the engine behind `client` still answers (after an error: the engine's own
    failure, or the task's?)."""
    try:
        client.ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means it does not answer
        return False


_POOL: EnginePool | None = None
_POOL_KEY: tuple[str, str] | None = None
_POOL_LOCK = threading.Lock()


def configured_pool() -> EnginePool | None:
    """The pool `T1_DOCKER_HOSTS` describes (one per distinct setting), or None when unset:
    then the docker backend uses DOCKER_HOST alone, as before."""
    global _POOL, _POOL_KEY
    hosts = os.environ.get(HOSTS_ENV, "")
    if not hosts.strip():
        return None
    slots_text = os.environ.get(SLOTS_ENV, str(DEFAULT_SLOTS))
    key = (hosts, slots_text)
    with _POOL_LOCK:
        if _POOL is None or _POOL_KEY != key:
            try:
                slots = int(slots_text)
            except ValueError as e:
                raise ValueError(f"{SLOTS_ENV}: not a number: {slots_text!r}") from e
            _POOL, _POOL_KEY = EnginePool(parse_hosts(hosts), slots), key
        return _POOL
