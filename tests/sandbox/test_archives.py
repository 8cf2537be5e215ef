"""A task author's archives and stage files, written into the host's layer cache by the layer
builder (no sandbox: a hand-made base, RUN steps through the test_build fake). What must
hold: the runner's memory stays flat whatever an archive expands to, what a build writes is
bounded by the task's disk (bytes and inodes), nothing lands outside the layer, and no
member links a file of this host."""

from __future__ import annotations

import functools
import io
import multiprocessing
import os
import resource
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox.build import BuildFailure, ImageBuildError, build_image
from tasks.model import Limits, Task
from tests.sandbox.test_build import RecordingRunner, host, state, task  # noqa: F401

MIB = 1 << 20
BOMB_MIB = 160


class Zeros(io.RawIOBase):
    """`size` zero bytes, read lazily (so the archive is made without holding them)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


@functools.cache
def bomb() -> bytes:
    """A gzip'd tar of one member holding BOMB_MIB MiB of zeros (about 160 KB)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = BOMB_MIB * MIB
        tar.addfile(info, io.BufferedReader(Zeros(info.size)))
    return buf.getvalue()


def with_disk(t: Task, disk_mb: int) -> Task:
    return t.model_copy(update={"limits": Limits(build_timeout_s=60, disk_mb=disk_mb)})


def peak_rss_growth(work: Callable[[], object]) -> tuple[int, str]:
    """(growth of the peak RSS in bytes, the outcome) of `work` run in a forked child: the
    child's peak before it starts is the parent's size, so the growth is what `work` took."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            work()
            outcome = "built"
        except ImageBuildError as e:
            outcome = e.kind.value
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        send.send(((after - before) * 1024, outcome))

    proc = ctx.Process(target=child)
    proc.start()
    got = recv.recv()
    proc.join()
    return got


def test_add_of_a_gzip_bomb_is_streamed_and_kept_sparse(state: Path):  # noqa: F811
    """160 KB of gzip holding 160 MiB of zeros: the runner's peak RSS grows by a few MiB, not
    by the member (before: +160 MiB; the issue measured 1.26 GB for a 1.2 GiB bomb), and the
    zeros are holes in the host's layer."""
    t = with_disk(task("FROM tiny:1\nADD bomb.tar.gz /opt/\n", {"bomb.tar.gz": bomb()}), 1024)
    growth, outcome = peak_rss_growth(lambda: build_image(t, RecordingRunner()))
    assert outcome == "built"
    assert growth < 64 * MIB, f"peak RSS grew by {growth / MIB:.0f} MiB"
    img = build_image(t, RecordingRunner())
    st = os.stat(host(img, "/opt/zeros"))
    assert st.st_size == BOMB_MIB * MIB and st.st_blocks * 512 < MIB


def test_an_archive_past_the_tasks_disk_is_the_tasks_build_error(state: Path):  # noqa: F811
    """The same bomb for a 64 MB task: `disk_limit`, found before 64 MB were written, and no
    layer left behind (before: the whole member extracted into the host's cache)."""
    t = with_disk(task("FROM tiny:1\nADD bomb.tar.gz /opt/\n", {"bomb.tar.gz": bomb()}), 64)
    with pytest.raises(ImageBuildError) as e:
        build_image(t, RecordingRunner())
    assert e.value.kind == BuildFailure.DISK_LIMIT and e.value.line == 2, e.value
    assert not [p for p in (state / "l").iterdir() if p.is_dir() and p.name != "ca"]


def test_an_archive_of_many_tiny_files_stops_at_the_disks_inodes(state: Path):  # noqa: F811
    """5,000 empty members for a 16 MB task, whose disk has 4,096 inodes (mke2fs's "small"
    type: one per 4 KiB): `disk_limit` (before: every member an inode of the host's layer
    cache, whatever their number)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(5000):
            tar.addfile(tarfile.TarInfo(f"d/{i}"))
    t = with_disk(task("FROM tiny:1\nADD many.tar.gz /m/\n", {"many.tar.gz": buf.getvalue()}), 16)
    with pytest.raises(ImageBuildError) as e:
        build_image(t, RecordingRunner())
    assert e.value.kind == BuildFailure.DISK_LIMIT, e.value


class SparseRunner(RecordingRunner):
    """FAKE StepRunner (see test_build): the step leaves one sparse file of BOMB_MIB MiB."""

    def run(self, layers, upper, argv, **kw):  # type: ignore[no-untyped-def]
        r = super().run(layers, upper, argv, **kw)
        with open(upper / "big", "wb") as f:
            f.truncate(BOMB_MIB * MIB)
        return r


def test_copy_from_a_stage_is_streamed_and_kept_sparse(state: Path):  # noqa: F811
    """COPY --from of a 160 MiB sparse file a stage made: copied extent by extent (before:
    read whole, +160 MiB of peak RSS, and written out as 160 MiB of zeros)."""
    text = "FROM tiny:1 AS b\nRUN make big\nFROM tiny:1\nCOPY --from=b /big /big\n"
    t = with_disk(task(text), 1024)
    growth, outcome = peak_rss_growth(lambda: build_image(t, SparseRunner()))
    assert outcome == "built"
    assert growth < 64 * MIB, f"peak RSS grew by {growth / MIB:.0f} MiB"
    st = os.stat(host(build_image(t, SparseRunner()), "/big"))
    assert st.st_size == BOMB_MIB * MIB and st.st_blocks * 512 < MIB


def hostile_members(tmp: Path) -> bytes:
    """Members that name things outside the layer, or of this host: an absolute path, a
    `..` path, hard links to a host file (absolute and through `..`), a device, a FIFO;
    and a hard link to an earlier member (which Docker makes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, type_: bytes = tarfile.REGTYPE, body: bytes = b"", **kw) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.size = type_, len(body)
            for k, v in kw.items():
                setattr(info, k, v)
            tar.addfile(info, io.BytesIO(body))

        add("/abs/file", body=b"abs")
        add(f"../../../../../../..{tmp}/dotdot", body=b"pwned")
        add("link-host", tarfile.LNKTYPE, linkname=f"{tmp}/host-file")
        add("link-dotdot", tarfile.LNKTYPE, linkname=f"../../../../../../..{tmp}/host-file")
        add("disk", tarfile.BLKTYPE, devmajor=8, devminor=0)
        add("null", tarfile.CHRTYPE, devmajor=1, devminor=3)
        add("fifo", tarfile.FIFOTYPE)
        add("data/orig", body=b"orig")
        add("data/same", tarfile.LNKTYPE, linkname="data/orig")
    return buf.getvalue()


def test_archive_members_never_reach_this_host(state: Path, tmp_path: Path):  # noqa: F811
    """Nothing is written outside the layer, no hard link to a host file and no device or
    FIFO is made (contained before: such members were skipped, and still are); an absolute
    member lands below the destination, as in Docker."""
    host_file = tmp_path / "host-file"
    host_file.write_text("host")
    data = hostile_members(tmp_path)
    img = build_image(task("FROM tiny:1\nADD x.tar /u/\n", {"x.tar": data}), RecordingRunner())
    layer = img.layers[-1]
    assert os.stat(host_file).st_nlink == 1 and host_file.read_text() == "host"
    assert not (tmp_path / "dotdot").exists()
    assert host(img, "/u/abs/file").read_bytes() == b"abs"
    made = {p.relative_to(layer).as_posix() for p in layer.rglob("*")}
    assert not made & {"u/link-host", "u/link-dotdot", "u/disk", "u/null", "u/fifo"}, made


def test_a_hard_link_to_an_earlier_member_is_a_link(state: Path, tmp_path: Path):  # noqa: F811
    """What Docker makes of a hard-link member (before: skipped)."""
    img = build_image(
        task("FROM tiny:1\nADD x.tar /u/\n", {"x.tar": hostile_members(tmp_path)}),
        RecordingRunner(),
    )
    same, orig = host(img, "/u/data/same"), host(img, "/u/data/orig")
    assert os.stat(same).st_ino == os.stat(orig).st_ino


def test_a_deep_stack_flattened_keeps_a_sparse_file_sparse(state: Path):  # noqa: F811
    """A step leaves a 160 MiB sparse file (`truncate -s 100G` costs a RUN nothing), then 30
    more layers make the builder flatten the stack: the flattened layer keeps the holes
    (before: every zero written out, 160 MiB here, 100 GB for `truncate -s 100G`)."""
    text = "FROM tiny:1\nRUN make big\n" + "".join(f"COPY f /f{i}\n" for i in range(30))
    img = build_image(with_disk(task(text, {"f": b"x"}), 1024), SparseRunner())
    assert len(img.layers) == 2  # flattened above the base
    st = os.stat(host(img, "/big"))
    assert st.st_size == BOMB_MIB * MIB and st.st_blocks * 512 < MIB, st


def test_a_member_under_a_member_linking_out_is_refused(state: Path, tmp_path: Path):  # noqa: F811
    """Tar slip: a link member to a host directory, then a member under it. The build fails
    naming the line and writes nothing through the link (contained before, and in a sandbox
    on both backends: test_hostile.py::test_task_archive_cannot_slip_out_of_the_layer)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        link = tarfile.TarInfo("evil")
        link.type, link.linkname = tarfile.SYMTYPE, str(tmp_path)
        tar.addfile(link)
        body = tarfile.TarInfo("evil/pwned")
        body.size = 5
        tar.addfile(body, io.BytesIO(b"pwned"))
    with pytest.raises(ImageBuildError) as e:
        build_image(
            task("FROM tiny:1\nADD s.tar /u/\n", {"s.tar": buf.getvalue()}), RecordingRunner()
        )
    assert e.value.kind == BuildFailure.COPY and e.value.line == 2, e.value
    assert not (tmp_path / "pwned").exists()
