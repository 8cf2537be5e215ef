"""What this host can run: which sandbox backend, and why not, in one line.

The local backend needs root, bubblewrap, loop devices and cgroups (v1 or v2); the docker
backend needs a Docker-API engine, or Podman to start a private one (`sandbox.podman`). A
command checks the backend it will use before any work, so a host that cannot run it is an
environment problem said once (exit 2), never a task reported invalid or a trial row per task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

BACKEND_ENV = "T1_SANDBOX_BACKEND"
RUNS_DIR_ENV = "T1_RUNS_DIR"  # where campaign runs go when no launch says (`t1 ui --store`)


def local_problem() -> str | None:
    from sandbox.local import local_backend_problem

    return local_backend_problem()


def engine_problem() -> str | None:
    """Why the docker backend has no engine here: none answers DOCKER_HOST and no private
    Podman can start; None when one can be used."""
    from sandbox.docker_api import docker_problem
    from sandbox.podman import podman_problem

    engine = docker_problem()
    if engine is None:
        return None
    podman = podman_problem()
    return None if podman is None else f"{engine}; and {podman}"


def backend_problem(backend: str) -> str | None:
    """Why `backend` cannot run here (one line), or None."""
    if backend == "local":
        return local_problem()
    if backend == "docker":
        return engine_problem()
    return f"unknown sandbox backend {backend!r} (local, docker)"


@dataclass(frozen=True)
class BackendChoice:
    """The backend a run uses (None: none can run here) and the one line that says why."""

    backend: str | None
    note: str = ""


def choose_backend(requested: str | None, local: str | None, docker: str | None) -> BackendChoice:
    """The backend for a run that may pick one (`t1 demo`): the requested one when set, else
    local, else docker; `local` and `docker` are their problems (None: it runs). Pure."""
    if requested:
        problem = local if requested == "local" else docker if requested == "docker" else None
        if requested not in ("local", "docker"):
            problem = f"unknown sandbox backend {requested!r} (local, docker)"
        if problem:
            return BackendChoice(None, f"{BACKEND_ENV}={requested}, but it cannot run: {problem}")
        return BackendChoice(requested, f"sandbox backend: {requested} ({BACKEND_ENV})")
    if local is None:
        return BackendChoice("local", "sandbox backend: local")
    if docker is None:
        return BackendChoice(
            "docker",
            f"the local sandbox cannot run here ({local}); using the docker backend (Podman)",
        )
    return BackendChoice(None, f"no sandbox backend can run here: local: {local}; docker: {docker}")


@contextmanager
def engine_for(backend: str) -> Iterator[None]:
    """For the docker backend: the engine DOCKER_HOST names, or a private Podman service
    exported as DOCKER_HOST (children inherit it) for the block; nothing for local."""
    if backend != "docker":
        yield
        return
    from sandbox.podman import docker_engine

    with docker_engine():
        yield


@contextmanager
def backend_env(backend: str) -> Iterator[None]:
    """T1_SANDBOX_BACKEND names `backend` inside the block (the Dagster resource, the campaign
    and every server started from here read it), and what it named before after it."""
    previous = os.environ.get(BACKEND_ENV)
    os.environ[BACKEND_ENV] = backend
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(BACKEND_ENV, None)
        else:
            os.environ[BACKEND_ENV] = previous
