"""Network policies, tried from inside a sandbox against real servers: the host's loopback
and the host's own addresses stay unreachable whatever the policy, the host cannot reach in,
and the internet (a fake one: hosts in a network namespace of this test) is reachable only
as the policy allows."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time

import pytest

from sandbox.base import NetworkMode, NetworkPolicy
from sandbox.build import build_image
from sandbox.local import LocalSandbox, LocalStepRunner
from sandbox.network import host_addresses
from tests.sandbox.images import LIMITS, dns_probe, tools_task

pytestmark = pytest.mark.sandbox
NS = f"t1net{os.getpid() % 100000}"
HOST_SIDE, NET_A, NET_B = "198.51.100.1", "198.51.100.2", "198.51.100.3"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def internet():
    """Two web servers on 'internet' hosts NET_A and NET_B, in their own network namespace
    behind a veth pair (the host side holds HOST_SIDE, a host address)."""
    veth_h, veth_n = f"{NS}h", f"{NS}n"
    _ip("netns", "add", NS)
    servers = []
    try:
        _ip("link", "add", veth_h, "type", "veth", "peer", "name", veth_n)
        _ip("link", "set", veth_n, "netns", NS)
        _ip("addr", "add", f"{HOST_SIDE}/24", "dev", veth_h)
        _ip("link", "set", veth_h, "up")
        for args in (("addr", "add", f"{NET_A}/24", "dev", veth_n),
                     ("addr", "add", f"{NET_B}/24", "dev", veth_n),
                     ("link", "set", veth_n, "up"), ("link", "set", "lo", "up")):  # fmt: skip
            _ip("netns", "exec", NS, "ip", *args)
        for addr in (NET_A, NET_B):
            servers.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        NS,
                        sys.executable,
                        "-m",
                        "http.server",
                        "8000",
                        "--bind",
                        addr,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd="/",
                )  # fmt: skip
            )
        time.sleep(1.0)
        yield
    finally:
        for s in servers:
            s.kill()
            s.wait()
        subprocess.run(["ip", "link", "del", veth_h], capture_output=True)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


@pytest.fixture(scope="module")
def image():
    return build_image(tools_task(), LocalStepRunner())


@pytest.fixture(scope="module")
def host_server():
    """A web server of the host's, on every host address (0.0.0.0) and so on its loopback."""
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def _codes(image, policy: NetworkPolicy, urls: list[str]) -> dict[str, str]:
    with LocalSandbox(image, LIMITS, network_policy=policy) as sb:
        script = "; ".join(
            f"echo \"$(curl -s -m 3 -o /dev/null -w '%{{http_code}}' {u})\"" for u in urls
        )
        out = sb.exec(script, timeout_s=60).stdout.split()
    return dict(zip(urls, out, strict=True))


POLICIES = {
    "none": NetworkPolicy(NetworkMode.NONE),
    "internet": NetworkPolicy(NetworkMode.INTERNET),
    "allowlist": NetworkPolicy(NetworkMode.ALLOWLIST, (NET_A,)),
}


@pytest.mark.parametrize("mode", sorted(POLICIES))
def test_host_loopback_and_addresses_are_unreachable(mode, image, host_server, internet):
    addrs = ["127.0.0.1", "10.0.2.2", *host_addresses()]
    assert HOST_SIDE in addrs
    urls = [f"http://{a}:{host_server}/" for a in addrs]
    codes = _codes(image, POLICIES[mode], urls)
    assert set(codes.values()) == {"000"}, codes


@pytest.mark.parametrize("mode", sorted(POLICIES))
def test_internet_is_reachable_as_the_policy_says(mode, image, internet):
    urls = [f"http://{NET_A}:8000/", f"http://{NET_B}:8000/"]
    codes = _codes(image, POLICIES[mode], urls)
    expected = {
        "none": ["000", "000"],
        "internet": ["200", "200"],
        "allowlist": ["200", "000"],
    }[mode]
    assert [codes[u] for u in urls] == expected, codes


def test_the_host_cannot_reach_into_a_sandbox(image):
    with LocalSandbox(image, LIMITS, network_policy=POLICIES["internet"]) as sb:
        s = sb.session()
        # wait for the server to answer (a fixed sleep flaked under load)
        s.run(
            "python3 -m http.server 18009 >/dev/null 2>&1 & for i in $(seq 100); do"
            " curl -s -o /dev/null http://127.0.0.1:18009/ && break; sleep 0.1; done",
            timeout_s=30,
        )
        inside = s.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18009/")
        assert inside.stdout.strip() == "200"
        r = subprocess.run(
            ["curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}",
             "http://127.0.0.1:18009/"],
            capture_output=True, text=True,
        )  # fmt: skip
        assert r.stdout.strip() == "000"


def test_build_network_reaches_the_package_registry_only(image, internet):
    with LocalSandbox(image, LIMITS, network_policy=NetworkPolicy(NetworkMode.BUILD)) as sb:
        r = sb.exec(
            "curl -s -m 10 -o /dev/null -w '%{http_code}\\n' http://deb.debian.org/debian/;"
            f"curl -s -m 3 -o /dev/null -w '%{{http_code}}\\n' http://{NET_A}:8000/",
            timeout_s=60,
        )
    assert r.stdout.split() == ["200", "000"], r


@pytest.mark.parametrize("mode", ["internet", "allowlist"])
def test_allowlist_closes_the_dns_forwarder(mode, image, internet):
    """Under an allowlist the NAT's DNS forwarder is unreachable: it would forward any name to
    the host's resolver, a channel out in the names asked. `internet` keeps it."""
    with LocalSandbox(image, LIMITS, network_policy=POLICIES[mode]) as sb:
        r = sb.exec(dns_probe(), timeout_s=30)
        resolv = sb.exec("cat /etc/resolv.conf", timeout_s=10).stdout
    if mode == "allowlist":
        assert "dns=refused" in r.stdout and "nameserver" not in resolv, (r.stdout, resolv)
    else:
        assert "dns=answered" in r.stdout and "10.0.2.3" in resolv, (r.stdout, r.stderr)
