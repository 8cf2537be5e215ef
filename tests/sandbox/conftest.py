"""Sandbox fixtures: `backend`, which runs a test once per backend ("local", "docker"; the
docker one on the session's private Podman engine, `docker_engine` in tests/conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def unmount_under(root: Path) -> None:
    """Lazily unmount what a private engine left mounted under `root` (containers/storage
    keeps its `overlay` directory mounted after the service stops; pytest could not remove
    the test's directory, 'Device or resource busy')."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend name to run the test on; the docker one gets the session's engine."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        from sandbox.local import local_backend_problem

        problem = local_backend_problem()
        if problem is not None:
            pytest.skip(f"local sandbox unavailable: {problem}")
    return str(request.param)
