"""A task's `trusted_paths`, bound into the verifier's view through descriptors.

A trusted path names a directory of the agent's root whose content the verifier sees as the
agent left it (e.g. /usr/local for packages the agent installed). Binding it by a host path
string (`<agent root>/<path>`) let two things reach this host: a path the task model never
checked (`/../../../tmp/victim` bound the host's /tmp/victim read-write into the docker
verifier), and a link in any component (the agent's `/srv -> /tmp`, resolved by the
engine on this host). So each one is opened here, from a descriptor of the agent's root,
with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: never above that root, no link in any
component; the O_PATH descriptor is what gets bound (`bwrap --bind-fd` on the local backend;
on the docker backend the engine gets the path the kernel reports for the descriptor, and
what it mounted is checked against the descriptor before anything runs). A path that does
not open so is not bound: the verifier sees the image's content there.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence

from sandbox import safefs
from sandbox.base import AgentSabotage, SandboxError
from tasks.model import VERIFIER_VENV, trusted_path_problem


def open_trusted(root_fd: int, path: str) -> int | None:
    """An O_PATH descriptor of the directory `path` below `root_fd` (the agent's root), or
    None when the path is not a valid trusted path, is missing, is not a directory, or has
    a link in any component."""
    if trusted_path_problem(path) is not None:
        return None
    try:
        return safefs.openat2(
            root_fd, safefs.relpath(path), os.O_PATH | os.O_DIRECTORY, resolve=safefs.NO_LINKS
        )
    except OSError:
        return None


@contextlib.contextmanager
def opened(root_fd: int, paths: Sequence[str]) -> Iterator[list[tuple[str, int]]]:
    """(path, O_PATH fd) of each trusted path that opens (`open_trusted`); closed on exit."""
    fds: list[tuple[str, int]] = []
    try:
        for path in dict.fromkeys(paths):
            fd = open_trusted(root_fd, path)
            if fd is not None:
                fds.append((path, fd))
        yield fds
    finally:
        for _, fd in fds:
            os.close(fd)


def bwrap_binds(fds: Sequence[tuple[str, int]], image_fd: int, ns: str) -> list[str]:
    """bubblewrap arguments binding each opened trusted path at its place, then the image's
    verifier venv back over them (a trusted /usr or /usr/lib never exposes the agent's copy
    of the verifier's own toolchain). `image_fd` is the image's own view, `ns` where the
    holder mounts it."""
    args: list[str] = []
    for path, fd in fds:
        args += ["--bind-fd", str(fd), path]
    venv = safefs.relpath(VERIFIER_VENV)
    st = safefs.lstat(image_fd, venv)
    if fds and st is not None and stat.S_ISDIR(st.st_mode):
        args += ["--ro-bind", f"{ns}/image/{venv}", VERIFIER_VENV]
    return args


def engine_source(fd: int) -> str:
    """The bind source to give an engine on this host for `fd`: the path the kernel reports
    for what it is open on (free of links and `..` by construction). A runtime resolves a
    source in its own mount namespace (runc refuses a `/proc/<pid>/fd/<n>` source from
    inside the container's user namespace), so the path is handed over and what got
    mounted is compared with `fd` afterwards (`check_bound`), as `bwrap --bind-fd` does."""
    path = os.readlink(f"/proc/self/fd/{fd}")
    if not path.startswith("/") or path.endswith(" (deleted)"):
        raise SandboxError(f"a trusted path's directory is gone: {path!r}")
    return path


def check_bound(container_root: str, fds: Sequence[tuple[str, int]]) -> None:
    """Raise AgentSabotage unless each trusted path in the container whose root this process
    reaches as `container_root` (`/proc/PID/root`) is the very directory its descriptor is
    open on: a component the agent's kept processes swapped for a link between the open
    and the engine's mount would have the engine bind something else (of this host)."""
    if not fds:
        return
    root = safefs.open_root(container_root)
    try:
        for path, fd in fds:
            # resolved as the runtime resolved the mount's target: in the container's root,
            # into the mount (no RESOLVE_NO_XDEV)
            try:
                got = safefs.openat2(
                    root, safefs.relpath(path), os.O_PATH,
                    resolve=safefs.RESOLVE_IN_ROOT | safefs.RESOLVE_NO_MAGICLINKS,
                )  # fmt: skip
            except OSError:
                got = None
            st = None
            if got is not None:
                st = os.fstat(got)
                os.close(got)
            want = os.fstat(fd)
            if st is None or (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
                raise AgentSabotage(
                    f"the trusted path {path} changed while the verifier's view was mounted"
                )
    finally:
        os.close(root)
