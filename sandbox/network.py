"""Network for a sandbox's own network namespace (created by its holder, loopback up).

`none` stays loopback only. The other modes attach a user-mode NAT (slirp4netns) running in
the host's namespace; the sandbox reaches the world through it, never the host itself: the
host's loopback is refused by slirp4netns (`--disable-host-loopback`, which also covers its
10.0.2.2 alias) and every address of the host's own interfaces is a blackhole route inside
the namespace, which the sandbox cannot change (it has no CAP_NET_ADMIN). `allowlist` and
`build` drop the default route and route only the addresses of the allowed hosts. Whatever
the policy, link-local and cloud-metadata addresses (REFUSED_NETWORKS) are `prohibit` routes:
the NAT opens connections from the host's stack, so 169.254.169.254 would be the host's
metadata service, with the machine's credentials, and an allowlist never reopens them.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.base import NetworkMode, NetworkPolicy, SandboxError

# What `build` (Dockerfile RUN steps) may reach: the package registries, nothing else.
REGISTRY_HOSTS: tuple[str, ...] = (
    "deb.debian.org",
    "security.debian.org",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
)
GATEWAY = "10.0.2.2"  # slirp4netns' router inside the namespace
DNS = "10.0.2.3"
# Never reachable from a sandbox, whatever its policy or allowlist: link-local addresses (the
# metadata services of AWS, GCP, Azure, Oracle and Firecracker's MMDS answer at
# 169.254.169.254) and the other clouds' metadata addresses (Azure's wireserver, Alibaba's,
# AWS's IPv6 one). slirp4netns runs without IPv6, so the IPv6 ones are belt and braces.
REFUSED_NETWORKS = (
    "169.254.0.0/16",
    "168.63.129.16/32",
    "100.100.100.200/32",
    "fe80::/10",
    "fd00:ec2::254/128",
)


def refused(net: str) -> bool:
    """Whether the address or network `net` lies inside one of REFUSED_NETWORKS: an
    allowlist entry that does is dropped (its route would be at least as specific as the
    refusal); a wider one (0.0.0.0/0) stays, the refusal being the more specific route."""
    try:
        n = ipaddress.ip_network(net, strict=False)
    except ValueError:
        return False
    return any(
        n.version == r.version and n.subnet_of(r)  # type: ignore[arg-type]
        for r in (ipaddress.ip_network(x) for x in REFUSED_NETWORKS)
    )


def refusal_routes(ipv6: bool) -> list[str]:
    """`ip route` arguments refusing REFUSED_NETWORKS (IPv6 ones only where `ipv6`)."""
    return [
        f"route add prohibit {net}"
        for net in REFUSED_NETWORKS
        if ipv6 or ipaddress.ip_network(net).version == 4
    ]


def ipv6_enabled(pid: int) -> bool:
    """Whether the network namespace of process `pid` has IPv6 (routes can be added)."""
    try:
        with open(f"/proc/{pid}/net/if_inet6") as f:
            return bool(f.read(1))
    except OSError:
        return False


@dataclass
class Attachment:
    """The NAT process serving one sandbox; it exits when its holder does."""

    process: subprocess.Popen[bytes] | None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None


def network_problem() -> str | None:
    if shutil.which("slirp4netns") is None:
        return "'slirp4netns' not found: apt-get install slirp4netns"
    if shutil.which("ip") is None:
        return "'ip' not found: apt-get install iproute2"
    return None


def host_addresses() -> list[str]:
    """Every IPv4 address of the host's own interfaces (loopback excluded)."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            addr = parts[parts.index("inet") + 1].split("/")[0]
            if not ipaddress.ip_address(addr).is_loopback:
                addrs.append(addr)
    return sorted(set(addrs))


def resolve(hosts: Iterable[str]) -> list[str]:
    """IPv4 networks of `hosts` (names or literal addresses/CIDRs), resolved on the host; an
    unknown name is simply not reachable."""
    hosts = list(hosts)
    out: set[str] = set()
    for host in hosts:
        try:
            out.add(str(ipaddress.ip_network(host, strict=False)))
        except ValueError:
            pass
    out.update(f"{addr}/32" for addr, _ in resolved_names(hosts))
    return sorted(out)


def resolved_names(hosts: Iterable[str]) -> list[tuple[str, str]]:
    """(address, name) for each name in `hosts` (literal addresses left out), resolved on
    the host: an allowlisted sandbox's /etc/hosts, since it gets no DNS of its own."""
    out: set[tuple[str, str]] = set()
    for host in hosts:
        try:
            ipaddress.ip_network(host, strict=False)
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, family=socket.AF_INET)
        except OSError:
            continue
        out.update((str(info[4][0]), host) for info in infos)
    return sorted(out)


def route_commands(
    policy: NetworkPolicy, host_addrs: list[str], allowed: list[str], *, ipv6: bool = True
) -> list[str]:
    """`ip -batch` lines applied inside the namespace after the NAT is up (pure). Under an
    allowlist the NAT's DNS forwarder is unreachable too: a resolver that forwards any name
    to the host's would carry data out in the names asked (names are resolved on the host,
    `resolved_names`). REFUSED_NETWORKS are refused in every mode, and dropped from
    `allowed`."""
    lines = [f"route add blackhole {a}/32" for a in host_addrs if a != GATEWAY]
    lines += refusal_routes(ipv6)
    if policy.mode in (NetworkMode.ALLOWLIST, NetworkMode.BUILD):
        lines.append("route del default")
        lines += [f"route add {net} via {GATEWAY} dev tap0" for net in allowed if not refused(net)]
    if policy.mode == NetworkMode.ALLOWLIST:
        lines.append(f"route add blackhole {DNS}/32")
    return lines


def allowed_hosts(policy: NetworkPolicy) -> tuple[str, ...]:
    if policy.mode == NetworkMode.BUILD:
        return (*REGISTRY_HOSTS, *policy.allowed_hosts)
    return policy.allowed_hosts


def attach(holder_pid: int, policy: NetworkPolicy) -> Attachment:
    """Give the holder's namespace the policy's network; `none` needs nothing."""
    if policy.mode == NetworkMode.NONE:
        return Attachment(None)
    problem = network_problem()
    if problem:
        raise SandboxError(problem)
    exit_r, exit_w = os.pipe()
    ready_r, ready_w = os.pipe()
    try:
        proc = subprocess.Popen(
            ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
             f"--exit-fd={exit_r}", f"--ready-fd={ready_w}", str(holder_pid), "tap0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(exit_r, ready_w), start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(exit_r)
        os.close(ready_w)
    # The NAT exits when exit_w closes: we hand it to the attachment's lifetime below.
    att = _Owned(proc, exit_w)
    with os.fdopen(ready_r, "rb") as ready:
        if ready.read(1) != b"1":
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            att.close()
            raise SandboxError(f"slirp4netns failed to start: {err.strip()[-300:]}")
    lines = route_commands(
        policy, host_addresses(), resolve(allowed_hosts(policy)), ipv6=ipv6_enabled(holder_pid)
    )
    r = subprocess.run(
        ["nsenter", f"--net=/proc/{holder_pid}/ns/net", "ip", "-batch", "-"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        att.close()
        raise SandboxError(f"network policy could not be applied: {r.stderr.strip()[-300:]}")
    return att


class _Owned(Attachment):
    def __init__(self, process: subprocess.Popen[bytes], exit_w: int) -> None:
        super().__init__(process)
        self._exit_w: int | None = exit_w

    def close(self) -> None:
        if self._exit_w is not None:
            os.close(self._exit_w)
            self._exit_w = None
        super().close()
