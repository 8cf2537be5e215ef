"""The local sandbox's writable disk: a sparse ext4 image of `disk_mb`, mounted by the holder
on a loop device (sandbox/helper.c).

Formatting one per sandbox ran `mkfs.ext4` every start (a fork+exec and four fsyncs of an
image that is thrown away, 4 ms on an idle machine and 15 ms on a busy one). Instead one image
per size and format is made once (`template`, atomically, under the private state directory)
and each sandbox gets a copy of it (`copy_sparse`: its few data extents, 0.2 ms; the holes stay
holes). A copy is byte for byte what mkfs made; the sandbox writes only its own copy.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

MKFS = ["mkfs.ext4", "-q", "-F", "-O", "^has_journal,^resize_inode",
        "-E", "lazy_itable_init=1,nodiscard", "-m", "0"]  # fmt: skip


def template(disks_dir: Path, size_mb: int) -> Path:
    """The formatted image of `size_mb` in `disks_dir` (made now if missing; its name carries
    the format options, so images made with other options are never used)."""
    if size_mb <= 0:
        raise ValueError(f"disk size must be positive, got {size_mb!r} MB")
    digest = hashlib.sha256(" ".join(MKFS).encode()).hexdigest()[:12]
    path = disks_dir / f"ext4-{size_mb}m-{digest}.img"
    if path.is_file():
        return path
    fd, tmp = tempfile.mkstemp(dir=disks_dir, prefix=".mkfs-", suffix=".img")
    try:
        os.ftruncate(fd, size_mb * 1024 * 1024)
        os.close(fd)
        subprocess.run([*MKFS, tmp], check=True, capture_output=True)
        os.replace(tmp, path)  # whole or absent: a concurrent maker's rename is as good
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def copy_sparse(src: Path, dest: Path) -> None:
    """`dest` (new, mode 0600) becomes a copy of `src` with the same size: the data extents
    are copied in the kernel, the holes stay holes."""
    fi = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fo = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            copy_extents(fi, fo)
        finally:
            os.close(fo)
    finally:
        os.close(fi)


def copy_extents(fi: int, fo: int) -> int:
    """Make the empty file `fo` a copy of the regular file `fi`: its data extents copied in
    the kernel, its holes left holes (a 100 GB sparse file costs what it holds, not 100 GB
    of zeros). Returns the size."""
    size = os.fstat(fi).st_size
    os.ftruncate(fo, size)
    for start, end in _data_extents(fi, size):
        pos = start
        while pos < end:
            n = os.copy_file_range(fi, fo, end - pos, pos, pos)
            if n <= 0:
                raise OSError(f"copying stopped at byte {pos} of {end}")
            pos += n
    return size


def inodes(disks_dir: Path, size_mb: int) -> int:
    """How many inodes the formatted disk of `size_mb` has (read once from its superblock):
    what a build may create on the host, as a trial may in its sandbox."""
    key = (str(disks_dir), size_mb)
    if key not in _INODES:
        out = subprocess.run(
            ["dumpe2fs", "-h", str(template(disks_dir, size_mb))],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        line = next(ln for ln in out.splitlines() if ln.startswith("Inode count:"))
        _INODES[key] = int(line.split(":")[1])
    return _INODES[key]


_INODES: dict[tuple[str, int], int] = {}


def _data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of every region of `fd` that is not a hole."""
    out, off = [], 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        out.append((start, end))
        off = end
    return out
