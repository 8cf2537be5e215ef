"""An image's merged file tree, read straight from its layer directories (no mount).

Layers are overlayfs directories, bottom first: a character device 0/0 is a whiteout (the
name is deleted), a directory with the `trusted.overlay.opaque` xattr hides everything below
it. `ImageView` answers what the builder needs without mounting anything: does a path exist,
where does it resolve (symlinks followed inside the image, never on the host), what are its
owner and mode, and who is `app` in /etc/passwd. `flatten` merges layers into one, keeping
whiteouts for what the merged layers delete from the layers beneath them.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

OPAQUE = "trusted.overlay.opaque"
MAX_SYMLINKS = 40
CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


class OverBudget(OSError):
    """A build wrote more into the host's layer cache than its task's disk holds."""


class LayerBudget:
    """What one build may still write into the host's layer cache: the bytes and inodes of
    the task's disk (`storage_mb`, the disk a trial gets), for every layer of the build
    together. A COPY/ADD takes what it writes (apparent sizes, one inode per entry) as it
    writes it; a RUN step's layer is taken once made (what it allocated). Going over raises
    OverBudget: the task's build error, before the host's disk or inodes run out."""

    def __init__(self, nbytes: int, inodes: int) -> None:
        self.bytes_left, self.inodes_left = nbytes, inodes
        self.size = (nbytes, inodes)

    def take(self, nbytes: int = 0, inodes: int = 0) -> None:
        self.bytes_left -= nbytes
        self.inodes_left -= inodes
        if self.bytes_left < 0 or self.inodes_left < 0:
            total, files = self.size
            raise OverBudget(
                f"the image exceeds the task's disk ({total // (1 << 20)} MB, {files} files: "
                "storage_mb)"
            )


def layer_usage(top: Path) -> tuple[int, int]:
    """(allocated bytes, entries) of a layer directory: what it costs the host's disk."""
    nbytes, entries = 0, 0
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            nbytes += st.st_blocks * 512
            entries += 1
    return nbytes, entries


def write_stream(fd: int, src: object, budget: LayerBudget | None = None) -> int:
    """Copy the readable `src` (a file object: a tar member) into the empty file `fd`, a
    chunk at a time (never the whole member in memory), all-zero chunks left as holes; each
    chunk taken from `budget` before it is written. Returns the size."""
    read = src.read  # type: ignore[attr-defined]
    size = 0
    while chunk := read(CHUNK):
        if budget is not None:
            budget.take(len(chunk))
        if chunk == _ZEROS[: len(chunk)]:
            os.lseek(fd, len(chunk), os.SEEK_CUR)
        else:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        size += len(chunk)
    os.ftruncate(fd, size)
    return size


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def is_opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


class ImageView:
    """Read-only view of layers (bottom first)."""

    def __init__(self, layers: Sequence[Path]) -> None:
        self.layers = list(layers)

    def entry(self, path: str) -> Path | None:
        """The host path of the topmost layer's entry for `path` (no symlink following)."""
        parts = [p for p in path.split("/") if p]
        if not parts:
            return self.layers[-1]
        for layer in reversed(self.layers):
            cur = layer
            below_hidden = False  # an opaque directory on the way hides the layers below
            for depth, part in enumerate(parts):
                cur = cur / part
                try:
                    st = os.lstat(cur)
                except OSError:
                    break
                if is_whiteout(st):
                    return None
                if depth == len(parts) - 1:
                    return cur
                if not stat.S_ISDIR(st.st_mode):
                    return None  # a file here shadows the directories of lower layers
                below_hidden = below_hidden or is_opaque(cur)
            if below_hidden:
                return None
        return None

    def resolve(self, path: str) -> str:
        """`path` with every symlink resolved inside the image (like chroot + realpath)."""
        parts = [p for p in path.split("/") if p]
        done = "/"
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                done = posixpath.dirname(done.rstrip("/")) or "/"
                continue
            candidate = posixpath.join(done, part)
            host = self.entry(candidate)
            if host is not None and host.is_symlink():
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise OSError(f"too many symlinks resolving {path}")
                target = os.readlink(host)
                if target.startswith("/"):
                    done = "/"
                parts = [p for p in target.split("/") if p] + parts
                continue
            done = candidate
        return done

    def lstat(self, path: str) -> os.stat_result | None:
        host = self.entry(path)
        return os.lstat(host) if host is not None else None

    def is_dir(self, path: str) -> bool:
        host = self.entry(self.resolve(path))
        return host is not None and host.is_dir()

    def read_text(self, path: str) -> str:
        host = self.entry(self.resolve(path))
        if host is None or not host.is_file():
            return ""
        return host.read_text(errors="replace")

    def listdir(self, path: str) -> list[str]:
        """Names in a directory of the merged tree."""
        names: set[str] = set()
        gone: set[str] = set()
        parts = [p for p in self.resolve(path).split("/") if p]
        for layer in reversed(self.layers):
            d = layer.joinpath(*parts)
            if not d.is_dir() or d.is_symlink():
                if os.path.lexists(d):
                    break
                continue
            for e in os.scandir(d):
                st = e.stat(follow_symlinks=False)
                if e.name in gone or e.name in names:
                    continue
                (gone if is_whiteout(st) else names).add(e.name)
            if is_opaque(d):
                break
        return sorted(names)

    def ids(self, user: str) -> tuple[int, int]:
        """`user[:group]` (names or numbers) -> (uid, gid) from the image's passwd/group."""
        name, _, group = user.partition(":")
        uid = _lookup(self.read_text("/etc/passwd"), name, 2)
        if group:
            gid = _lookup(self.read_text("/etc/group"), group, 2)
        elif name.isdigit():
            gid = uid
        else:
            gid = _lookup(self.read_text("/etc/passwd"), name, 3)
        return uid, gid

    def home(self, user: str) -> str:
        name = user.partition(":")[0] or "root"
        for line in self.read_text("/etc/passwd").splitlines():
            fields = line.split(":")
            if len(fields) >= 6 and (fields[0] == name or fields[2] == name):
                return fields[5]
        return "/root" if name in ("root", "0") else "/"


def _lookup(table: str, key: str, column: int) -> int:
    if key.isdigit():
        return int(key)
    for line in table.splitlines():
        fields = line.split(":")
        if len(fields) > column and fields[0] == key:
            return int(fields[column])
    raise KeyError(key)


def copy_meta(src: os.stat_result, dst: Path) -> None:
    os.chown(dst, src.st_uid, src.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(src.st_mode):
        os.chmod(dst, stat.S_IMODE(src.st_mode))
    os.utime(dst, ns=(src.st_atime_ns, src.st_mtime_ns), follow_symlinks=False)


def flatten(layers: Sequence[Path], dest: Path) -> None:
    """Merge `layers` (bottom first) into the empty directory `dest`, overlay semantics kept."""
    for layer in layers:
        _apply(layer, dest)


def _apply(src: Path, dst: Path) -> None:
    for e in os.scandir(src):
        s = Path(e.path)
        d = dst / e.name
        st = e.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            opaque = is_opaque(s)
            if os.path.lexists(d) and (opaque or not d.is_dir() or d.is_symlink()):
                _remove(d)
            if not os.path.lexists(d):
                d.mkdir()
            copy_meta(st, d)
            if opaque:
                os.setxattr(d, OPAQUE, b"y")
            _apply(s, d)
            continue
        if os.path.lexists(d):
            _remove(d)
        if is_whiteout(st):
            os.mknod(d, stat.S_IFCHR | 0o000, os.makedev(0, 0))
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(s), d)
            copy_meta(st, d)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(s, d)  # holes stay holes: a layer's sparse file is not written out
            copy_meta(st, d)
        else:
            os.mknod(d, st.st_mode, st.st_rdev)
            copy_meta(st, d)


def _copy_file(src: Path, dest: Path) -> None:
    from sandbox.disk import copy_extents

    fi = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        fo = os.open(
            dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            copy_extents(fi, fo)
        finally:
            os.close(fo)
    finally:
        os.close(fi)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


class LinkInLayer(OSError):
    """A write into a layer would pass through a link made in that layer (an archive member
    linking out, then a member under it: tar slip)."""


def host_path(up: Path, path: str) -> Path:
    """`up/path` after checking that no directory on the way, inside the layer `up`, is a
    link: what the layer itself holds is data, never a path this host resolves."""
    cur = up
    for part in [p for p in path.split("/") if p][:-1]:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise LinkInLayer(f"{path}: its directory {'/' + str(cur.relative_to(up))} is a link")
    return up / path.lstrip("/")


def ensure_dirs(view: ImageView, up: Path, path: str) -> None:
    """Create `path` (already resolved) in the layer `up`, its existing parents keeping the
    owner and mode they have in the image (an upper directory's attributes win in overlay).
    A link on the way inside `up` raises LinkInLayer."""
    cur = "/"
    for part in [p for p in path.split("/") if p]:
        cur = cur.rstrip("/") + "/" + part
        target = host_path(up, cur)
        try:
            st_up = os.lstat(target)
        except FileNotFoundError:
            st_up = None
        if st_up is not None and stat.S_ISLNK(st_up.st_mode):
            raise LinkInLayer(f"{path}: {cur} is a link in the layer being written")
        if st_up is not None and stat.S_ISDIR(st_up.st_mode):
            continue
        st = view.lstat(cur)
        target.mkdir()
        if st is not None:
            copy_meta(st, target)
        else:
            target.chmod(0o755)
