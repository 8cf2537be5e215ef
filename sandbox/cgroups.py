"""Resource limits through cgroup v1 controllers (memory, pids, cpu) mounted under
/sys/fs/cgroup/<controller>/t1-forge/.

One group per sandbox carries its limits; each of its process trees (the agent's shell, a
one-off command, the verifier) runs in a child group, so it can be killed alone while the
limits stay shared (v1 memory, pids and cpu account hierarchically). Every process joins its
group (its one thread, through the group's `tasks` file) before it execs, so nothing forks
before the limits apply."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path(os.environ.get("T1_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "t1-forge"
CONTROLLERS = ("memory", "pids", "cpu")


def cgroups_available() -> bool:
    return all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in CONTROLLERS) and os.access(
        CGROUP_ROOT / "memory", os.W_OK
    )


@dataclass(frozen=True)
class SandboxCgroup:
    """The memory/pids/cpu groups at `t1-forge/<name>` (`name` may be `sandbox/child`)."""

    name: str

    def path(self, controller: str) -> Path:
        return Path(self._dir(controller))

    def _dir(self, controller: str) -> str:
        # plain strings: the runner builds these paths a few hundred times per trial
        return f"{CGROUP_ROOT}/{controller}/{PARENT}/{self.name}"

    def child(self, name: str) -> SandboxCgroup:
        return SandboxCgroup(f"{self.name}/{name}")

    def create(
        self, *, memory_mb: int | None = None, pids: int | None = None, cpus: float | None = None
    ) -> None:
        for c in CONTROLLERS:
            os.makedirs(self._dir(c), exist_ok=True)
        if memory_mb is not None:
            limit = str(memory_mb * 1024 * 1024)
            _write(self._dir("memory") + "/memory.limit_in_bytes", limit)
            memsw = self._dir("memory") + "/memory.memsw.limit_in_bytes"
            if os.path.exists(memsw):
                _write(memsw, limit)
        if pids is not None:
            _write(self._dir("pids") + "/pids.max", str(pids))
        if cpus is not None:
            period = 100_000
            _write(self._dir("cpu") + "/cpu.cfs_period_us", str(period))
            _write(self._dir("cpu") + "/cpu.cfs_quota_us", str(max(1000, int(cpus * period))))

    def tasks_files(self) -> list[str]:
        """The `tasks` files a new single-threaded process writes "0" into to join the group
        (sandbox/helper.c: unlike its pid in `cgroup.procs`, this waits out no RCU grace
        period)."""
        return [self._dir(c) + "/tasks" for c in CONTROLLERS]

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
        """SIGKILL every process in the group (and its children). Fork races converge because
        pids.max bounds the group: rounds go on while new processes appear. With `wait`,
        also until the group is empty (killed processes may take a moment to exit); without,
        it returns once every listed process has been sent SIGKILL (none of them runs user
        code again)."""
        deadline = time.monotonic() + timeout_s
        killed: set[int] = set()
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
        (v1 counts a kill in the group where the victim ran)."""
        total = 0
        for group in _groups_below(self._dir("memory")):
            try:
                text = _read(group + "/memory.oom_control")
            except FileNotFoundError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    total += int(value)
        return total

    def destroy(self) -> None:
        """Kill everything in the group, then remove it and its children (deepest first)."""
        self.kill_all()
        for c in CONTROLLERS:
            # a group comes before the groups below it: reversed, the deepest go first
            for group in reversed(_groups_below(self._dir(c))):
                _rmdir(group)


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
    base = CGROUP_ROOT / "pids" / PARENT
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
