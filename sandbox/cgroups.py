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
        return CGROUP_ROOT / controller / PARENT / self.name

    def child(self, name: str) -> SandboxCgroup:
        return SandboxCgroup(f"{self.name}/{name}")

    def create(
        self, *, memory_mb: int | None = None, pids: int | None = None, cpus: float | None = None
    ) -> None:
        for c in CONTROLLERS:
            self.path(c).mkdir(parents=True, exist_ok=True)
        if memory_mb is not None:
            limit = str(memory_mb * 1024 * 1024)
            _write(self.path("memory") / "memory.limit_in_bytes", limit)
            memsw = self.path("memory") / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                _write(memsw, limit)
        if pids is not None:
            _write(self.path("pids") / "pids.max", str(pids))
        if cpus is not None:
            period = 100_000
            _write(self.path("cpu") / "cpu.cfs_period_us", str(period))
            _write(self.path("cpu") / "cpu.cfs_quota_us", str(max(1000, int(cpus * period))))

    def tasks_files(self) -> list[str]:
        """The `tasks` files a new single-threaded process writes "0" into to join the group
        (sandbox/helper.c: unlike its pid in `cgroup.procs`, this waits out no RCU grace
        period)."""
        return [str(self.path(c) / "tasks") for c in CONTROLLERS]

    def pids(self) -> list[int]:
        """Every process in the group and its children."""
        out: list[int] = []
        base = self.path("pids")
        if not base.is_dir():
            return out
        for procs in base.rglob("cgroup.procs"):
            try:
                out.extend(int(x) for x in procs.read_text().split())
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
        base = self.path("memory")
        if not base.is_dir():
            return 0
        for f in base.rglob("memory.oom_control"):
            try:
                text = f.read_text()
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
            base = self.path(c)
            if not base.is_dir():
                continue
            # os.walk ignores directories that vanish under it (another reclaimer, the kernel)
            dirs = [Path(d) / n for d, names, _ in os.walk(base) for n in names]
            for p in [*sorted(dirs, key=lambda p: -len(p.parts)), base]:
                _rmdir(p)


def _rmdir(p: Path) -> None:
    for _ in range(100):
        try:
            p.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # still draining exiting tasks
            time.sleep(0.001)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def sandbox_groups() -> list[str]:
    """Names of every sandbox group that exists now (live or left behind by a killed runner)."""
    base = CGROUP_ROOT / "pids" / PARENT
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir())
