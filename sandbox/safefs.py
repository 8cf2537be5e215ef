"""Host-side file operations on a sandbox's filesystem that never resolve a path through
content the sandbox controls.

The runner reaches a local sandbox's root as `/proc/PID/root`; a path through it is resolved
by the kernel with the *runner's* root, so a link the task's image or the agent planted
(`/solution -> /etc`) would lead a plain `open()` to this host's files. Every operation here
starts from a directory file descriptor and resolves with `openat2(2)`:

- `RESOLVE_IN_ROOT` for the sandbox's own paths (upload, download, the runner's directories):
  links are followed as the sandbox itself would follow them, an absolute one from the
  sandbox's root, and nothing resolves above it;
- `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` for a layer read as data (the agent's writable layer
  in the tamper scan): no link is followed at all.

Reads open with O_NONBLOCK and read only regular files, at most `cap` bytes: a FIFO, a device
or `/dev/zero` behind a link neither hangs the runner nor grows its memory.
"""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import stat

SYS_OPENAT2 = 437  # x86_64 and aarch64 share the number (asm-generic)
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_IN_ROOT = 0x10
IN_ROOT = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
NO_LINKS = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def openat2(dirfd: int, path: str, flags: int, *, mode: int = 0, resolve: int = IN_ROOT) -> int:
    """openat2(2); raises OSError like os.open. `path` is taken relative to `dirfd`."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    fd = _libc.syscall(
        SYS_OPENAT2,
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(path or ".")),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{os.strerror(err)}: {path!r}")
    return int(fd)


def relpath(path: str) -> str:
    """A sandbox path as a relative path below its root ('/a/../b' -> 'b', '/' -> '.')."""
    norm = posixpath.normpath("/" + path.lstrip("/"))
    return norm.lstrip("/") or "."


def open_root(path: str | os.PathLike[str]) -> int:
    """A directory fd for a sandbox root as this process reaches it (`/proc/PID/root`)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


Owner = tuple[int, int] | None  # (uid, gid) on the host for what we create; None: ours


def makedirs(root: int, path: str, mode: int = 0o755, *, owner: Owner = None) -> int:
    """`mkdir -p` of the sandbox path `path`; returns an O_RDONLY fd of the directory. A
    component that resolves to a non-directory raises NotADirectoryError. Directories it
    creates are given to `owner`."""
    rel = relpath(path)
    try:
        return openat2(root, rel, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        pass
    parent, name = posixpath.split(rel)
    pfd = makedirs(root, parent or ".", mode, owner=owner)
    try:
        try:
            os.mkdir(name, mode, dir_fd=pfd)
            made = True
        except FileExistsError:
            made = False  # made by another thread, or a link to be resolved in the sandbox
        try:
            fd = openat2(root, rel, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            # a dangling link (to nowhere in the sandbox): the directory replaces it
            os.unlink(name, dir_fd=pfd)
            os.mkdir(name, mode, dir_fd=pfd)
            fd, made = openat2(root, rel, os.O_RDONLY | os.O_DIRECTORY), True
        if made and owner is not None:
            os.fchown(fd, *owner)
        return fd
    finally:
        os.close(pfd)


def write_file(root: int, path: str, data: bytes, mode: int, *, owner: Owner = None) -> None:
    """Create or replace the regular file `path` (given to `owner`, as are the directories
    made for it); a link or special file at its name is replaced (never written through)."""
    rel = relpath(path)
    parent, name = posixpath.split(rel)
    pfd = makedirs(root, parent or ".", owner=owner)
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                os.unlink(name, dir_fd=pfd)  # IsADirectoryError for a directory: the caller's
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(name, flags | os.O_CLOEXEC, 0o600, dir_fd=pfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if owner is not None:
                os.fchown(fd, *owner)  # before the mode: chown clears setuid bits
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        os.close(pfd)


def chmod_dir(root: int, path: str, mode: int) -> None:
    """chmod of the sandbox directory `path` (resolved in the sandbox)."""
    fd = openat2(root, relpath(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _read_fd(fd: int, cap: int) -> bytes | None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return None
    chunks, left = [], cap
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_file(dirfd: int, path: str, cap: int, *, resolve: int = IN_ROOT) -> bytes | None:
    """At most `cap` bytes of the regular file `path`; None when it is missing or not a
    regular file (a FIFO, a device, a directory)."""
    try:
        fd = openat2(
            dirfd, relpath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, resolve=resolve
        )
    except OSError:
        return None
    try:
        return _read_fd(fd, cap)
    finally:
        os.close(fd)


def read_tree(dirfd: int, path: str, budget: int, *, resolve: int = IN_ROOT) -> dict[str, bytes]:
    """Regular files below the directory `path` (relative names), `budget` bytes in all. The
    directory itself is resolved with `resolve`; below it no link is followed."""
    out: dict[str, bytes] = {}
    try:
        top = openat2(dirfd, relpath(path), os.O_RDONLY | os.O_DIRECTORY, resolve=resolve)
    except OSError:
        return out
    stack: list[tuple[int, str]] = [(top, "")]
    while stack:
        fd, prefix = stack.pop()
        try:
            names = sorted(os.listdir(fd))
            for name in names:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        sub = os.open(
                            name,
                            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd,
                        )
                        stack.append((sub, prefix + name + "/"))
                    elif stat.S_ISREG(st.st_mode) and budget > 0:
                        f = os.open(
                            name,
                            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                            dir_fd=fd,
                        )
                        try:
                            data = _read_fd(f, budget)
                        finally:
                            os.close(f)
                        if data is not None:
                            budget -= len(data)
                            out[prefix + name] = data
                except OSError:
                    continue
        finally:
            os.close(fd)
    return dict(sorted(out.items()))


def lstat(dirfd: int, path: str) -> os.stat_result | None:
    """lstat of `path` below `dirfd` where no parent component may be a link (None if one is,
    or if it is missing): what is really there, never what a link points to."""
    rel = relpath(path)
    parent, name = posixpath.split(rel)
    try:
        pfd = openat2(dirfd, parent or ".", os.O_PATH | os.O_DIRECTORY, resolve=NO_LINKS)
    except OSError:
        return None
    try:
        return os.stat(name or ".", dir_fd=pfd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(pfd)


def listdir(dirfd: int, path: str) -> list[str]:
    """Names in the directory `path` below `dirfd`, reached without following any link."""
    try:
        fd = openat2(dirfd, relpath(path), os.O_RDONLY | os.O_DIRECTORY, resolve=NO_LINKS)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def readlink(dirfd: int, path: str) -> str | None:
    """The text of the link `path` (no parent link followed), or None if it is not a link."""
    st = lstat(dirfd, path)
    if st is None or not stat.S_ISLNK(st.st_mode):
        return None
    parent, name = posixpath.split(relpath(path))
    pfd = openat2(dirfd, parent or ".", os.O_PATH | os.O_DIRECTORY, resolve=NO_LINKS)
    try:
        return os.readlink(name, dir_fd=pfd)
    finally:
        os.close(pfd)


def available() -> bool:
    """Whether the kernel has openat2 (Linux >= 5.6)."""
    root = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        os.close(openat2(root, ".", os.O_PATH))
    except OSError as e:
        return e.errno != errno.ENOSYS
    finally:
        os.close(root)
    return True


def ensure_real_dir(dirfd: int, path: str, mode: int = 0o755, *, owner: Owner = None) -> None:
    """Make every component of `path` below `dirfd` a real directory: whatever else stands
    at a component (a file, a link, a FIFO) is removed first, never followed. For the
    runner's own places (/tests, /logs/verifier) after the agent phase: what the agent put
    there cannot keep the verifier from starting. Directories it makes are given to `owner`.
    Raises OSError (ENOSPC when the disk or its inodes are full)."""
    fd = os.dup(dirfd)
    try:
        for name in relpath(path).split("/"):
            if name in (".", ""):
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=fd)
                st = None
            if st is None:
                os.mkdir(name, mode, dir_fd=fd)
            sub = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            if st is None and owner is not None:
                os.fchown(sub, *owner)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)


def ensure_not_link(dirfd: int, path: str) -> None:
    """Remove a link standing at `path` below `dirfd` (its parents are not followed either),
    so that a mount onto that path lands on the path itself."""
    st = lstat(dirfd, path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        parent, name = posixpath.split(relpath(path))
        pfd = openat2(dirfd, parent or ".", os.O_PATH | os.O_DIRECTORY, resolve=NO_LINKS)
        try:
            os.unlink(name, dir_fd=pfd)
        finally:
            os.close(pfd)


def stat_in_root(root: int, path: str) -> os.stat_result | None:
    """stat of what `path` resolves to inside the sandbox (links followed there), opened
    O_PATH so a FIFO or device is never opened for I/O; None when it does not resolve."""
    try:
        fd = openat2(root, relpath(path), os.O_PATH)
    except OSError:
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)
