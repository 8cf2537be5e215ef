"""The local sandbox's cgroups on both layouts a host mounts: v1 (a directory per controller)
and v2 (one unified tree with a delegated subtree).

Regression: the local backend needed writable cgroup v1, which Debian 12 and Ubuntu 22.04+
do not mount; there every trial was `sandbox_error` and `t1 task check` called each seed
invalid. The file tests run anywhere (a fake tree in tmp_path); the mechanics test needs root
and any cgroup2 mount (this project's CI machine mounts v1 with an empty v2 tree beside it,
so it shows joining, listing, killing and removing groups on v2, not the limits); the
enforcement test needs root and a v2 tree that offers memory, pids and cpu (a pure v2 host:
it skips, saying so, where v1 holds the controllers)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sandbox import cgroups
from sandbox.cgroups import Hierarchy, SandboxCgroup, detect, limit_files, oom_kill_count


def fake_v2(root: Path, offered: str = "cpuset cpu io memory hugetlb pids", enabled: str = ""):
    """A v2 mount as the kernel shows it (the probed GPU VM's root: every controller offered,
    the process in a group of its own), with our subtree's top made as the kernel would."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(offered + "\n")
    (root / "cgroup.subtree_control").write_text(enabled + "\n")
    (root / "cgroup.procs").write_text("")
    top = root / "t1-forge"
    top.mkdir()
    (top / "cgroup.controllers").write_text("cpu memory pids\n")
    (top / "cgroup.subtree_control").write_text("")
    return root


def fake_v1(root: Path) -> Path:
    for c in ("memory", "pids", "cpu"):
        (root / c).mkdir(parents=True)
        (root / c / "cgroup.procs").write_text("")
    return root


def test_layouts_are_told_apart(tmp_path):
    assert detect(fake_v2(tmp_path / "v2")) == Hierarchy(2, str(tmp_path / "v2"), "t1-forge")
    assert detect(fake_v1(tmp_path / "v1")).version == 1
    # a hybrid host (this CI machine): v1 controllers, an empty v2 tree at unified/
    hybrid = fake_v1(tmp_path / "hybrid")
    fake_v2(hybrid / "unified", offered="hugetlb")
    assert detect(hybrid).version == 1
    assert detect(tmp_path / "none") is None
    assert detect(tmp_path / "v2", "/system.slice/t1.service/sandboxes/").parent == (
        "system.slice/t1.service/sandboxes"
    )


def test_a_v2_host_without_v1_runs_the_local_backend(tmp_path, monkeypatch):
    """Regression: 'cgroup v1 memory/pids/cpu controllers are not mounted' on every v2 host.
    Our subtree is made ready: the controllers missing on the way down are enabled."""
    root = fake_v2(tmp_path / "cg", enabled="cpu memory")
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", root)
    monkeypatch.delenv(cgroups.PARENT_ENV, raising=False)
    assert cgroups.cgroup_problem() is None
    assert (root / "cgroup.subtree_control").read_text() == "+pids"  # the one missing
    assert (root / "t1-forge" / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    group = SandboxCgroup("t1-abc")
    assert group.tasks_files() == [f"{root}/t1-forge/t1-abc/cgroup.procs"]
    assert group.child("exec").path("memory") == root / "t1-forge" / "t1-abc" / "exec"


def test_v2_problems_are_one_line_and_name_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv(cgroups.PARENT_ENV, raising=False)
    # this CI machine's v2 tree: v1 holds memory, pids and cpu
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", fake_v2(tmp_path / "a", offered="hugetlb"))
    problem = cgroups.cgroup_problem()
    assert problem is not None and "\n" not in problem
    assert "does not offer the memory, pids, cpu controller(s) (offered: hugetlb)" in problem
    # a container's namespace root: its own processes keep it from delegating controllers
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", fake_v2(tmp_path / "b"))

    def busy(path: str, value: str) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    monkeypatch.setattr(cgroups, "_write", busy)
    problem = cgroups.cgroup_problem()
    assert problem is not None and "no-internal-process rule" in problem
    assert cgroups.PARENT_ENV in problem
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path / "nothing")
    assert "neither a cgroup v2 mount nor the v1" in (cgroups.cgroup_problem() or "")


def test_limit_files_on_both_layouts(tmp_path):
    v2 = Hierarchy(2, str(tmp_path), "t1-forge")
    group = tmp_path / "t1-forge" / "sb"
    group.mkdir(parents=True)
    (group / "memory.swap.max").write_text("max\n")
    assert limit_files(v2, "sb", memory_mb=96, pids=64, cpus=1.5) == [
        (f"{group}/memory.max", str(96 * 1024 * 1024)),
        (f"{group}/memory.swap.max", "0"),
        (f"{group}/pids.max", "64"),
        (f"{group}/cpu.max", "150000 100000"),
    ]
    v1 = Hierarchy(1, str(tmp_path), "t1-forge")
    assert limit_files(v1, "sb", memory_mb=1, pids=8, cpus=0.001) == [
        (f"{tmp_path}/memory/t1-forge/sb/memory.limit_in_bytes", "1048576"),
        (f"{tmp_path}/pids/t1-forge/sb/pids.max", "8"),
        (f"{tmp_path}/cpu/t1-forge/sb/cpu.cfs_period_us", "100000"),
        (f"{tmp_path}/cpu/t1-forge/sb/cpu.cfs_quota_us", "1000"),
    ]
    assert limit_files(v2, "sb/exec") == []  # a child group shares its parent's limits


def test_oom_kill_count_reads_both_files():
    v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"
    assert (oom_kill_count(v1), oom_kill_count(v2), oom_kill_count("")) == (3, 2, 0)


# -- a real cgroup2 mount -------------------------------------------------------------------
def _cgroup2_mount() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == "cgroup2":
            return Path(fields[1])
    return None


@pytest.fixture
def v2_tree(monkeypatch, tmp_path):
    """A private subtree of the host's cgroup2 mount (one is mounted in tmp_path if none
    is), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("cgroups are written as root")
    mount, mounted = _cgroup2_mount(), None
    if mount is None:
        mounted = tmp_path / "cgroup2"
        mounted.mkdir()
        if subprocess.run(["mount", "-t", "cgroup2", "none", str(mounted)]).returncode:
            pytest.skip("no cgroup2 mount, and none can be made")
        mount = mounted
    parent = f"t1-forge-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", mount)
    monkeypatch.setenv(cgroups.PARENT_ENV, parent)
    yield mount, parent
    for group in reversed(cgroups._groups_below(f"{mount}/{parent}")):
        cgroups._rmdir(group)
    if mounted is not None:
        subprocess.run(["umount", str(mounted)], check=False)


def _join_and_sleep(procs_file: str) -> subprocess.Popen[bytes]:
    """`sleep` that joined a group as sandbox/helper.c does: it writes 0 (itself) into the
    group's file before it execs."""

    def join() -> None:
        with open(procs_file, "w") as f:
            f.write("0\n")

    return subprocess.Popen(["sleep", "300"], preexec_fn=join)


def test_v2_groups_on_a_real_cgroup2_mount(v2_tree, monkeypatch):
    """Create, join (a process writes 0 to cgroup.procs), list, kill (`cgroup.kill`) and
    remove a sandbox group on v2, with the controllers this mount offers (none on a host
    where v1 holds them; every one on a pure v2 host)."""
    mount, parent = v2_tree
    offered = set((mount / "cgroup.controllers").read_text().split())
    monkeypatch.setattr(
        cgroups, "CONTROLLERS", tuple(c for c in cgroups.CONTROLLERS if c in offered)
    )
    assert cgroups.hierarchy() == Hierarchy(2, str(mount), parent)
    assert cgroups.cgroup_problem() is None
    group = SandboxCgroup("t1-test")
    group.create()
    for child in ("session", "exec"):
        group.child(child).create()
    procs = [_join_and_sleep(group.child(c).tasks_files()[0]) for c in ("session", "exec")]
    try:
        deadline = time.monotonic() + 5
        while len(group.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(group.pids()) == sorted(p.pid for p in procs)
        line = Path(f"/proc/{procs[1].pid}/cgroup").read_text().splitlines()[-1]
        assert line == f"0::/{parent}/t1-test/exec"
        assert cgroups.sandbox_groups() == ["t1-test"]
        group.child("exec").kill_all()
        assert procs[1].wait(timeout=5) == -9 and procs[0].poll() is None
        group.destroy()
        assert procs[0].wait(timeout=5) == -9
        assert not (mount / parent / "t1-test").exists()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _v2_with_controllers() -> Path | None:
    mount = _cgroup2_mount()
    if mount is None or os.geteuid() != 0:
        return None
    offered = set((mount / "cgroup.controllers").read_text().split())
    return mount if set(cgroups.CONTROLLERS) <= offered else None


@pytest.mark.skipif(
    _v2_with_controllers() is None,
    reason="needs root and a cgroup v2 tree offering memory, pids and cpu (a pure v2 host; "
    "here a v1 hierarchy holds them)",
)
def test_v2_limits_are_enforced(v2_tree):
    """On a pure v2 host: a sandbox group's memory.max OOM-kills (and counts it), pids.max
    stops a fork loop, cpu.max throttles a busy loop."""
    group = SandboxCgroup("t1-limits")
    group.create(memory_mb=48, pids=16, cpus=0.2)
    run = group.child("exec")
    run.create()
    try:

        def joined(*argv: str) -> subprocess.CompletedProcess[str]:
            def join() -> None:
                with open(run.tasks_files()[0], "w") as f:
                    f.write("0\n")

            return subprocess.run(argv, preexec_fn=join, capture_output=True, text=True, timeout=60)

        hog = joined(sys.executable, "-c", "x = bytearray(400 * 1024 * 1024); print(len(x))")
        assert hog.returncode == -9 and group.oom_kills() >= 1, hog
        forks = joined("bash", "-c", "for i in $(seq 40); do sleep 2 & done; wait")
        assert "Resource temporarily unavailable" in forks.stderr, forks.stderr[-500:]
        t0 = time.monotonic()
        joined(
            sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 2: pass"
        )
        wall = time.monotonic() - t0
        usage = dict(
            line.split() for line in Path(run.path("cpu"), "cpu.stat").read_text().splitlines()
        )
        cpu_s = int(usage["usage_usec"]) / 1e6
        assert cpu_s < 0.35 * wall, (cpu_s, wall)  # 0.2 of a CPU, with slack
    finally:
        group.destroy()


@pytest.mark.sandbox
def test_a_sandbox_on_cgroup_v2_joins_kills_and_removes_its_groups(v2_tree, monkeypatch):
    """A local sandbox with its groups on the v2 mount: the helper joins the agent's shell
    and a one-off command through cgroup.procs (what they start stays in), at stop the
    holder kills what runs, and the groups are removed. The limits are left out where this
    mount offers no memory, pids or cpu (a v1 host); test_v2_limits_are_enforced covers them
    where v2 has them."""
    from sandbox import get_backend
    from sandbox.local import reap_stopped
    from tests.factories import make_task

    mount, parent = v2_tree
    offered = set((mount / "cgroup.controllers").read_text().split())
    wanted = tuple(c for c in cgroups.CONTROLLERS if c in offered)
    monkeypatch.setattr(cgroups, "CONTROLLERS", wanted)
    if len(wanted) < 3:
        monkeypatch.setattr(cgroups, "limit_files", lambda *a, **k: [])
    sb = get_backend("local").open(make_task())
    try:
        sb.session().run("sleep 6001 &", timeout_s=10)
        assert sb.exec("echo hi").stdout == "hi\n"
        deadline = time.monotonic() + 10
        pids: list[int] = []
        while not pids and time.monotonic() < deadline:
            pids = [p for p in SandboxCgroup(sb.id).child("session").pids()
                    if b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()]  # fmt: skip
            time.sleep(0.02)
        assert pids, "the shell's background sleep is not in the session group"
        line = Path(f"/proc/{pids[0]}/cgroup").read_text().splitlines()[-1]
        assert line == f"0::/{parent}/{sb.id}/session"
        assert cgroups.sandbox_groups() == [sb.id]
    finally:
        sb.stop()
    reap_stopped()
    assert not Path(f"/proc/{pids[0]}").exists()
    assert cgroups.sandbox_groups() == [] and not (mount / parent / sb.id).exists()
