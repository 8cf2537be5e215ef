"""One writer at a time for a long job on a store: a synthesis campaign, a pool build.

The store's commits are atomic, but two synthesis runs of one campaign both sample round r
from the same pool and both record it (`synth_rounds` says 2 candidates a round while
`synth_candidates` holds 4, and `rst` gets two versions). A job therefore holds a lock on
the store for as long as it runs. Exclusion lives where the data lives:

- **a store on local disk**: an `flock` on `<store>/.locks/<job>.lock`, so the kernel
  releases it when the holder dies (a killed run leaves no lock behind to clean up); the file
  records the holder (pid, host, command, start time) so a refused second writer can say who
  holds it, and a file left by a dead holder is taken over;
- **a store on object storage** (S3), which several machines write: a *lease* object
  `_locks/<job>.json` in the store itself, created only if absent (`If-None-Match: *`) and
  then rewritten only over the version it read (`If-Match: <ETag>`), so of two drivers on two
  machines exactly one holds it. The holder renews it every `ttl_s / 4` (a heartbeat
  thread); a lease not renewed for `ttl_s` (by the object store's own clock) is expired and
  taken over, as is one whose holder ran on this machine and is gone. A holder that finds
  its lease taken over (it stalled past `ttl_s`) stops committing: every later manifest write
  of this process to that store raises `LeaseLostError`. A local `flock` file on each
  machine's cache, what this was before, excluded a second driver on the same machine only;

and on both:

- the same thread may take a lock it already holds (a pool build that records RST inside a
  selection), another thread or process is refused with `LockHeldError`, a
  `WarehouseError`: `t1` prints it in one line and exits 2;
- a store that cannot be written (read-only, or not ours to write) fails here, before any
  work, with `StoreReadOnlyError`.

Stages take these locks at their entry points (`synthesis.rounds.run_synthesis`,
`audit.selection.run_selection`) with `single_writer`; this module imports nothing above
`warehouse/`.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import inspect
import os
import re
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError

from warehouse.store import COMMIT_GUARDS, Store, WarehouseError

LOCK_DIR = ".locks"
TTL_ENV = "T1_LEASE_TTL_S"
DEFAULT_TTL_S = 60.0  # a lease not renewed for this long (object store's clock) is free

P = ParamSpec("P")
R = TypeVar("R")


def machine_id() -> str:
    """This machine's boot and pid namespace: two processes with the same value see the same
    pids (a host name alone is shared by containers and reused by machines)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return socket.gethostname()


class LockHolder(BaseModel):
    """Who holds a job's lock: written into the lock file (or the lease) while it is held."""

    job: str
    pid: int
    host: str
    command: str
    started_at: datetime
    machine: str = ""  # `machine_id()` of the holder (leases; "" in older lock files)
    ttl_s: float | None = None  # leases: free once not renewed for this long
    renewals: int = 0  # leases: heartbeats so far (each one rewrites the object)
    released: bool = False  # leases: the holder let it go

    def describe(self) -> str:
        since = self.started_at.isoformat(timespec="seconds")
        return f"pid {self.pid} on {self.host} ({self.command}) since {since}"

    def is_dead(self) -> bool:
        """True when the holder ran on this machine and its pid is gone."""
        if self.machine:
            if self.machine != machine_id():
                return False
        elif self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class LockHeldError(WarehouseError):
    """Another process (or thread) is running the same job on this store."""

    def __init__(
        self, job: str, root: Path | str, path: Path | str, holder: LockHolder | None
    ) -> None:
        who = holder.describe() if holder else "another process (it recorded no holder yet)"
        if holder is not None and holder.is_dead() and holder.ttl_s is None:
            who += ", not running any more: a child process it started still holds the lock"
        what = "lease" if holder is not None and holder.ttl_s is not None else "lock file"
        super().__init__(
            f"{job} on {str(root)!r} is being written by {who}; wait for it or stop it "
            f"({what} {path})"
        )
        self.job, self.path, self.holder = job, path, holder


class StoreReadOnlyError(WarehouseError):
    """The store cannot be written (a read-only file system or directory)."""


class LeaseLostError(WarehouseError):
    """This process's lease on a job was taken over (it was not renewed in time): it must
    commit nothing more to the store."""


_held = threading.local()


def lock_path(root: Path, job: str) -> Path:
    """`<root>/.locks/<job as a file name>.lock`."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", job).strip("-.") or "job"
    return root / LOCK_DIR / f"{stem}.lock"


def current_command() -> str:
    """This process's command line, shortened (`t1 synth --seed 2`)."""
    argv = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    text = shlex.join(argv)
    return text if len(text) <= 160 else text[:157] + "..."


def read_holder(path: Path) -> LockHolder | None:
    """The holder recorded in a lock file (None when empty or unreadable)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
        return LockHolder.model_validate_json(text) if text else None
    except (OSError, ValidationError, ValueError):
        return None


def _open_lock_file(root: Path, path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise StoreReadOnlyError(
                f"cannot write to the store {str(root)!r} ({e.strerror}: {e.filename}); "
                "pass --store (or set $T1_WAREHOUSE) with a writable directory"
            ) from None
        raise


@contextmanager
def exclusive(
    where: Path | Store,
    job: str,
    *,
    command: str | None = None,
    ttl_s: float | None = None,
) -> Iterator[LockHolder | None]:
    """Hold `job`'s lock on the store `where` (a Store, or a local directory) for the block:
    a lease in the store for a store on object storage, else an flock under its directory.

    Yields the stale holder taken over (a dead or expired holder's record), else None.
    Raises `LockHeldError` naming the live holder when another process or thread holds it.
    `ttl_s` (leases; default $T1_LEASE_TTL_S, else 60 s) is how long a lease outlives its
    holder's last heartbeat.
    """
    if isinstance(where, Store) and where.shared_leases:
        key = f"{where.location}#{job}"
        held_leases: dict[str, int] = _held.__dict__.setdefault("leases", {})
        if held_leases.get(key):
            held_leases[key] += 1
            try:
                yield None
            finally:
                held_leases[key] -= 1
            return
        lease, stale = Lease.acquire(where, job, command=command, ttl_s=ttl_s)
        held_leases[key] = 1
        try:
            yield stale
        finally:
            held_leases.pop(key, None)
            lease.release()
        return
    root = where.root if isinstance(where, Store) else where
    path = lock_path(root, job)
    held: dict[Path, int] = _held.__dict__.setdefault("counts", {})
    if held.get(path):
        held[path] += 1
        try:
            yield None
        finally:
            held[path] -= 1
        return
    fd = _open_lock_file(root, path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeldError(job, root, path, read_holder(path)) from None
        stale = read_holder(path)  # the flock was free: whoever wrote this is gone
        me = LockHolder(
            job=job,
            pid=os.getpid(),
            host=socket.gethostname(),
            command=command or current_command(),
            started_at=datetime.now(UTC),
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, (me.model_dump_json() + "\n").encode(), 0)
        held[path] = 1
        try:
            yield stale
        finally:
            held.pop(path, None)
            os.ftruncate(fd, 0)  # released: no holder to name
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def lease_name(job: str) -> str:
    """A job's lease object name (the lock file's stem)."""
    return lock_path(Path("."), job).stem


def default_ttl_s() -> float:
    text = os.environ.get(TTL_ENV, "").strip()
    if not text:
        return DEFAULT_TTL_S
    try:
        value = float(text)
    except ValueError:
        raise WarehouseError(f"${TTL_ENV} must be a number of seconds, got {text!r}") from None
    if value <= 0:
        raise WarehouseError(f"${TTL_ENV} must be > 0, got {value}")
    return value


class Lease:
    """A job's lease on a store on object storage, held and renewed by this process.

    `acquire` takes it (or raises `LockHeldError`); a daemon thread renews it every
    `ttl_s / 4`; `release` lets it go (a conditional write of a released record, so a lease
    already taken over is left to its new holder). While held, it guards every manifest
    write of this process to the store (`store.COMMIT_GUARDS`): once lost, they raise
    `LeaseLostError`."""

    def __init__(self, store: Any, name: str, holder: LockHolder, etag: str) -> None:
        self.store, self.name, self.holder, self.etag = store, name, holder, etag
        self.ttl_s = holder.ttl_s or DEFAULT_TTL_S
        self.lost: str | None = None
        self.renewed_at = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease:{name}", daemon=True)
        COMMIT_GUARDS.setdefault(store.location, {})[id(self)] = self.check
        self._thread.start()

    @classmethod
    def acquire(
        cls, store: Any, job: str, *, command: str | None = None, ttl_s: float | None = None
    ) -> tuple[Lease, LockHolder | None]:
        """Take `job`'s lease: (the lease, the expired or dead holder taken over, if any)."""
        from warehouse.objectstore import LeaseConflict

        name = lease_name(job)
        ttl = ttl_s if ttl_s is not None else default_ttl_s()
        me = LockHolder(
            job=job,
            pid=os.getpid(),
            host=socket.gethostname(),
            command=command or current_command(),
            started_at=datetime.now(UTC),
            machine=machine_id(),
            ttl_s=ttl,
        )
        data = me.model_dump_json().encode()
        for _ in range(5):  # a lost race to a releasing or expiring holder: look again
            current = store.lease_get(name)
            stale: LockHolder | None = None
            try:
                if current is None:
                    etag = store.lease_put(name, data, etag=None)
                else:
                    holder = _parse_holder(current.data)
                    expired = holder is None or current.age_s > (holder.ttl_s or ttl)
                    if holder is not None and not (holder.released or expired or holder.is_dead()):
                        raise LockHeldError(job, store.location, store.lease_url(name), holder)
                    stale = None if holder is None or holder.released else holder
                    etag = store.lease_put(name, data, etag=current.etag)
            except LeaseConflict:
                continue
            return cls(store, name, me, etag), stale
        current = store.lease_get(name)
        holder = _parse_holder(current.data) if current is not None else None
        raise LockHeldError(job, store.location, store.lease_url(name), holder)

    def check(self) -> None:
        """Raise LeaseLostError once the lease is lost (a commit guard)."""
        if self.lost is not None:
            raise LeaseLostError(
                f"{self.holder.job} on {self.store.location!r}: this process's lease was lost "
                f"({self.lost}); it commits nothing more (another driver took the job over)"
            )

    def renew(self) -> None:
        """One heartbeat: rewrite the lease over the version we wrote last."""
        from warehouse.objectstore import LeaseConflict

        with self._lock:
            if self.lost is not None or self._stop.is_set():
                return
            renewed = self.holder.model_copy(update={"renewals": self.holder.renewals + 1})
            try:
                self.etag = self.store.lease_put(
                    self.name, renewed.model_dump_json().encode(), etag=self.etag
                )
            except LeaseConflict:
                self.lost = "another process rewrote it: it had expired"
                return
            except WarehouseError as e:  # the store did not answer: try again next beat
                if time.monotonic() - self.renewed_at > self.ttl_s:
                    self.lost = f"not renewed for {self.ttl_s:g} s ({e})"
                return
            self.holder = renewed
            self.renewed_at = time.monotonic()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            self.renew()
            if self.lost is not None:
                return

    def release(self) -> None:
        """Stop renewing and mark the lease released (unless it was taken over)."""
        from warehouse.objectstore import LeaseConflict

        self._stop.set()
        self._thread.join(timeout=self.ttl_s)
        COMMIT_GUARDS.get(self.store.location, {}).pop(id(self), None)
        if self.lost is not None:
            return
        done = self.holder.model_copy(update={"released": True})
        try:
            self.store.lease_put(self.name, done.model_dump_json().encode(), etag=self.etag)
        except (LeaseConflict, WarehouseError):
            pass  # taken over meanwhile, or unreachable: it expires on its own


def _parse_holder(data: bytes) -> LockHolder | None:
    try:
        return LockHolder.model_validate_json(data)
    except (ValidationError, ValueError):
        return None


def store_root(store: Any) -> Path:
    """The local directory of a `StoreRef` (a Store, a path or URL, or None for the default
    store); for a store on object storage its local cache."""
    return store.root if isinstance(store, Store) else Store.at(store).root


def single_writer(job: str, *, store: str = "store") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a stage's entry point so a call holds the lock of `job` on its store.

    `job` is a format string over the call's arguments (`"synthesis campaign
    {cfg.campaign!r}"`); `store` names the argument holding the `StoreRef`.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            name = job.format(**bound.arguments)
            ref = bound.arguments[store]
            with exclusive(ref if isinstance(ref, Store) else Store.at(ref), name):
                return fn(*args, **kwargs)

        return wrapper

    return decorate
