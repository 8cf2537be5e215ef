"""The host's shared kernel objects, bounded for every sandbox on both backends (issue 32,
item 3): the system calls Docker's default refuses, vsock, link-local and cloud-metadata
addresses, and the user-namespace counts the kernel charges to the namespace's owner.
Each property is probed in one sandbox per backend."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import get_backend
from tasks.model import EnvironmentSpec, NetworkAccess
from tests.factories import make_task
from tests.sandbox.images import LIMITS, TOOLS_DOCKERFILE

pytestmark = pytest.mark.sandbox
LIBC = ctypes.CDLL(None, use_errno=True)

NOTIFIED = 131  # ENOTRECOVERABLE: the probe's own listener answers a call the sandbox let by

# Runs each call under a second seccomp filter the probe installs itself, which hands every
# probed call to a listener thread (SECCOMP_RET_USER_NOTIF) that answers NOTIFIED without
# running it. The kernel takes the strictest action of all filters: a call the sandbox's
# filter refuses returns the sandbox's errno, one it lets by reaches the listener. So the
# result says what the sandbox's filter decided, never what the kernel's own capability
# checks would, and no probed call ever runs (reboot, kexec, ... with any arguments).
PROBE = r"""
import ctypes, json, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
calls = json.loads(sys.argv[1])  # name -> [nr, arg0]
nrs = sorted({nr for nr, _ in calls.values()})
ins = [(0x20, 0, 0, 4), (0x15, 1, 0, 0xC000003E), (0x06, 0, 0, 0x7FFF0000), (0x20, 0, 0, 0)]
for nr in nrs:
    ins += [(0x15, 0, 1, nr), (0x06, 0, 0, 0x7FC00000)]
ins.append((0x06, 0, 0, 0x7FFF0000))
code = b"".join(struct.pack("<HBBI", *i) for i in ins)
buf = ctypes.create_string_buffer(code, len(code))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(ins), ctypes.addressof(buf))
def listen(fd):
    notif = ctypes.create_string_buffer(80)
    while True:
        ctypes.memset(notif, 0, 80)
        if libc.ioctl(fd, 0xC0502100, notif) < 0:
            continue
        nid = struct.unpack_from("<Q", notif.raw, 0)[0]
        resp = ctypes.create_string_buffer(struct.pack("<QqiI", nid, 0, -131, 0), 24)
        libc.ioctl(fd, 0xC0182101, resp)
assert libc.prctl(38, 1, 0, 0, 0) == 0, ctypes.get_errno()  # PR_SET_NO_NEW_PRIVS
fd = libc.syscall(317, 1, 8, ctypes.byref(prog))  # seccomp(SET_MODE_FILTER, NEW_LISTENER)
if fd < 0:
    print("probe-setup-failed", ctypes.get_errno()); sys.exit(1)
threading.Thread(target=listen, args=(fd,), daemon=True).start()
out = {}
for name, (nr, arg0) in calls.items():
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(arg0), 0, 0, 0, 0, 0)
    out[name] = 0 if r >= 0 else ctypes.get_errno()
print("probe=" + json.dumps(out))
"""

# Docker's default profile refuses these to a container with this project's capabilities
# (moby's profiles/seccomp/default.json; x86_64 numbers from the kernel's syscall_64.tbl).
# Written out here, not taken from the module under test.
DOCKER_REFUSED = {
    "syslog": 103, "uselib": 134, "ustat": 136, "sysfs": 139, "vhangup": 153, "pivot_root": 155,
    "_sysctl": 156, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172,
    "ioperm": 173, "create_module": 174, "init_module": 175, "delete_module": 176,
    "get_kernel_syms": 177, "query_module": 178, "quotactl": 179, "nfsservctl": 180,
    "getpmsg": 181, "putpmsg": 182, "afs_syscall": 183, "tuxcall": 184, "security": 185,
    "lookup_dcookie": 212, "clock_settime": 227, "vserver": 236, "mbind": 237,
    "set_mempolicy": 238, "get_mempolicy": 239, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "migrate_pages": 256, "unshare": 272, "move_pages": 279,
    "perf_event_open": 298, "fanotify_init": 300, "open_by_handle_at": 304, "setns": 308,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
    "quotactl_fd": 443, "set_mempolicy_home_node": 450,
}  # fmt: skip
# What the sandbox lets by (the listener answers): proves the probe sees the sandbox's
# decision at all.
CONTROLS = {"getppid": (110, 0), "socket_unix": (41, 1), "personality_query": (135, 0xFFFFFFFF)}


def probe_calls() -> dict[str, tuple[int, int]]:
    calls = {name: (nr, 0) for name, nr in DOCKER_REFUSED.items()}
    calls |= {
        "socket_vsock": (41, 40),  # AF_VSOCK
        "socket_vsock_high_bits": (41, (1 << 32) | 40),  # the kernel reads an int: AF_VSOCK
        "personality_read_implies_exec": (135, 0x0400000),
        "cachestat": (451, 0),  # newer than Docker's table
        "open_tree_attr": (467, 0),
    }
    return calls | CONTROLS


def test_every_call_dockers_default_refuses_is_refused_in_the_sandbox(backend):
    """Docker's whole deny list (63 calls), vsock sockets, a persona Docker refuses and two
    calls newer than its table, decided by the sandbox's own filter (the probe above).
    Before: kcmp, move_pages, the NUMA calls, pidfd_getfd, process_madvise, ustat, sysfs,
    vsock sockets and READ_IMPLIES_EXEC were let by on the local backend; on the docker
    backend (Podman's default profile) kcmp, process_madvise, vsock sockets."""
    calls = probe_calls()
    sb = get_backend(backend).open(make_task("seccomp-probe"))
    try:
        sb.upload({"probe.py": PROBE.encode()}, "/tmp")
        r = sb.exec(f"python3 /tmp/probe.py '{json.dumps(calls)}'", timeout_s=60)
    finally:
        sb.stop()
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("probe=")]
    assert lines, (r.stdout, r.stderr)
    got = json.loads(lines[0][len("probe=") :])
    assert {n: got[n] for n in CONTROLS} == dict.fromkeys(CONTROLS, NOTIFIED), got
    let_by = sorted(n for n in calls if n not in CONTROLS and got[n] == NOTIFIED)
    assert let_by == [], let_by
    assert all(got[n] in (1, 38) for n in calls if n not in CONTROLS), got  # EPERM, ENOSYS


# -- link-local and metadata addresses ---------------------------------------------------------
FAKE_METADATA = "169.254.77.77"  # a link-local address no real service uses


# The fake service: a bare HTTP server with no name lookup. `python -m http.server` resolves
# its own address's name (`HTTPServer.server_bind`: socket.getfqdn) before it listens, and in
# the test's namespace the host's nameserver is unreachable: it listened only after the
# resolver's timeouts, past the wait below ("does not answer this host", '000').
SERVE = """
import http.server, socketserver, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"metadata")
    def log_message(self, *args):
        pass
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer((sys.argv[1], 8000), Handler).serve_forever()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def metadata_service() -> Iterator[str]:
    """A web server at a link-local address, as a cloud's metadata service is (reached from
    this host through a veth pair and a host route to that one address), in a network
    namespace of this test: what a sandbox would reach through its user-mode NAT."""
    ns = f"t1md{os.getpid() % 100000}"
    veth_h, veth_n = f"{ns}h", f"{ns}n"
    _ip("netns", "add", ns)
    server = None
    try:
        _ip("link", "add", veth_h, "type", "veth", "peer", "name", veth_n)
        _ip("link", "set", veth_n, "netns", ns)
        _ip("link", "set", veth_h, "up")
        _ip("route", "add", f"{FAKE_METADATA}/32", "dev", veth_h)
        for args in (("addr", "add", f"{FAKE_METADATA}/16", "dev", veth_n),
                     ("link", "set", veth_n, "up"), ("link", "set", "lo", "up"),
                     ("route", "add", "default", "dev", veth_n)):  # fmt: skip
            _ip("netns", "exec", ns, "ip", *args)
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVE, FAKE_METADATA],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
        )  # fmt: skip
        for _ in range(50):  # until it answers from the host
            assert server.poll() is None, "the fake metadata service exited"
            r = subprocess.run(
                ["curl", "-s", "-m", "1", "-o", "/dev/null", "-w", "%{http_code}",
                 f"http://{FAKE_METADATA}:8000/"], capture_output=True, text=True,
            )  # fmt: skip
            if r.stdout == "200":
                break
            time.sleep(0.1)
        assert r.stdout == "200", "the fake metadata service does not answer this host"
        yield f"http://{FAKE_METADATA}:8000/"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run(["ip", "route", "del", f"{FAKE_METADATA}/32"], capture_output=True)
        subprocess.run(["ip", "link", "del", veth_h], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.parametrize("mode", ["internet", "allowlist"])
def test_link_local_addresses_are_refused_in_every_network_mode(backend, mode, metadata_service):
    """A sandbox with the internet, and one whose task allowlists the metadata address
    itself (a task author's `allowed_hosts`), ask the link-local service: the NAT would open
    the connection from this host's stack (both answered 200 on both backends before)."""
    if mode == "internet":
        env = EnvironmentSpec(files={"Dockerfile": TOOLS_DOCKERFILE}, allow_network=True)
    else:
        env = EnvironmentSpec(
            files={"Dockerfile": TOOLS_DOCKERFILE},
            network_mode=NetworkAccess.ALLOWLIST,
            allowed_hosts=[FAKE_METADATA],
        )
    task = make_task(f"metadata-{mode}", environment=env, limits=LIMITS)
    sb = get_backend(backend).open(task)
    try:
        r = sb.exec(
            f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' {metadata_service}", timeout_s=30
        )
    finally:
        sb.stop()
    assert r.stdout.strip() == "000", (r.stdout, r.stderr)


# -- user-namespace owners: the kernel's per-user counts ------------------------------------------
NS_GET_OWNER_UID = 0xB704  # _IO(0xb7, 0x4), linux/nsfs.h

HOLD_INOTIFY = r"""
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
open("/tmp/held", "w").write(str(len(fds)))
time.sleep(600)
"""

ONE_INOTIFY = (
    "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
    'fd = l.inotify_init1(0); print("inotify", fd >= 0, ctypes.get_errno())\''
)


def _namespace_owner(marker: str) -> int:
    """The host uid owning the user namespace of the process running `sleep <marker>`."""
    for _ in range(100):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes() != f"sleep\0{marker}\0".encode():
                    continue
                fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
            except OSError:
                continue
            try:
                uid = ctypes.c_uint32()
                if LIBC.ioctl(fd, NS_GET_OWNER_UID, ctypes.byref(uid)) != 0:
                    raise OSError(ctypes.get_errno(), "NS_GET_OWNER_UID")
                return uid.value
            finally:
                os.close(fd)
        time.sleep(0.1)
    raise AssertionError(f"no process of the sandbox found (sleep {marker})")


def test_a_sandboxs_kernel_counts_are_its_own(backend):
    """The user namespace of each sandbox is owned by an unprivileged host uid of its own (the
    kernel charges inotify instances and other per-user counts to the owner): a sandbox that
    takes every inotify instance it can leaves the host's root and another sandbox theirs.
    Before: owned by host root on both backends (owner uid 0), and one sandbox holding 128
    inotify instances made inotify_init fail for every root process of the host (measured
    by the issue; not rerun here on the code before: the owner check fails first). Docker
    backend: the private Podman's runtime makes the namespace (sandbox.userns_runtime)."""
    tag = f"{uuid.uuid4().int % 10**6:06d}"
    first = get_backend(backend).open(make_task("counts-a"))
    second = get_backend(backend).open(make_task("counts-b"))
    try:
        owners = []
        for i, sb in enumerate((first, second)):
            sb.session().run(f"sleep 28{i}{tag} >/dev/null 2>&1 &", timeout_s=20)
            owners.append(_namespace_owner(f"28{i}{tag}"))
        assert 0 not in owners and owners[0] != owners[1], owners
        assert all(o >= 100_000 for o in owners), owners  # no account of the host
        first.upload({"hold.py": HOLD_INOTIFY.encode()}, "/tmp")
        first.session().run("python3 /tmp/hold.py >/dev/null 2>&1 &", timeout_s=20)
        held = ""
        for _ in range(100):
            held = first.exec("cat /tmp/held 2>/dev/null", timeout_s=20).stdout.strip()
            if held:
                break
            time.sleep(0.1)
        host_fd = LIBC.inotify_init1(0)
        if host_fd >= 0:
            os.close(host_fd)
        other = second.exec(ONE_INOTIFY, timeout_s=20).stdout
    finally:
        first.stop()
        second.stop()
    assert held.isdigit() and int(held) > 0, held
    assert host_fd >= 0, f"inotify_init failed on the host while a sandbox held {held}"
    assert "inotify True" in other, other
