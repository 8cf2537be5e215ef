"""The local sandbox's user ids on the host: every sandbox process runs in a user namespace
that maps the sandbox's ids 0..SIZE-1 to the host's BASE..BASE+SIZE-1, so root in a sandbox
is an unprivileged host user (no entry in the host's /etc/passwd, no capability over anything
of the host's).

The image layers are stored with their ids already shifted ("id-shifted layers"): a file
that belongs to root in the image belongs to host uid BASE on disk. So a setuid-root binary a
task's Dockerfile makes is setuid to BASE on the host, the overlay needs no idmapped mount,
and what a RUN step writes in its sandbox is already shifted when its layer is stored. What
the runner writes into a sandbox or a layer from the host side (uploads, COPY, the verifier's
files) is chowned to the shifted ids as it is written (`shift_tree`, `ROOT`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

BASE = 1_000_000_000  # far above any host account and the usual subordinate-id ranges
SIZE = 65536  # ids 0..65535 of a sandbox (nobody = 65534 included)
# The owner of a sandbox's user namespace, on the host: OWNER_BASE + its holder's pid (at most
# 2^22), an id of that sandbox alone, in no map and with no account. The kernel charges what a
# namespace's processes hold in per-user counts (inotify instances and watches, namespaces,
# pending signals) to its owner in the parent namespace: owned by root, one sandbox holding
# 128 inotify instances left none for any root process of the host or any other sandbox.
OWNER_BASE = 2_000_000_000
ROOT = (BASE, BASE)  # (uid, gid) of the sandbox's root, on the host
# Written into the keys of cached bases and layers: a cache made before the ids were
# shifted (or with another BASE) is never mixed with this one.
STORAGE_TAG = f"ids{BASE}"


def host_id(sandbox_id: int) -> int:
    """The host id of a sandbox id (ids outside the mapped range stay as they are: the
    kernel shows them as the overflow id inside)."""
    return sandbox_id + BASE if 0 <= sandbox_id < SIZE else sandbox_id


def uid_map_line() -> str:
    """The line written to /proc/PID/uid_map and gid_map of a sandbox's user namespace."""
    return f"0 {BASE} {SIZE}\n"


def shift_tree(top: Path) -> int:
    """Shift every unshifted id (< SIZE) below `top` (itself included) to its host id;
    links are chowned themselves, never followed. Idempotent: shifted ids stay. Returns the
    number of entries changed. chown clears setuid/setgid bits, so they are restored."""
    changed = 0
    for path in _walk(top):
        st = os.lstat(path)
        uid, gid = host_id(st.st_uid), host_id(st.st_gid)
        if (uid, gid) == (st.st_uid, st.st_gid):
            continue
        os.lchown(path, uid, gid)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            os.chmod(path, stat.S_IMODE(st.st_mode))
        changed += 1
    return changed


def unshift_map(dest: Path) -> Path:
    """A GNU tar --owner-map/--group-map file that writes shifted ids back as the image's
    own (for exporting a stored root filesystem to a container engine); returns `dest`."""
    dest.write_text("".join(f"+{BASE + i} u{i}:{i}\n" for i in range(SIZE)))
    return dest


def _walk(top: Path) -> Iterator[str]:
    yield str(top)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)
