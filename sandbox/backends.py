"""Backend registry: a backend turns a task into a started sandbox. Heavy backends import
lazily, so the local default never needs the docker package or a daemon."""

from __future__ import annotations

from typing import Protocol

from sandbox.base import Sandbox
from tasks.model import Task


class Backend(Protocol):
    name: str

    def open(self, task: Task, *, hide: list[str] | None = None) -> Sandbox:
        """Build (or reuse) the task's environment and return a started sandbox."""
        ...


class LocalBackend:
    name = "local"

    def open(self, task: Task, *, hide: list[str] | None = None) -> Sandbox:
        from sandbox.layers import ensure_env_layer
        from sandbox.local import LocalSandbox

        layer = ensure_env_layer(task, hide)
        sb = LocalSandbox(
            task.limits,
            env_layer=layer,
            allow_network=task.environment.allow_network,
            workdir=task.environment.workdir,
            hide=hide,
        )
        sb.start()
        return sb


def get_backend(name: str) -> Backend:
    if name == "local":
        return LocalBackend()
    if name == "docker":
        from sandbox.docker import DockerBackend

        return DockerBackend()
    raise ValueError(f"unknown sandbox backend {name!r} (local, docker)")
