"""Resource limits (memory, pids, cpu) through cgroups, on either layout a host mounts:

- **v1** (a directory per controller): `/sys/fs/cgroup/<controller>/t1-forge/<group>`;
- **v2** (one unified tree, Debian 12, Ubuntu 22.04+ and most cloud VMs):
  `/sys/fs/cgroup/t1-forge/<group>`, a delegated subtree: `t1-forge` has memory, pids and
  cpu enabled for the groups below it and holds no process itself (v2's no-internal-process
  rule), and everything below it is ours. `T1_CGROUP_PARENT` (a path below the mount) puts
  that subtree elsewhere, e.g. below a systemd unit with `Delegate=yes`.

`T1_CGROUP_ROOT` (default /sys/fs/cgroup) is where the hierarchy is looked for: a v2 mount
when it has `cgroup.controllers`, else v1 when memory, pids and cpu are mounted below it (a
hybrid host, v1 controllers plus an empty v2 tree at `unified/`, is v1).

One group per sandbox carries its limits; each of its process trees (the agent's shell, a
one-off command, the verifier) runs in a child group, so it can be killed alone while the
limits stay shared (v1 and v2 both account hierarchically). Every process joins its group
before it execs, so nothing forks before the limits apply: v1 through each controller's
`tasks` file (its one thread, pid 0: no global lock), v2 through the group's `cgroup.procs`
(v2 moves threads across groups only inside a threaded subtree, so this write takes the
kernel's threadgroup lock; docs/sandbox.md)."""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CGROUP_ROOT = Path(os.environ.get("T1_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "t1-forge"
PARENT_ENV = "T1_CGROUP_PARENT"
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


class CgroupError(OSError):
    """The cgroup hierarchy cannot hold sandboxes here; the message says why in one line."""


@dataclass(frozen=True)
class Hierarchy:
    """Where sandbox groups live: `version` 1 or 2, `root` the mount (v2) or the directory of
    the controllers' mounts (v1), `parent` our subtree's path below it."""

    version: Literal[1, 2]
    root: str
    parent: str

    def top(self, controller: str = "pids") -> str:
        """Our subtree's directory (v1: in `controller`'s hierarchy)."""
        if self.version == 2:
            return f"{self.root}/{self.parent}"
        return f"{self.root}/{controller}/{self.parent}"


def detect(root: Path, parent: str = PARENT) -> Hierarchy | None:
    """The layout mounted at `root` (see the module docstring), or None when neither is."""
    parent = parent.strip("/") or PARENT
    if (root / "cgroup.controllers").exists():
        return Hierarchy(2, str(root), parent)
    if all((root / c / "cgroup.procs").exists() for c in CONTROLLERS):
        return Hierarchy(1, str(root), parent)
    return None


_PREPARED: set[Hierarchy] = set()
_DETECTED: dict[tuple[str, str], Hierarchy] = {}


def hierarchy() -> Hierarchy | None:
    """The hierarchy of this host (CGROUP_ROOT, $T1_CGROUP_PARENT); a found one is
    remembered (the runner asks a few hundred times per trial)."""
    key = (str(CGROUP_ROOT), os.environ.get(PARENT_ENV, PARENT))
    found = _DETECTED.get(key)
    if found is None:
        found = detect(CGROUP_ROOT, key[1])
        if found is not None:
            _DETECTED[key] = found
    return found


def _current() -> Hierarchy:
    h = hierarchy()
    if h is None:
        raise CgroupError(errno.ENOENT, cgroup_problem() or "no cgroup hierarchy")
    return h


def cgroup_problem() -> str | None:
    """Why sandboxes cannot get their limits here (one line), or None when they can. On v2
    this makes our subtree ready (`prepare`), once per process."""
    h = hierarchy()
    if h is None:
        return (
            f"no cgroup hierarchy under {CGROUP_ROOT}: neither a cgroup v2 mount nor the v1 "
            f"{'/'.join(CONTROLLERS)} controllers (set T1_CGROUP_ROOT to where they are mounted)"
        )
    if h.version == 1:
        if not os.access(f"{h.root}/memory", os.W_OK):
            return f"the cgroup v1 controllers under {h.root} are not writable (run as root)"
        return None
    try:
        prepare(h)
    except CgroupError as e:
        return e.strerror
    return None


def cgroups_available() -> bool:
    return cgroup_problem() is None


def prepare(h: Hierarchy) -> None:
    """v2: create our subtree and enable memory, pids and cpu on the way down to it (in each
    ancestor below the mount that lacks them, then in the subtree's top for the sandbox
    groups). CgroupError says, in one line, what is missing: a controller the parent does not
    offer (a v1 hierarchy holds it, or it was not delegated), a parent that holds processes of
    its own, or no permission."""
    if h.version == 1 or (h in _PREPARED and os.path.isdir(h.top())):
        return
    wanted = set(CONTROLLERS)
    path = h.root
    for part in [""] + h.parent.split("/"):
        if part:
            path = f"{path}/{part}"
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as e:
                raise CgroupError(e.errno, f"cgroup v2: cannot create {path}: {e.strerror}") from e
        offered = set(_read(f"{path}/cgroup.controllers").split())
        if not wanted <= offered:
            missing = ", ".join(c for c in CONTROLLERS if c not in offered)
            raise CgroupError(
                errno.ENOTSUP,
                f"cgroup v2 at {path} does not offer the {missing} controller(s) (offered: "
                f"{' '.join(sorted(offered)) or 'none'}): a cgroup v1 hierarchy holds it, or "
                f"the parent group did not delegate it; see docs/sandbox.md",
            )
        enabled = set(_read(f"{path}/cgroup.subtree_control").split())
        todo = [c for c in CONTROLLERS if c not in enabled]
        if not todo:
            continue
        try:
            _write(f"{path}/cgroup.subtree_control", " ".join(f"+{c}" for c in todo))
        except OSError as e:
            if e.errno == errno.EBUSY:
                why = (
                    "it holds processes of its own (v2's no-internal-process rule); set "
                    f"{PARENT_ENV} to a group below one without processes, or move them "
                    "into a leaf group"
                )
            else:
                why = f"{e.strerror} (run as root, or delegate the group)"
            raise CgroupError(
                e.errno, f"cgroup v2: cannot enable {' '.join(todo)} below {path}: {why}"
            ) from e
    _PREPARED.add(h)


@dataclass(frozen=True)
class SandboxCgroup:
    """The groups at `<our subtree>/<name>` (`name` may be `sandbox/child`): one per
    controller on v1, one on v2."""

    name: str

    def path(self, controller: str) -> Path:
        return Path(self._dir(controller))

    def _dir(self, controller: str) -> str:
        # plain strings: the runner builds these paths a few hundred times per trial
        return f"{_current().top(controller)}/{self.name}"

    def _dirs(self) -> list[str]:
        """Every directory of this group: one per controller (v1), or the one (v2)."""
        h = _current()
        if h.version == 2:
            return [f"{h.top()}/{self.name}"]
        return [f"{h.top(c)}/{self.name}" for c in CONTROLLERS]

    def child(self, name: str) -> SandboxCgroup:
        return SandboxCgroup(f"{self.name}/{name}")

    def create(
        self, *, memory_mb: int | None = None, pids: int | None = None, cpus: float | None = None
    ) -> None:
        h = _current()
        prepare(h)
        for d in self._dirs():
            os.makedirs(d, exist_ok=True)
        for path, value in limit_files(h, self.name, memory_mb=memory_mb, pids=pids, cpus=cpus):
            _write(path, value)

    def tasks_files(self) -> list[str]:
        """The files a new single-threaded process writes "0" into to join the group
        (sandbox/helper.c): v1 each controller's `tasks` (moving the one thread waits out no
        RCU grace period, unlike a pid in `cgroup.procs`); v2 the group's `cgroup.procs`."""
        if _current().version == 2:
            return [self._dir("pids") + "/cgroup.procs"]
        return [d + "/tasks" for d in self._dirs()]

    def pids(self) -> list[int]:
        """Every process in the group and its children."""
        out: list[int] = []
        for group in _groups_below(self._dir("pids")):
            try:
                out.extend(int(x) for x in _read(group + "/cgroup.procs").split())
            except (FileNotFoundError, ValueError):
                continue
        return out

    def kill_all(self, timeout_s: float = 5.0, *, wait: bool = True) -> None:
        """SIGKILL every process in the group (and its children). On v2 `cgroup.kill` does it
        in the kernel, forks included; otherwise fork races converge because pids.max bounds
        the group: rounds go on while new processes appear. With `wait`, also until the group
        is empty (killed processes may take a moment to exit); without, it returns once every
        process has been sent SIGKILL (none of them runs user code again)."""
        deadline = time.monotonic() + timeout_s
        killed: set[int] = set()
        if _current().version == 2:
            try:
                _write(self._dir("pids") + "/cgroup.kill", "1")
                if not wait:
                    return
                killed.update(self.pids())  # signalled already: wait for them below
            except FileNotFoundError:  # the group is gone, or a kernel before 5.14
                pass
        while True:
            pids = self.pids()
            fresh = [p for p in pids if p not in killed]
            if not pids or (not fresh and not wait):
                return
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed.update(fresh)
            if time.monotonic() > deadline:
                return
            if not fresh:
                time.sleep(0.002)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer took in this group and its children
        (v1 counts a kill in the group where the victim ran; v2's `memory.events` of the
        group counts those of its whole subtree)."""
        if _current().version == 2:
            try:
                return oom_kill_count(_read(self._dir("memory") + "/memory.events"))
            except FileNotFoundError:
                return 0
        total = 0
        for group in _groups_below(self._dir("memory")):
            try:
                total += oom_kill_count(_read(group + "/memory.oom_control"))
            except FileNotFoundError:
                continue
        return total

    def destroy(self) -> None:
        """Kill everything in the group, then remove it and its children (deepest first)."""
        self.kill_all()
        for d in self._dirs():
            # a group comes before the groups below it: reversed, the deepest go first
            for group in reversed(_groups_below(d)):
                _rmdir(group)


def limit_files(
    h: Hierarchy,
    name: str,
    *,
    memory_mb: int | None = None,
    pids: int | None = None,
    cpus: float | None = None,
) -> list[tuple[str, str]]:
    """(file, value) pairs that set a group's limits, in the order they are written. Memory
    includes swap on both layouts (v1 `memsw` = the limit, v2 `memory.swap.max` = 0), where
    the kernel accounts swap."""
    out: list[tuple[str, str]] = []
    mem, pid, cpu = (f"{h.top(c)}/{name}" for c in ("memory", "pids", "cpu"))
    quota = max(1000, int(cpus * CPU_PERIOD_US)) if cpus is not None else 0
    if h.version == 2:
        if memory_mb is not None:
            out.append((f"{mem}/memory.max", str(memory_mb * 1024 * 1024)))
            if os.path.exists(f"{mem}/memory.swap.max"):
                out.append((f"{mem}/memory.swap.max", "0"))
        if pids is not None:
            out.append((f"{pid}/pids.max", str(pids)))
        if cpus is not None:
            out.append((f"{cpu}/cpu.max", f"{quota} {CPU_PERIOD_US}"))
        return out
    if memory_mb is not None:
        limit = str(memory_mb * 1024 * 1024)
        out.append((f"{mem}/memory.limit_in_bytes", limit))
        if os.path.exists(f"{mem}/memory.memsw.limit_in_bytes"):
            out.append((f"{mem}/memory.memsw.limit_in_bytes", limit))
    if pids is not None:
        out.append((f"{pid}/pids.max", str(pids)))
    if cpus is not None:
        out.append((f"{cpu}/cpu.cfs_period_us", str(CPU_PERIOD_US)))
        out.append((f"{cpu}/cpu.cfs_quota_us", str(quota)))
    return out


def oom_kill_count(text: str) -> int:
    """The `oom_kill N` line of v1 `memory.oom_control` or v2 `memory.events` (0 if none)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def oom_file_of(pid: int) -> str | None:
    """The file counting OOM kills in the memory cgroup of host process `pid` (a container's
    init), on either layout; None when /proc does not say."""
    v2 = None
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return f"{CGROUP_ROOT}/memory{path}/memory.oom_control"
            if hid == "0" and not controllers:
                v2 = path
    h = hierarchy()
    if v2 is not None and h is not None and h.version == 2:
        return f"{h.root}{v2.rstrip('/')}/memory.events"
    return None


def _groups_below(top: str) -> list[str]:
    """`top` and every group below it (none when `top` is gone); groups that vanish during
    the walk are skipped."""
    out, stack = [], [top]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            continue
        out.append(d)
    return out


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _rmdir(p: str) -> None:
    for _ in range(100):
        try:
            os.rmdir(p)
            return
        except FileNotFoundError:
            return
        except OSError:  # still draining exiting tasks
            time.sleep(0.001)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def sandbox_groups() -> list[str]:
    """Names of every sandbox group that exists now (live or left behind by a killed runner)."""
    h = hierarchy()
    if h is None:
        return []
    base = Path(h.top("pids"))
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir())


def cpu_time_ns(group: str) -> int | None:
    """CPU time in ns used so far by every process that ran in `group`: a group of the cgroup
    v1 cpuacct hierarchy (`cpuacct.usage`), else a cgroup v2 group (`cpu.stat`'s usage_usec);
    None where neither can be read. CPU time, unlike wall time, compares across loads."""
    try:
        with open(f"{CGROUP_ROOT}/cpuacct/{group}/cpuacct.usage") as f:
            return int(f.read())
    except (OSError, ValueError):
        pass
    try:
        with open(f"{CGROUP_ROOT}/{group}/cpu.stat") as f:
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
    except (OSError, ValueError):
        pass
    return None
