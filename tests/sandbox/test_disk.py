"""The writable layer is a disk of `disk_mb`, not RAM: filling it is ENOSPC for the command
and the DISK_LIMIT failure mode for the trial, and no write of the harness escapes as an
exception."""

from __future__ import annotations

import pytest

from sandbox import CommandAgent, get_backend, run_trial
from tasks.model import Limits
from tasks.results import FailureMode
from tests.factories import make_task
from tests.sandbox.images import tools_task

pytestmark = pytest.mark.sandbox
FILL = "dd if=/dev/zero of=/app/big bs=1M count=400 2>&1; sync; touch /app/done 2>&1; true"


def test_disk_writes_do_not_count_against_memory():
    # 600 MB written under a 256 MB memory limit: a tmpfs layer would be OOM-killed
    limits = Limits(agent_timeout_s=60, memory_mb=256, disk_mb=1024, pids=64)
    sb = get_backend("local").open(tools_task(limits=limits))
    try:
        r = sb.session().run("dd if=/dev/zero of=/app/big bs=1M count=600 2>&1; sync; du -sm /app")
        assert r.exit_code == 0 and not r.oom_killed, r
        assert int(r.stdout.split()[-2]) >= 600
    finally:
        sb.stop()


def test_filling_the_disk_is_enospc_and_disk_limit():
    limits = Limits(agent_timeout_s=60, verifier_timeout_s=20, memory_mb=256, disk_mb=64)
    sb = get_backend("local").open(make_task(limits=limits))
    try:
        r = sb.session().run(FILL, timeout_s=60)
        assert "No space left on device" in r.stdout
        assert sb.disk_free_bytes() < 1024 * 1024
    finally:
        sb.stop()
    r = run_trial(make_task(limits=limits), CommandAgent(FILL))
    assert r.failure_mode == FailureMode.DISK_LIMIT, (r.failure_mode, r.failure_detail)
    # the agent's doing: counted against it, no assertion earned (the judge's layer is on the
    # sandbox's disk, where the agent's outputs are linked from, so a full disk is judged so)
    assert r.rewardable and r.passed == 0


def test_each_sandbox_writes_its_own_copy_of_the_formatted_disk():
    """Disks are copies of one formatted image per size (sandbox.disk): what a sandbox writes
    is neither in the image nor in another sandbox's disk."""
    import hashlib

    from sandbox.disk import template
    from sandbox.local import DISKS_DIR

    limits = Limits(agent_timeout_s=30, memory_mb=256, disk_mb=96)
    a = get_backend("local").open(make_task(limits=limits))
    b = get_backend("local").open(make_task(limits=limits))
    image = template(DISKS_DIR, 96)
    before = hashlib.sha256(image.read_bytes()).hexdigest()
    try:
        r = a.session().run("head -c 8M /dev/urandom > /app/mine && sync && echo ok")
        assert r.stdout == "ok\n", r
        assert b.session().run("ls /app/mine 2>&1 || echo absent").stdout.endswith("absent\n")
        assert a.disk_free_bytes() < b.disk_free_bytes() - 7 * 1024 * 1024
    finally:
        a.stop()
        b.stop()
    assert hashlib.sha256(image.read_bytes()).hexdigest() == before
    assert image.stat().st_mode & 0o077 == 0 and DISKS_DIR.stat().st_mode & 0o077 == 0


def test_disk_full_during_the_upload_of_the_solution_and_the_verifier():
    limits = Limits(agent_timeout_s=60, verifier_timeout_s=20, memory_mb=256, disk_mb=64)
    big = {"fixture.bin": b"\0" * (8 * 1024 * 1024)}
    task = make_task(limits=limits, extra_tests=big)
    task = task.model_copy(update={"solution": {"solve.sh": b"#!/bin/bash\ntrue\n", **big}})

    class FillThenOracle(CommandAgent):
        def run(self, sandbox, task, deadline):
            super().run(sandbox, task, deadline)
            from sandbox.trial import run_solution

            return run_solution(sandbox, task, task.solution, deadline)  # upload hits ENOSPC

    r = run_trial(task, FillThenOracle(FILL))
    assert r.failure_mode == FailureMode.DISK_LIMIT, (r.failure_mode, r.failure_detail)
    r = run_trial(task, CommandAgent(FILL))  # full before the verifier: the same verdict
    assert r.failure_mode == FailureMode.DISK_LIMIT and r.rewardable and r.passed == 0


def test_a_batch_goes_on_after_a_full_disk():
    from sandbox.check import check_tasks

    limits = Limits(agent_timeout_s=60, verifier_timeout_s=20, memory_mb=256, disk_mb=64)
    full = make_task("fills-disk", limits=limits, solve=FILL)
    checks = check_tasks([full, make_task("fine")])
    assert [c.task.id for c in checks] == ["fills-disk", "fine"]
    assert checks[1].ok
