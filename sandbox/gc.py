"""`t1 sandbox gc`: reclaim what sandboxes of dead runners left behind.

A runner that stops normally, or gets SIGTERM/SIGINT, stops its sandboxes itself. One killed
with SIGKILL closes its holders' pipes, so each holder kills its sandbox's processes and
exits, and the kernel drops its namespaces, mounts and loop device; left are the empty
cgroups and the lease file. Processes survive only when holder and runner die together
(`kill -9` of both): their lease names a dead runner, and gc kills them. A group without a
lease is removed only when empty (it may be a sandbox that is still starting).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.cgroups import SandboxCgroup, sandbox_groups
from sandbox.local import RUN_DIR


@dataclass
class GcReport:
    sandboxes: list[str] = field(default_factory=list)  # dead runners' sandboxes reclaimed
    processes_killed: int = 0
    empty_groups_removed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # sandboxes whose runner is alive: untouched


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def collect_garbage(run_dir: Path = RUN_DIR) -> GcReport:
    report = GcReport()
    leased: set[str] = set()
    for lease in sorted(run_dir.glob("t1-*.json")):
        sid = lease.stem
        leased.add(sid)
        try:
            info = json.loads(lease.read_text())
            runner, holder = int(info["runner"]), int(info["holder"])
        except (OSError, ValueError, KeyError, TypeError):
            runner = holder = -1
        if runner > 0 and _alive(runner):
            report.live.append(sid)
            continue
        group = SandboxCgroup(sid)
        report.processes_killed += len(group.pids())
        if holder > 0 and _alive(holder):
            try:
                os.kill(holder, signal.SIGKILL)
            except ProcessLookupError:
                pass
        group.destroy()
        lease.unlink(missing_ok=True)
        (run_dir / f"{sid}.img").unlink(missing_ok=True)
        report.sandboxes.append(sid)
    for sid in sandbox_groups():
        group = SandboxCgroup(sid)
        if sid not in leased and not group.pids():
            group.destroy()
            report.empty_groups_removed.append(sid)
    return report
