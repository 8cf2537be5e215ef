"""Docker backend: the same trial contract as the local backend, where a daemon answers."""

from __future__ import annotations

import pytest

from sandbox.docker import _tar, docker_problem
from tests.factories import make_task

pytestmark = pytest.mark.docker
PROBLEM = docker_problem()
needs_daemon = pytest.mark.skipif(PROBLEM is not None, reason=f"no Docker daemon: {PROBLEM}")


def test_build_context_tar_keeps_script_modes():
    import io
    import tarfile

    data = _tar({"a.sh": b"#!/bin/sh\n", "d/b.txt": b"x"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
    assert modes == {"a.sh": 0o755, "d/b.txt": 0o644}


def test_unavailable_daemon_is_reported_not_crashing():
    from sandbox import run_trial
    from tasks.results import FailureMode

    if PROBLEM is None:
        pytest.skip("a daemon answers here; the unavailable path is not reachable")
    r = run_trial(make_task(), "oracle", backend="docker")
    assert r.failure_mode == FailureMode.SANDBOX_ERROR
    assert "Docker" in r.failure_detail or "docker" in r.failure_detail


@needs_daemon
def test_oracle_and_nop_in_docker():
    from sandbox import run_trial

    task = make_task()
    assert run_trial(task, "oracle", backend="docker").resolved
    assert not run_trial(task, "nop", backend="docker").resolved
