"""What a task's phases may reach over the network (Harbor 1.1 settings to a policy)."""

from __future__ import annotations

from sandbox.base import NetworkMode, NetworkPolicy
from tasks.model import NetworkAccess, PhaseConfig, Task


def network_policy(task: Task, phase: PhaseConfig | None = None) -> NetworkPolicy:
    """A phase's network (Harbor 1.1: the phase's network_mode, else the environment's,
    else `allow_internet`): none, the internet, or an allowlist of hosts."""
    env = task.environment
    mode = (phase.network_mode if phase else None) or env.network_mode
    hosts = tuple((phase.allowed_hosts if phase else None) or env.allowed_hosts)
    if mode == NetworkAccess.ALLOWLIST:
        return NetworkPolicy(NetworkMode.ALLOWLIST, hosts)
    if mode == NetworkAccess.PUBLIC or (mode is None and env.allow_network):
        return NetworkPolicy(NetworkMode.INTERNET)
    return NetworkPolicy(NetworkMode.NONE)


def egress_mode(task: Task) -> NetworkMode | None:
    """The network of the task's agent or verifier phase that needs egress set up (the first
    that is not `none`), or None when neither does."""
    for phase in (task.agent_config, task.verifier_config):
        mode = network_policy(task, phase).mode
        if mode != NetworkMode.NONE:
            return mode
    return None
