"""Egress rules for a sandbox network namespace behind user-mode NAT (slirp4netns).

User-mode NAT opens the sandbox's connections from the host's own network stack, so without
rules a sandbox reaches every address of the host itself (slirp4netns's
`allow_host_loopback=false` only closes its 10.0.2.2 alias of the host loopback). `apply`
installs routes inside the namespace, from the host (`nsenter`), that the sandbox cannot undo
(it has no CAP_NET_ADMIN):

- internet: a `prohibit` route for each of the host's own addresses;
- allowlist: no default route at all (`prohibit default`); a route through the NAT gateway
  for each address the allowed hosts resolve to when the sandbox starts; the host's own
  addresses stay prohibited even when an allowed name resolves to one of them.

DNS works through the NAT's resolver, except under an allowlist: there the forwarder is
prohibited too (it would forward any name, a channel out) and the allowed names are given to
the container's /etc/hosts, resolved on the host. In every mode, link-local and
cloud-metadata addresses (sandbox.network.REFUSED_NETWORKS) are prohibited, and an allowlist
never reopens them. The routes go in with one `ip -batch` per namespace.
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import subprocess

from sandbox.base import NetworkMode, NetworkPolicy, SandboxError
from sandbox.network import ipv6_enabled, refusal_routes, refused

NAT_GATEWAY = "10.0.2.2"  # slirp4netns's default gateway
NAT_DEVICE = "tap0"
DNS_FORWARDER = "10.0.2.3"  # slirp4netns's


def host_addresses() -> list[str]:
    """Every IPv4 address configured on the host's interfaces (loopback aside)."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    addrs = []
    for line in out.split("\n"):
        fields = line.split()
        if "inet" in fields:
            ip = fields[fields.index("inet") + 1].split("/")[0]
            if not ipaddress.ip_address(ip).is_loopback:
                addrs.append(ip)
    return sorted(set(addrs))


def resolve(hosts: tuple[str, ...]) -> list[str]:
    """IPv4 addresses of `hosts` (names or literal addresses), resolved on the host now."""
    addrs: set[str] = set()
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise SandboxError(f"allowed host {host!r} does not resolve: {e}") from e
        addrs.update(str(info[4][0]) for info in infos)
    return sorted(addrs)


def route_commands(
    policy: NetworkPolicy, host: list[str], allowed: list[str], *, ipv6: bool = True
) -> list[list[str]]:
    """The `ip route` commands (run inside the namespace) for `policy`."""
    if policy.mode == NetworkMode.NONE:
        return []
    cmds = [["ip", "route", "add", "prohibit", f"{a}/32"] for a in host]
    cmds += [["ip", *line.split()] for line in refusal_routes(ipv6)]
    if policy.mode == NetworkMode.ALLOWLIST:
        cmds.append(["ip", "route", "del", "default"])
        cmds.append(["ip", "route", "add", "prohibit", "default"])
        # the NAT's DNS forwarder would carry data out in the names asked: names come from
        # /etc/hosts (resolved on the host when the container starts) instead
        cmds.append(["ip", "route", "add", "prohibit", f"{DNS_FORWARDER}/32"])
        cmds += [
            ["ip", "route", "add", f"{a}/32", "via", NAT_GATEWAY, "dev", NAT_DEVICE]
            for a in allowed
            if a not in host and not refused(a)
        ]
    return cmds


def apply(pid: int, policy: NetworkPolicy) -> None:
    """Install `policy`'s routes in the network namespace of process `pid` (a host pid)."""
    allowed = resolve(policy.allowed_hosts) if policy.mode == NetworkMode.ALLOWLIST else []
    cmds = route_commands(policy, host_addresses(), allowed, ipv6=ipv6_enabled(pid))
    if not cmds:
        return
    batch = "".join(" ".join(cmd[1:]) + "\n" for cmd in cmds)  # each without its leading "ip"
    r = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", "ip", "-batch", "-"],
        input=batch, capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    if r.returncode != 0:
        raise SandboxError(f"network policy {policy.mode}: {r.stderr.strip()[-300:]}")


class UserNat:
    """A network namespace behind slirp4netns with `policy`'s routes, held by a sleeping
    process, for an engine that joins a namespace by path (Podman's builds: the compatible
    build endpoint otherwise runs RUN steps in the host's network). Use as a context manager;
    `netns` is the namespace's path and `nameservers()` its resolvers."""

    DNS_FORWARDER = DNS_FORWARDER

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._holder: subprocess.Popen[bytes] | None = None
        self._slirp: subprocess.Popen[bytes] | None = None

    @property
    def netns(self) -> str:
        if self._holder is None:
            raise SandboxError("the user-mode NAT is not running")
        return f"/proc/{self._holder.pid}/ns/net"

    def nameservers(self) -> list[str]:
        """The host's own resolvers (reached through the NAT; loopback ones cannot be), then
        slirp4netns's forwarder: two paths, so one slow answer does not fail a build."""
        servers: list[str] = []
        try:
            with open("/etc/resolv.conf") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 2 and fields[0] == "nameserver":
                        try:
                            ip = ipaddress.ip_address(fields[1])
                        except ValueError:
                            continue
                        if ip.version == 4 and not ip.is_loopback:
                            servers.append(str(ip))
        except OSError:
            pass
        return [*servers[:2], self.DNS_FORWARDER]

    def __enter__(self) -> UserNat:
        try:
            self._holder = subprocess.Popen(
                ["unshare", "--net", "sh", "-c", "echo up; exec sleep infinity"],
                stdout=subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
            # The NAT attaches to whatever namespace the pid has when it starts: before the
            # holder has left ours, that is the host's (its tap device and routes in the
            # host, the build in an empty namespace). Wait for the holder to say it is in.
            assert self._holder.stdout is not None
            up, _, _ = select.select([self._holder.stdout], [], [], 10)
            if not up or self._holder.stdout.readline() != b"up\n" or _same_netns(self._holder.pid):
                raise SandboxError("the build network's namespace did not come up")
            ready_r, ready_w = os.pipe()
            try:
                self._slirp = subprocess.Popen(
                    ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                     f"--ready-fd={ready_w}", str(self._holder.pid), NAT_DEVICE],
                    pass_fds=(ready_w,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    start_new_session=True,
                )  # fmt: skip
                os.close(ready_w)
                ready, _, _ = select.select([ready_r], [], [], 10)
                if not ready or os.read(ready_r, 1) != b"1":
                    raise SandboxError("slirp4netns did not come up for the build network")
            finally:
                os.close(ready_r)
            apply(self._holder.pid, self.policy)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in (self._slirp, self._holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream:
                        stream.close()
        self._slirp = self._holder = None


def _same_netns(pid: int) -> bool:
    """Whether process `pid` is (still) in this process's network namespace."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
