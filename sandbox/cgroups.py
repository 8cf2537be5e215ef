"""Resource limits through cgroup v1 controllers (memory, pids, cpu) mounted under
/sys/fs/cgroup/<controller>. One group per sandbox; every process of the sandbox joins it by
writing its own pid before it execs, so nothing forks before the limits apply."""

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


@dataclass
class SandboxCgroup:
    """The memory/pids/cpu groups of one sandbox."""

    name: str

    def path(self, controller: str) -> Path:
        return CGROUP_ROOT / controller / PARENT / self.name

    def create(self, *, memory_mb: int, pids: int, cpus: float) -> None:
        for c in CONTROLLERS:
            self.path(c).mkdir(parents=True, exist_ok=True)
        limit = str(memory_mb * 1024 * 1024)
        _write(self.path("memory") / "memory.limit_in_bytes", limit)
        memsw = self.path("memory") / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            _write(memsw, limit)
        _write(self.path("pids") / "pids.max", str(pids))
        period = 100_000
        _write(self.path("cpu") / "cpu.cfs_period_us", str(period))
        _write(self.path("cpu") / "cpu.cfs_quota_us", str(max(1000, int(cpus * period))))

    def procs_files(self) -> list[str]:
        """cgroup.procs files a new process writes its pid into to join the sandbox."""
        return [str(self.path(c) / "cgroup.procs") for c in CONTROLLERS]

    def pids(self) -> list[int]:
        try:
            text = (self.path("pids") / "cgroup.procs").read_text()
        except FileNotFoundError:
            return []
        return [int(x) for x in text.split()]

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the group until it is empty (fork races converge because
        pids.max bounds the group)."""
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer took in this group."""
        try:
            text = (self.path("memory") / "memory.oom_control").read_text()
        except FileNotFoundError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def memory_failcnt(self) -> int:
        try:
            return int((self.path("memory") / "memory.failcnt").read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def destroy(self) -> None:
        self.kill_all()
        for c in CONTROLLERS:
            p = self.path(c)
            for _ in range(50):
                try:
                    p.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still draining exiting tasks
                    time.sleep(0.01)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def stale_groups() -> list[str]:
    """Names of sandbox groups left behind (e.g. by a killed process), for `t1 sandbox gc`."""
    base = CGROUP_ROOT / "pids" / PARENT
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir())
