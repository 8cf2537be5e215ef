"""Sandbox fixtures: a private Podman engine for the docker backend, and `backend`, which runs
a test once per backend ("local", "docker")."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    """DOCKER_HOST of a Podman service started for this test session, on its own socket,
    with this project's private configuration; stopped (and its containers removed) at the
    end. Skips, saying why, where Podman cannot run."""
    from sandbox.base import SandboxUnavailable
    from sandbox.podman import PodmanService, docker_host_env, podman_problem

    problem = podman_problem()
    if problem is not None:
        pytest.skip(f"no container engine: {problem}")
    service = PodmanService(name=f"pytest-{os.getpid()}")
    try:
        service.start()
    except SandboxUnavailable as e:
        pytest.skip(f"no container engine: {e}")
    try:
        with docker_host_env(service.docker_host):
            yield service.docker_host
    finally:
        service.stop()


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
