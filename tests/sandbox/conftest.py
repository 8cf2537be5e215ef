"""Sandbox fixtures: `backend`, which runs a test once per backend ("local", "docker"; the
docker one on the session's private Podman engine, `docker_engine` in tests/conftest.py)."""

from __future__ import annotations

import pytest


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
