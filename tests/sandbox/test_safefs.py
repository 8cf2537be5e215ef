"""sandbox.safefs on a directory standing in for a sandbox's root, with links pointing at a
host directory outside it: nothing outside the root is read or written, FIFOs and devices are
never opened for I/O, reads are capped."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sandbox import safefs


@pytest.fixture
def tree(tmp_path: Path):
    root, host = tmp_path / "root", tmp_path / "host"
    root.mkdir()
    host.mkdir()
    (host / "secret").write_text("host secret")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    os.symlink(str(host), root / "abs-out")  # absolute: the host path, as the host sees it
    os.symlink("../../host", root / "rel-out")
    os.symlink("/etc", root / "etc-link")  # resolves inside the root, to root/etc
    os.mkfifo(root / "fifo")
    os.symlink("/dev/zero", root / "zero")
    fd = safefs.open_root(root)
    yield root, host, fd
    os.close(fd)


def test_links_resolve_inside_the_root(tree):
    root, host, fd = tree
    assert safefs.read_file(fd, "/etc-link/passwd", 1000) == (root / "etc/passwd").read_bytes()
    assert safefs.read_file(fd, "/abs-out/secret", 1000) is None  # root/<host path> is absent
    assert safefs.read_file(fd, "rel-out/secret", 1000) is None  # '..' stops at the root


def test_writes_through_links_stay_inside(tree):
    root, host, fd = tree
    before = sorted(os.listdir(host))
    # '..' clamps at the root: root/host does not exist, so the dangling link gives way to a
    # directory of its own
    safefs.write_file(fd, "/rel-out/new", b"x", 0o644)
    os.close(safefs.makedirs(fd, "/abs-out/made"))  # the dangling link becomes a directory
    safefs.write_file(fd, "/zero", b"replaced", 0o644)  # a link at the name is replaced
    assert sorted(os.listdir(host)) == before and (host / "secret").read_text() == "host secret"
    assert (root / "rel-out" / "new").read_bytes() == b"x"
    assert (root / "abs-out" / "made").is_dir() and not (root / "abs-out").is_symlink()
    assert not (root / "zero").is_symlink() and (root / "zero").read_bytes() == b"replaced"


def test_reads_never_open_fifos_or_devices_and_are_capped(tree):
    root, _, fd = tree
    assert safefs.read_file(fd, "fifo", 100) is None  # would block forever if opened blocking
    assert safefs.read_file(fd, "zero", 100) is None  # /dev/zero in the root: absent here
    (root / "big").write_bytes(b"a" * 10_000)
    assert safefs.read_file(fd, "big", 100) == b"a" * 100
    got = safefs.read_tree(fd, "/", 150)
    assert "fifo" not in got and "zero" not in got and "abs-out/secret" not in got
    assert sum(len(v) for v in got.values()) <= 150


def test_ensure_real_dir_removes_what_stands_in_the_way(tree):
    root, host, fd = tree
    (root / "logs").write_text("a file where a directory belongs")
    os.symlink(str(host), root / "tests")
    safefs.ensure_real_dir(fd, "logs/verifier")
    safefs.ensure_real_dir(fd, "tests")
    assert stat.S_ISDIR(os.lstat(root / "logs" / "verifier").st_mode)
    assert stat.S_ISDIR(os.lstat(root / "tests").st_mode)
    assert sorted(os.listdir(host)) == ["secret"]


def test_lstat_and_listdir_never_follow_a_link(tree):
    root, host, fd = tree
    assert safefs.lstat(fd, "abs-out/secret") is None  # a parent is a link
    st = safefs.lstat(fd, "abs-out")
    assert st is not None and stat.S_ISLNK(st.st_mode)
    assert safefs.listdir(fd, "abs-out") == [] and "passwd" in safefs.listdir(fd, "etc")
    assert safefs.readlink(fd, "etc-link") == "/etc" and safefs.readlink(fd, "etc") is None
