"""Backend registry: a backend turns a task into a started sandbox. Heavy backends import
lazily, so the local default never needs the docker package or a daemon."""

from __future__ import annotations

from typing import Protocol

from sandbox.base import Sandbox
from sandbox.policy import network_policy
from tasks.model import Task


class Backend(Protocol):
    name: str

    def open(self, task: Task) -> Sandbox:
        """Build (or reuse) the task's environment and return a started sandbox."""
        ...


class LocalBackend:
    name = "local"

    def open(self, task: Task) -> Sandbox:
        from sandbox.build import build_image
        from sandbox.local import LocalSandbox, LocalStepRunner

        image = build_image(task, LocalStepRunner())
        sb = LocalSandbox(
            image,
            task.limits,
            network_policy=network_policy(task, task.agent_config),
            env={**task.environment.env, **task.agent_config.env},
            user=task.agent_config.user,
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
