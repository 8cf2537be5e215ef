"""A runner stopped mid-trial leaves nothing running: SIGTERM/SIGINT clean up at once;
after SIGKILL the holder kills the sandbox's processes and `t1 sandbox gc` removes the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox.cgroups import SandboxCgroup, sandbox_groups
from sandbox.local import RUN_DIR

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]

RUNNER = """
import sys, time
from sandbox import CommandAgent, run_trial
from tests.factories import make_task
from tasks.model import Limits

class Announce(CommandAgent):
    def run(self, sandbox, task, deadline):
        print(sandbox.id, flush=True)
        return super().run(sandbox, task, deadline)

agent = Announce("sleep 5171 & (setsid sleep 5172 &); sleep 5173")
run_trial(make_task(limits=Limits(agent_timeout_s=120)), agent)
"""


def _sleepers() -> list[str]:
    out = subprocess.run(["pgrep", "-a", "-x", "sleep"], capture_output=True, text=True)
    return [
        line for line in out.stdout.splitlines() if line.split()[-1] in ("5171", "5172", "5173")
    ]


def _start_runner() -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    try:
        sid = proc.stdout.readline().strip()
        assert sid.startswith("t1-"), sid
        deadline = time.monotonic() + 10
        while len(_sleepers()) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_sleepers()) == 3, _sleepers()
    except BaseException:
        proc.terminate()
        raise
    return proc, sid


def _wait_gone(deadline_s: float = 10) -> None:
    deadline = time.monotonic() + deadline_s
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead holder may wait for its new parent to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def _loop_devices_of(sid: str) -> list[str]:
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if sid in line]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_runner_stopped_by_signal_cleans_up_itself(sig):
    proc, sid = _start_runner()
    proc.send_signal(sig)
    proc.wait(timeout=20)
    _wait_gone()
    assert _sleepers() == []
    assert sid not in sandbox_groups()
    assert not (RUN_DIR / f"{sid}.json").exists()
    assert _loop_devices_of(sid) == []


def test_runner_killed_mid_trial_then_gc():
    proc, sid = _start_runner()
    holder = json.loads((RUN_DIR / f"{sid}.json").read_text())["holder"]
    proc.kill()
    proc.wait(timeout=10)
    _wait_gone()
    assert _sleepers() == []  # the holder saw its runner go and killed the sandbox
    deadline = time.monotonic() + 10
    while _running(holder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(holder)
    while _loop_devices_of(sid) and time.monotonic() < deadline:  # the kernel detaches it
        time.sleep(0.05)  # once the last mount namespace holding the disk is gone
    assert _loop_devices_of(sid) == []  # namespaces, mounts and the loop disk went with it
    assert sid in sandbox_groups()  # left: empty cgroups and the lease
    r = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sandbox", "gc"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "reclaimed" in r.stdout
    assert sid not in sandbox_groups()
    assert not (RUN_DIR / f"{sid}.json").exists()


def test_runner_and_holder_killed_together_then_gc():
    """Even with nobody left to clean up, the sandbox's process trees die with the runner
    (each started with --die-with-parent); gc removes the groups and the lease."""
    proc, sid = _start_runner()
    holder = json.loads((RUN_DIR / f"{sid}.json").read_text())["holder"]
    os.kill(holder, signal.SIGKILL)
    proc.kill()
    proc.wait(timeout=10)
    _wait_gone()
    assert _sleepers() == []
    from sandbox.gc import collect_garbage

    report = collect_garbage()
    assert sid in report.sandboxes
    assert SandboxCgroup(sid).pids() == [] and sid not in sandbox_groups()
    assert not (RUN_DIR / f"{sid}.json").exists()
