"""One writer at a time for a long job on a store: a synthesis campaign, a pool build.

The store's commits are atomic, but two synthesis runs of one campaign both sample round r
from the same pool and both record it (`synth_rounds` says 2 candidates a round while
`synth_candidates` holds 4, and `rst` gets two versions). A job therefore holds a lock file
under `<store>/.locks/` for as long as it runs:

- the lock is an `flock` on that file, so the kernel releases it when the holder dies (a
  killed run leaves no lock behind to clean up); the file records the holder (pid, host,
  command, start time) so a refused second writer can say who holds it;
- a file left by a dead holder is taken over (its record is overwritten, and the take-over
  returned to the caller);
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError

from warehouse.store import Store, WarehouseError

LOCK_DIR = ".locks"

P = ParamSpec("P")
R = TypeVar("R")


class LockHolder(BaseModel):
    """Who holds a job's lock: written into the lock file while it is held."""

    job: str
    pid: int
    host: str
    command: str
    started_at: datetime

    def describe(self) -> str:
        since = self.started_at.isoformat(timespec="seconds")
        return f"pid {self.pid} on {self.host} ({self.command}) since {since}"

    def is_dead(self) -> bool:
        """True when the holder ran on this host and its pid is gone."""
        if self.host != socket.gethostname():
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

    def __init__(self, job: str, root: Path, path: Path, holder: LockHolder | None) -> None:
        who = holder.describe() if holder else "another process (it recorded no holder yet)"
        if holder is not None and holder.is_dead():
            who += ", not running any more: a child process it started still holds the lock"
        super().__init__(
            f"{job} on {str(root)!r} is being written by {who}; wait for it or stop it "
            f"(lock file {path})"
        )
        self.job, self.path, self.holder = job, path, holder


class StoreReadOnlyError(WarehouseError):
    """The store cannot be written (a read-only file system or directory)."""


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
def exclusive(root: Path, job: str, *, command: str | None = None) -> Iterator[LockHolder | None]:
    """Hold `job`'s lock on the store at `root` for the block.

    Yields the stale holder taken over (a dead process's record), else None. Raises
    `LockHeldError` naming the live holder when another process or thread holds it.
    """
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


def store_root(store: Any) -> Path:
    """The local directory of a `StoreRef` (a Store, a path or URL, or None for the default
    store); for a store on object storage its local cache (the lock then orders the writers
    of one machine only: across machines the conditional manifest put does)."""
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
            with exclusive(store_root(bound.arguments[store]), name):
                return fn(*args, **kwargs)

        return wrapper

    return decorate
