"""Shared test setup: skip hardware/service-bound tests with a stated reason; the one private
Podman engine of a test session (`docker_engine`; one per worker under `make test`'s two
pytest-xdist workers), for every folder that runs the docker backend; the warm-started policy
(`warm_policy`), built before a test that needs it starts its own clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from sandbox.local import local_backend_problem

    problem = local_backend_problem()
    if problem is None:
        return
    skip = pytest.mark.skip(reason=f"local sandbox unavailable: {problem}")
    for item in items:
        if "sandbox" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(scope="session")
def warm_policy() -> Path:
    """The default warm-started checkpoint: read from the cache, or built once (about two
    minutes on a clean clone; a second worker asking meanwhile waits for the first one's build)
    here, in a fixture, rather than inside a run some test times."""
    from training.warm_start import warm_started_policy

    return warm_started_policy(reuse_stale=True)
