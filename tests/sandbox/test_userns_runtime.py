"""sandbox.userns_runtime: the private Podman's runc, in front of a stand-in runc that reports
what it was handed (the namespace's owner and maps, the limits it runs under). The engine
itself is exercised by tests/sandbox/test_host_bounds.py's kernel-count test (docker)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import idmap
from sandbox import userns_runtime as rt
from sandbox.podman import install_runtime

# The stand-in runc: prints its arguments, its NOFILE limit, and for a bundle the owner and
# uid map of the user namespace its config.json names (as runc would join it).
FAKE_RUNC = """\
import ctypes, json, os, resource, sys
args = sys.argv[1:]
out = {"args": args, "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE))}
if "--bundle" in args:
    spec = json.load(open(os.path.join(args[args.index("--bundle") + 1], "config.json")))
    ns = [n for n in spec["linux"]["namespaces"] if n["type"] == "user"][0]
    out["rlimits"] = spec["process"].get("rlimits")
    if ns.get("path"):
        fd = os.open(ns["path"], os.O_RDONLY)
        uid = ctypes.c_uint32()
        assert ctypes.CDLL(None).ioctl(fd, 0xB704, ctypes.byref(uid)) == 0  # NS_GET_OWNER_UID
        out["owner"] = uid.value
        pid = ns["path"].split("/")[2]
        out["uid_map"] = open(f"/proc/{pid}/uid_map").read().split()
        out["gid_map"] = open(f"/proc/{pid}/gid_map").read().split()
if "--process" in args:
    out["rlimits"] = json.load(open(args[args.index("--process") + 1])).get("rlimits")
print(json.dumps(out))
sys.exit(int(os.environ.get("FAKE_RUNC_EXIT", "0")))
"""
LIMITS = [
    {"type": "RLIMIT_NOFILE", "soft": 512, "hard": 640},
    {"type": "RLIMIT_NPROC", "soft": 900, "hard": 900},
]
MAPS = [{"containerID": 0, "hostID": 1_000_000_000, "size": 65536}]


def test_runc_command_and_options_are_found_past_global_options():
    args = ["--root", "/run/r", "--log=/l", "--log-format", "json", "--systemd-cgroup", "create"]
    assert rt.subcommand([*args, "--bundle", "/b", "id"]) == len(args) - 1
    assert rt.subcommand(["--root", "/run/r"]) is None
    assert rt.option(["--bundle", "/b", "--pid-file=/p", "id"], "--bundle") == "/b"
    assert rt.option(["--bundle", "/b", "--pid-file=/p", "id"], "--pid-file") == "/p"
    assert rt.option(["--bundle"], "--bundle") is None
    assert rt.id_map(MAPS + [{"containerID": 1, "hostID": 7, "size": 2}]) == (
        "0 1000000000 65536\n1 7 2\n"
    )


def test_only_a_namespace_the_runtime_would_make_is_made_and_limits_are_taken_out():
    spec = {"linux": {"namespaces": [{"type": "pid"}, {"type": "user"}]}}
    assert rt.namespace_to_make(spec) == {"type": "user"}
    joined = {"linux": {"namespaces": [{"type": "user", "path": "/proc/9/ns/user"}]}}
    assert rt.namespace_to_make(joined) is None  # a container in another's namespace
    assert rt.namespace_to_make({"linux": {"namespaces": [{"type": "mount"}]}}) is None
    process = {"args": ["sh"], "rlimits": [dict(x) for x in LIMITS]}
    assert rt.take_limits(process) == [
        (resource.RLIMIT_NOFILE, 512, 640),
        (resource.RLIMIT_NPROC, 900, 900),
    ]
    assert "rlimits" not in process and rt.take_limits({"args": []}) == []


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """The runtime as sandbox.podman installs it, in front of the stand-in runc."""
    fake = tmp_path / "runc"
    fake.write_text(f"#!{sys.executable}\n{FAKE_RUNC}")
    fake.chmod(0o755)
    return install_runtime(tmp_path / "podman", runc=str(fake))


def _bundle(tmp_path: Path, namespaces: list[dict]) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir(parents=True)
    spec = {
        "process": {"args": ["sh"], "rlimits": [dict(x) for x in LIMITS]},
        "linux": {"namespaces": namespaces, "uidMappings": MAPS, "gidMappings": MAPS},
    }
    (bundle / "config.json").write_text(json.dumps(spec))
    return bundle


def _run(runtime: Path, *args: str, **env: str) -> tuple[int, dict, str]:
    done = subprocess.run(
        [str(runtime), *args], capture_output=True, text=True, env=os.environ | env, timeout=60
    )
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, out, done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="making a namespace for another owner needs root")
def test_create_hands_runc_a_namespace_owned_by_the_conmons_uid_with_the_specs_maps(
    runtime, tmp_path
):
    bundle = _bundle(tmp_path, [{"type": "pid"}, {"type": "user"}])
    code, out, err = _run(runtime, "--root", "/run/x", "create", "--bundle", str(bundle), "c1")
    assert code == 0, err
    assert out["args"] == ["--root", "/run/x", "create", "--bundle", str(bundle), "c1"]
    assert out["owner"] == idmap.OWNER_BASE + os.getpid()  # our process stands in for conmon
    assert out["uid_map"] == out["gid_map"] == ["0", "1000000000", "65536"]
    assert out["rlimits"] is None and out["nofile"] == [512, 640]  # inherited, not prlimit'd
    # runc's failure is the runtime's, and the namespace's maker is gone either way
    code, out, _ = _run(
        runtime, "create", "--bundle", str(_bundle(tmp_path / "b2", [{"type": "user"}])), "c2",
        FAKE_RUNC_EXIT="3",
    )  # fmt: skip
    assert code == 3 and out["owner"] == idmap.OWNER_BASE + os.getpid()


def test_a_joined_namespace_and_every_other_command_pass_through(runtime, tmp_path):
    joined = {"type": "user", "path": f"/proc/{os.getpid()}/ns/user"}  # stands for another's
    bundle = _bundle(tmp_path, [joined])
    code, out, err = _run(runtime, "create", "--bundle", str(bundle), "c1")
    assert code == 0, err
    assert out["owner"] == os.geteuid()  # the namespace named, not one made
    spec = json.loads((bundle / "config.json").read_text())
    assert spec["linux"]["namespaces"] == [joined]
    for args in (["start", "c1"], ["--root", "/r", "kill", "c1", "KILL"], ["delete", "c1"]):
        code, out, _ = _run(runtime, *args)
        assert code == 0 and out["args"] == args and out["nofile"] != [512, 640]
    # the shell front runs the Python program for create and exec alone
    module = runtime.parent / f"t1_runc_{runtime.name.rsplit('-', 1)[1]}.py"
    module.write_text("def main(*_):\n    return 9\n")
    assert _run(runtime, "state", "c1")[0] == 0
    assert _run(runtime, "exec", "--process", "/p", "c1")[0] == 9


def test_exec_sets_the_process_limits_on_itself_and_takes_them_out(runtime, tmp_path):
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "rlimits": LIMITS}))
    code, out, err = _run(runtime, "exec", "--process", str(process), "--detach", "c1")
    assert code == 0, err
    assert out["rlimits"] is None and out["nofile"] == [512, 640]
    # raising a hard limit above ours fails here, as runc's prlimit would without
    # CAP_SYS_RESOURCE (which this project's CI machine's root lacks)
    ceiling = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if ceiling != resource.RLIM_INFINITY and not _has_cap(CAP_SYS_RESOURCE):
        big = [{"type": "RLIMIT_NOFILE", "soft": 64, "hard": ceiling + 1}]
        process.write_text(json.dumps({"args": ["sh"], "rlimits": big}))
        code, out, err = _run(runtime, "exec", "--process", str(process), "c1")
        assert code == 1 and out == {} and "t1-runc: exec" in err


CAP_SYS_RESOURCE = 24


def _has_cap(bit: int) -> bool:
    status = Path("/proc/self/status").read_text()
    eff = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:"))
    return bool(int(eff, 16) >> bit & 1)
