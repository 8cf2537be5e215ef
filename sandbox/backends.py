"""Backend registry: a backend turns a task into a started sandbox. Heavy backends import
lazily, so the local default never needs the docker package or a daemon."""

from __future__ import annotations

from typing import Protocol

from sandbox.base import NetworkMode, NetworkPolicy, Sandbox
from tasks.model import Task


class Backend(Protocol):
    name: str

    def open(self, task: Task) -> Sandbox:
        """Build (or reuse) the task's environment and return a started sandbox."""
        ...


def network_policy(task: Task) -> NetworkPolicy:
    """The agent phase's network: none, the internet, or the task's allowlist."""
    env = task.environment
    hosts = tuple(getattr(env, "allowed_hosts", ()) or ())
    mode = getattr(env, "network_mode", None)
    if mode == "allowlist" or (hosts and env.allow_network):
        return NetworkPolicy(NetworkMode.ALLOWLIST, hosts)
    if env.allow_network or mode in ("internet", "bridge", "host"):
        return NetworkPolicy(NetworkMode.INTERNET)
    return NetworkPolicy(NetworkMode.NONE)


class LocalBackend:
    name = "local"

    def open(self, task: Task) -> Sandbox:
        from sandbox.build import build_image
        from sandbox.local import LocalSandbox, LocalStepRunner

        image = build_image(task, LocalStepRunner())
        sb = LocalSandbox(
            image,
            task.limits,
            network_policy=network_policy(task),
            env=getattr(task.environment, "env", None) or None,
            user=getattr(task, "agent_user", None) or None,
            trusted_paths=getattr(task, "trusted_paths", ()) or (),
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
