"""The agent's outputs carried into the judge's fresh root, as data (the local backend's half of
sandbox.judge's rule 1).

The judge's root is an overlay of the image's layers under a writable layer of its own, which
the runner prepares before mounting it: `carry` writes into that layer (`dest`) what the agent
changed below each output path, read off the agent's writable layer (`upper`: its changes
against the same image), so that below those paths the judge sees what the agent's sandbox
showed, and elsewhere the image:

- a directory, regular file or link the agent made or changed is carried with
  `judge.carried_mode` (no setuid or setgid bit) and no extended attribute (no file
  capability); below the working directory (the agent's project) what root owned (the
  sandbox's root: the judge's identity) becomes `owner`'s (the agent's uid); elsewhere (system
  state a task declares: /etc/passwd, /home, /srv) and for other owners the owner stays; a
  regular file is
  moved from the agent's layer (the same disk, no bytes copied; the agent's phase is over, and
  the file keeps its inode and the link count the agent left: a hard link beside it would
  count twice), or a copy when the agent's processes live on (`copy`: they could change a
  shared file under the judge);
- a deletion (an overlay whiteout) stays one; a directory the agent removed and made again
  (an opaque directory) hides the image's content as it did;
- anything else (a FIFO, a socket, a device) is not carried, nor a link into the judge's own
  places (`judge.carried_link`): the path is absent for the judge;
- nothing at or below the verifier's own toolchain (`judge.carried_path`), and no path that is
  not absolute and normalized (a `..` would climb out of both layers);
- every root-owned directory of the image below an output path becomes `owner`'s too (a
  directory in the layer, merged with the image's).

Nothing is followed: both layers are read with lstat and O_NOFOLLOW, and a path whose parent
in the agent's layer is not a real directory (a link the agent made) is not carried.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from sandbox import idmap
from sandbox.base import SandboxError
from sandbox.judge import carried_link, carried_mode, carried_path
from tasks.model import trusted_path_problem

OPAQUE = "trusted.overlay.opaque"
# overlayfs features that would make the agent's layer describe files stored elsewhere; this
# module copies plain layers only (they are off unless the kernel or mount enables them)
UNSUPPORTED = ("trusted.overlay.redirect", "trusted.overlay.metacopy")
Owner = tuple[int, int]
Moved = tuple[Path, Path, tuple[int, ...]]  # (agent's path, judge's path, `_signature`)


def carry(
    upper: Path,
    image: Path,
    dest: Path,
    paths: Sequence[str],
    owner: Owner,
    *,
    copy: bool,
    project: str = "",
    moved: list[Moved] | None = None,
) -> list[str]:
    """Write into `dest` the agent's changes below `paths` (see the module docstring); returns
    the regular files carried, as absolute paths of the sandbox, and appends to `moved` the
    (agent's, judge's) path of each file moved and its `_signature` (`give_back` returns
    them). Raises OSError (ENOSPC when the disk is full)."""
    files: list[str] = []
    moved = moved if moved is not None else []
    for path in paths:
        rel = path.strip("/")
        if not rel or trusted_path_problem("/" + rel) is not None:  # no `..`: never above
            continue
        _parents(image, dest, rel)
        top = project.rstrip("/")
        ours = owner if top and ("/" + rel == top or ("/" + rel).startswith(top + "/")) else None
        src = _real(upper, rel)
        if src is not None:
            _carry_entry(src, dest / rel, image / rel, ours, copy, "/" + rel, files, moved)
        if ours is not None:
            _own_image_dirs(image / rel, dest / rel, ours)
    return files


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def make_dir(path: Path, mode: int, owner: Owner, *, opaque: bool = False) -> None:
    """A directory of the layer (an existing one keeps its content), given to `owner`;
    `opaque` hides what the image has below it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        st = None
    if st is None:
        os.mkdir(path, 0o700)
    os.lchown(path, *owner)
    os.chmod(path, mode)
    if opaque:
        os.setxattr(path, OPAQUE, b"y", follow_symlinks=False)


def _real(top: Path, rel: str) -> Path | None:
    """`top/rel` when every parent of it below `top` is a real directory (not a link), and
    it exists; None otherwise."""
    here = top
    parts = rel.split("/")
    for name in parts[:-1]:
        here = here / name
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return None
        except OSError:
            return None
    target = here / parts[-1]
    return target if os.path.lexists(target) else None


def _parents(image: Path, dest: Path, rel: str) -> None:
    """The parents of `rel` in the layer: as in the image where it has them (a plain
    directory merges with the image's), else the sandbox root's."""
    parts = rel.split("/")[:-1]
    for i in range(len(parts)):
        sub = "/".join(parts[: i + 1])
        if (dest / sub).is_dir() and not (dest / sub).is_symlink():
            continue
        try:
            st = os.lstat(image / sub)
            mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
            if not stat.S_ISDIR(st.st_mode):
                raise FileNotFoundError
        except OSError:
            mode, owner = 0o755, _owner_of(dest)
        make_dir(dest / sub, mode, owner)


def _owner_of(path: Path) -> Owner:
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def _carry_entry(
    src: Path,
    dst: Path,
    image: Path,
    agent: Owner | None,
    copy: bool,
    path: str,
    files: list[str],
    moved: list[Moved],
) -> None:
    if not carried_path(path):  # the verifier's toolchain stays the image's
        return
    st = os.lstat(src)
    owner = _owned(st, agent)
    if is_whiteout(st):
        _clear(dst)
        os.mknod(dst, stat.S_IFCHR, os.makedev(0, 0))
        return
    for name in UNSUPPORTED:
        try:
            os.getxattr(src, name, follow_symlinks=False)
        except OSError:
            continue
        raise SandboxError(f"the agent's layer uses an overlay feature not carried: {name}")
    mode = carried_mode(st.st_mode)
    if stat.S_ISLNK(st.st_mode) and not carried_link(path, os.readlink(src)):
        mode = None  # a link into the judge's places
    if mode is None:  # a FIFO, a socket, a device, such a link: absent for the judge
        _clear(dst)
        if os.path.lexists(image):
            os.mknod(dst, stat.S_IFCHR, os.makedev(0, 0))
        return
    if stat.S_ISDIR(st.st_mode):
        opaque = _xattr(src, OPAQUE) == b"y"
        make_dir(dst, mode, owner, opaque=opaque)
        with os.scandir(src) as entries:
            names = sorted(e.name for e in entries)
        for name in names:
            _carry_entry(
                src / name, dst / name, image / name, owner, copy, f"{path}/{name}", files, moved
            )
        return
    _clear(dst)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        os.lchown(dst, *owner)
        return
    was_moved = not copy and _move(src, dst)
    if not was_moved:
        _copy(src, dst)
    for name in os.listxattr(dst, follow_symlinks=False):
        os.removexattr(dst, name, follow_symlinks=False)
    os.chown(dst, *owner)
    os.chmod(dst, mode)
    if was_moved:
        moved.append((src, dst, _signature(os.lstat(dst))))
    files.append(path)


def _signature(st: os.stat_result) -> tuple[int, ...]:
    """What changes when anyone writes, truncates, links or chmods a file: its change time
    above all (no process sets it; a rename back sets it only after the comparison)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, st.st_mode)


def _owned(st: os.stat_result, agent: Owner | None) -> Owner:
    """The owner of a carried entry: the agent's for what the sandbox's root owned (host ids
    shifted: sandbox.idmap) when `agent` is given, the entry's own otherwise."""
    root = idmap.ROOT
    if agent is None:
        return st.st_uid, st.st_gid
    return (
        agent[0] if st.st_uid == root[0] else st.st_uid,
        agent[1] if st.st_gid == root[1] else st.st_gid,
    )


def give_back(moved: list[Moved]) -> list[Path]:
    """The files `carry` moved, back into the agent's layer once the verifier is over (its
    processes gone), so that the agent's layer is whole again; one the verifier removed or
    replaced stays where it is. Returns the agent's paths the verifier changed (written,
    truncated, linked, its mode changed), removed or replaced: a later verifier of the same
    sandbox would not see them as the agent left them."""
    changed = []
    for src, dst, signature in reversed(moved):
        try:
            st = os.lstat(dst)
        except OSError:
            changed.append(src)
            continue
        if _signature(st) != signature:
            changed.append(src)
        try:
            if not os.path.lexists(src) and stat.S_ISREG(st.st_mode):
                os.rename(dst, src)
        except OSError:
            continue
    return changed


def _move(src: Path, dst: Path) -> bool:
    """`src` renamed to `dst` (False across filesystems: then it is copied)."""
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return False
        raise
    return True


def _copy(src: Path, dst: Path) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SandboxError(f"{src} changed under the runner")
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            while os.sendfile(out, fd, None, 1 << 24) > 0:
                pass
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _clear(path: Path) -> None:
    """Remove whatever the layer has at `path` (a tree: its content first)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        for entry in os.scandir(path):
            _clear(Path(entry.path))
        os.rmdir(path)
    else:
        os.unlink(path)


def _xattr(path: Path, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _own_image_dirs(image: Path, dest: Path, owner: Owner) -> None:
    """Every directory of the image below `image` that the judge still sees there (the layer
    has nothing else at its place, and no opaque directory above) becomes `owner`'s."""
    stack = [(image, dest)]
    while stack:
        src, dst = stack.pop()
        try:
            st = os.lstat(src)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        try:
            mine = os.lstat(dst)
        except FileNotFoundError:
            mine = None
        if mine is None:
            make_dir(dst, stat.S_IMODE(st.st_mode) & 0o1777, _owned(st, owner))
        elif not stat.S_ISDIR(mine.st_mode) or _xattr(dst, OPAQUE) == b"y":
            continue
        try:
            with os.scandir(src) as entries:
                subdirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        stack.extend((src / name, dst / name) for name in subdirs)
