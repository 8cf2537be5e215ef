"""Link-local and cloud-metadata addresses in the local backend's routes (pure; tried from
inside sandboxes of both backends by tests/sandbox/test_host_bounds.py)."""

from __future__ import annotations

import pytest

from sandbox.base import NetworkMode, NetworkPolicy
from sandbox.network import REFUSED_NETWORKS, refused, route_commands


@pytest.mark.parametrize("mode", [NetworkMode.INTERNET, NetworkMode.ALLOWLIST, NetworkMode.BUILD])
def test_refused_networks_are_prohibited_in_every_mode(mode):
    lines = route_commands(NetworkPolicy(mode), ["192.0.2.2"], [])
    for net in REFUSED_NETWORKS:
        assert f"route add prohibit {net}" in lines, (mode, lines)
    v4 = route_commands(NetworkPolicy(mode), [], [], ipv6=False)
    assert "route add prohibit 169.254.0.0/16" in v4 and not any(":" in ln for ln in v4)


def test_an_allowlist_never_reopens_a_refused_network():
    """An allowed name that resolves to the metadata address (metadata.google.internal does),
    a link-local literal or a network inside a refused one would be routed at least as
    specifically as the refusal: dropped; a wider network (the refusal is then the more
    specific route) and ordinary allowed hosts stay."""
    allowed = ["169.254.169.254/32", "169.254.0.0/24", "168.63.129.16/32", "0.0.0.0/0",
               "203.0.113.5/32"]  # fmt: skip
    lines = route_commands(NetworkPolicy(NetworkMode.ALLOWLIST), [], allowed)
    routed = [ln.split()[2] for ln in lines if " via " in ln]
    assert routed == ["0.0.0.0/0", "203.0.113.5/32"], lines
    assert refused("fe80::1") and refused("169.254.1.1") and not refused("10.0.2.3")
