"""Several Docker-API engines as one docker backend: `T1_DOCKER_HOSTS` lists them
(`unix:///…`, `tcp://host:2376`, `ssh://user@host`), `T1_DOCKER_SLOTS` is each one's number of
concurrent sandboxes (default 4).

TLS: a `tcp://` entry may carry its own material, `tcp://h1:2376?cert_path=/etc/t1/h1` (Docker's
layout: ca.pem, cert.pem, key.pem; the engine's certificate checked against that ca.pem) or
`...&tls_verify=0` (encrypted, the engine not authenticated); an entry without settings uses
the global DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, as DOCKER_HOST does.

Placement: a sandbox goes to an engine with a free slot, preferring one that already holds the
task's environment image (image affinity: the image is built on the engine that runs the
trial, once, and reused there), then the one with the most free slots. An engine that does
not answer is taken out of the rotation for `DOWN_S` seconds and the sandbox is placed on
another: an unreachable host is an infrastructure failure retried elsewhere, never the
trial's. A trial already running on an engine that dies ends as `sandbox_error` (not
rewardable); re-running it is the executor's work (idempotent trial ids).

Egress: a network policy other than `none` is set up from this machine (sandbox.egress enters
the container's network namespace with nsenter), so such a sandbox is placed only on the
engines on this machine (`on_this_machine`), and refused before the trial (SandboxUnavailable)
where the pool has none.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sandbox.base import SandboxError, SandboxUnavailable
from sandbox.docker_api import EngineTLS, docker_client, endpoint, is_podman

HOSTS_ENV = "T1_DOCKER_HOSTS"
SLOTS_ENV = "T1_DOCKER_SLOTS"
DEFAULT_SLOTS = 4
DOWN_S = 30.0  # how long an engine that did not answer stays out of the rotation
HOST_SYNTAX = "<url>[?cert_path=<dir>[&tls_verify=0|1]], TLS settings on tcp:// only"


@dataclass(frozen=True)
class EngineSpec:
    """One entry of `T1_DOCKER_HOSTS`: the engine's URL (its DOCKER_HOST) and its own TLS
    (None: the global DOCKER_TLS_VERIFY / DOCKER_CERT_PATH)."""

    url: str
    tls: EngineTLS | None = None

    @property
    def local(self) -> bool:
        return on_this_machine(self.url)


@dataclass
class Engine:
    """One engine of the pool and what the pool knows of it."""

    spec: EngineSpec
    slots: int
    live: int = 0
    placed: int = 0  # sandboxes ever placed here (for the record and tests)
    images: set[str] = field(default_factory=set)  # environment images it built or holds
    down_until: float = 0.0
    last_error: str = ""
    client: Any = None

    @property
    def url(self) -> str:
        return self.spec.url


def parse_host(entry: str) -> EngineSpec:
    """'tcp://h1:2376?cert_path=/etc/t1/h1&tls_verify=1' -> EngineSpec; a ValueError naming
    `T1_DOCKER_HOSTS` and the entry when it is malformed."""
    url, has_query, query = entry.partition("?")
    scheme, _, rest = url.partition("://")

    def bad(why: str) -> ValueError:
        return ValueError(f"{HOSTS_ENV}: entry {entry!r}: {why} (expected {HOST_SYNTAX})")

    if not scheme or not rest:
        raise bad("not a URL such as unix:///path, tcp://host:port or ssh://user@host")
    if not has_query:
        return EngineSpec(url)
    if scheme != "tcp":
        raise bad(f"TLS settings on a {scheme}:// engine")
    settings: dict[str, str] = {}
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key not in ("cert_path", "tls_verify") or not value or key in settings:
            raise bad(f"unknown, empty or repeated setting {pair!r}")
        settings[key] = value
    cert_path = settings.get("cert_path", "")
    verify = settings.get("tls_verify", "1")
    if not cert_path.startswith("/"):
        raise bad("cert_path must be given, as an absolute directory")
    if verify not in ("0", "1"):
        raise bad(f"tls_verify must be 0 or 1, got {verify!r}")
    return EngineSpec(url, EngineTLS(cert_path, verify == "1"))


def parse_hosts(text: str) -> list[EngineSpec]:
    """'a, b ,c' -> one EngineSpec each (order kept, repeats dropped; one URL listed twice with
    different settings is a ValueError)."""
    specs: dict[str, EngineSpec] = {}
    for entry in (h.strip() for h in text.split(",")):
        if not entry:
            continue
        spec = parse_host(entry)
        if specs.setdefault(spec.url, spec) != spec:
            raise ValueError(f"{HOSTS_ENV}: {spec.url} listed twice with different settings")
    return list(specs.values())


def on_this_machine(url: str) -> bool:
    """Whether an engine URL names this machine: a socket (unix://), or a loopback name or
    address (a loopback port forwarded to another machine is taken for this one)."""
    if url.startswith(("unix://", "npipe://")):
        return True
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class EngineSite:
    """What the docker backend may assume of one engine: whether it is Podman, and whether it
    runs on this machine (`here`: a path of this machine names the same file for it)."""

    podman: bool
    here: bool

    @property
    def local_podman(self) -> bool:
        """Podman on this machine: the only engine handed paths of this machine (its
        catatonit, the build network namespace, the container's mount read here)."""
        return self.podman and self.here


def engine_site(client: Any) -> EngineSite:
    """The site of the engine behind `client`: `on_this_machine` of the DOCKER_HOST it was
    made for (unset: the default socket, on this machine)."""
    where = endpoint(client)
    here = where in ("", "default") or on_this_machine(where)
    return EngineSite(podman=is_podman(client), here=here)


def egress_problem(mode: str | None, urls: Sequence[str], where: str) -> str | None:
    """Why a sandbox whose network `mode` needs egress (None: it does not) can run on none of
    the engines `urls` (named by the variable `where`), or None when one is on this machine."""
    if mode is None or any(on_this_machine(u) for u in urls):
        return None
    return (
        f"network policy '{mode}' needs an engine on this machine (unix://, or tcp:// to "
        f"localhost) to set up its egress; {where}={','.join(urls)} has none"
    )


class EnginePool:
    """Engines with slots; `acquire` blocks while every engine that answers is full."""

    def __init__(
        self,
        specs: Sequence[EngineSpec],
        slots: int = DEFAULT_SLOTS,
        connect: Callable[[EngineSpec], Any] | None = None,
    ) -> None:
        if not specs:
            raise ValueError(f"{HOSTS_ENV}: no engine listed")
        if slots < 1:
            raise ValueError(f"{SLOTS_ENV}: must be >= 1, got {slots}")
        self.engines = [Engine(spec, slots) for spec in specs]
        self._connect = connect or _connect
        self._cond = threading.Condition()

    def choose(self, image_key: str, now: float, local_only: bool = False) -> Engine | None:
        """The engine for a sandbox of `image_key` (with `local_only`, one on this machine), or
        None when none has a free slot (pure over the pool's state): free slots first, then
        affinity, then the most free slots."""
        up = [
            e
            for e in self.engines
            if e.down_until <= now and e.live < e.slots and (e.spec.local or not local_only)
        ]
        if not up:
            return None
        return max(up, key=lambda e: (image_key in e.images, e.slots - e.live, -e.placed))

    def acquire(self, image_key: str, timeout_s: float = 600.0, local_only: bool = False) -> Engine:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                now = time.monotonic()
                engine = self.choose(image_key, now, local_only)
                if engine is not None:
                    engine.live += 1
                    engine.placed += 1
                    return engine
                eligible = [e for e in self.engines if e.spec.local or not local_only]
                if all(e.down_until > now for e in eligible):
                    why = "; ".join(f"{e.url}: {e.last_error}" for e in eligible)
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
            engine.client = self._connect(engine.spec)
        return engine.client


def _connect(spec: EngineSpec) -> Any:
    return docker_client(spec.url, spec.tls)


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
