"""The host's layer cache (`$T1_SANDBOX_STATE/l`): who is using it, and `t1 sandbox prune`.

`sandbox.build` adds a layer for every distinct COPY/ADD/RUN it builds and nothing removed
them: on the test machine the cache grew by about 1,200 layers (2.3-2.6 GB) a day of test
runs, and a campaign over thousands of distinct tasks grows it the same way.

- Every process that reads or writes the cache holds a shared lock on `l/.in-use` for its
  lifetime (`layer_root` takes it): the layers of an image it built may be mounted by its
  sandboxes at any time.
- A layer's last use is the mtime of its `<name>.lock` (`stamp`, when built or reused).
- `prune` takes that lock exclusively without waiting, so it runs only while nothing uses
  the cache (otherwise it refuses and names the holders). It removes the layers unused for
  the given time and every layer built on one of them: a child is a diff over its parent's
  content, and a parent rebuilt later (a RUN need not give the same files twice) is not the
  one the child was made over. Leftovers of killed builds (`.b-*`, `.f-*`, `.ca-*`) go too.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.bases import state_dir

IN_USE = ".in-use"
KEY_CHARS = 16  # a layer directory's name: this many hex characters of its key
_LAYER = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")
_BUILD_LEFTOVER = re.compile(r"\.(b|f|ca)-")
_held: dict[Path, int] = {}


def cache_dir() -> Path:
    return state_dir() / "l"


def layer_root() -> Path:
    """The layer cache, held (shared) by this process from the first call on."""
    root = cache_dir()
    hold(root)
    return root


def hold(root: Path) -> None:
    if root in _held:
        return
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / IN_USE, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a prune runs
    _held[root] = fd


def release(root: Path) -> None:
    """Stop holding `root` (a process done with its images)."""
    fd = _held.pop(root, None)
    if fd is not None:
        os.close(fd)


def stamp(layer: Path) -> None:
    """Record a use of `layer` (the mtime of its lock file)."""
    try:
        layer.with_name(f"{layer.name}.lock").touch()
    except OSError:
        pass  # a read-only cache still serves; the layer just looks older to prune


@dataclass
class PruneReport:
    removed: list[str] = field(default_factory=list)  # layer names
    kept: int = 0
    freed_bytes: int = 0
    leftovers: int = 0  # directories of killed builds
    holders: list[int] = field(default_factory=list)  # pids using the cache: nothing done


def prune(unused_s: float, root: Path | None = None, now: float | None = None) -> PruneReport:
    """Remove the layers of `root` (default the cache) unused for `unused_s` seconds, with
    every layer built on them; refuse while any process uses the cache."""
    root = root or cache_dir()
    if root in _held:
        raise RuntimeError(f"{root}: this process uses the layer cache; prune from another")
    if not root.is_dir():
        return PruneReport()
    fd = os.open(root / IN_USE, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return PruneReport(holders=lock_holders(root / IN_USE))
        return _prune_held(root, unused_s, time.time() if now is None else now)
    finally:
        os.close(fd)


def doomed_layers(parents: dict[str, str | None], unused: set[str]) -> set[str]:
    """`unused` and, transitively, every layer whose parent is doomed."""
    children: dict[str, list[str]] = {}
    for name, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    doomed, todo = set(), list(unused)
    while todo:
        name = todo.pop()
        if name not in doomed:
            doomed.add(name)
            todo.extend(children.get(name, ()))
    return doomed


def _prune_held(root: Path, unused_s: float, now: float) -> PruneReport:
    report = PruneReport()
    parents: dict[str, str | None] = {}
    unused: set[str] = set()
    for path in root.iterdir():
        if _BUILD_LEFTOVER.match(path.name) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            report.leftovers += 1
            continue
        if not (_LAYER.fullmatch(path.name) and path.is_dir()):
            continue
        parents[path.name] = _parent(path)
        if now - _last_use(path) > unused_s:
            unused.add(path.name)
    doomed = doomed_layers(parents, unused)
    for name in sorted(doomed):
        layer = root / name
        report.freed_bytes += _size(layer)
        shutil.rmtree(layer, ignore_errors=True)
        for suffix in (".json", ".lock"):
            layer.with_name(f"{name}{suffix}").unlink(missing_ok=True)
        report.removed.append(name)
    report.kept = len(parents) - len(doomed)
    return report


def _parent(layer: Path) -> str | None:
    """The layer below `layer` in the cache (None: a base image, or no record)."""
    try:
        parent = json.loads(layer.with_name(f"{layer.name}.json").read_text())["parent"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return parent[:KEY_CHARS] if isinstance(parent, str) else None


def _last_use(layer: Path) -> float:
    try:
        return layer.with_name(f"{layer.name}.lock").stat().st_mtime
    except OSError:
        return layer.stat().st_mtime


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def lock_holders(path: Path) -> list[int]:
    """Pids holding a lock on `path` (from /proc/locks)."""
    try:
        st = path.stat()
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = set()
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        if len(parts) >= 6 and parts[5] == dev:
            pids.add(int(parts[4]))
    return sorted(pids)
