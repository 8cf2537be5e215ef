"""What the verifier sees, and what counts as tampering (the rule is in docs/sandbox.md).

The verifier runs after the agent phase in its own mount namespace over the agent's root,
with these differences, so that nothing its run depends on is the agent's:

- the system directories (/usr, /bin, /sbin, /lib*) and the dynamic loader's and Python's
  configuration in /etc come from the image as built — interpreter, test runner, their
  packages, PATH lookups and `ld.so.preload` are the ones the task's Dockerfile made;
  a task may list `trusted_paths` (e.g. /usr/local) whose agent-made content stays visible;
- /tests holds the task's tests, put there only now; /logs/verifier is empty and private;
- files the agent put at the top of the root (`/pytest.ini`, `/conftest.py`, ...) are hidden;
- the environment is exactly the image's ENV plus the task's verifier env (nothing the agent
  exported), with the user site directory off.

Everything else the agent produced (its work in /app, /home, /tmp, /opt, /var, /etc) stays
visible. Writes that target the verifier's run are also reported (`tamper_scan`, with the rule
of sandbox/tamper.py that the Docker backend applies to `container diff`): the trial is then
recorded as `tampered` and never rewarded, even though the view above neutralizes them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from sandbox.tamper import (
    STANDARD_PATH_DIRS,
    TOOLCHAIN_COMMAND,
    Change,
    ChangeKind,
    tampered_paths,
)

PROTECTED_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
PROTECTED_ETC = ("ld.so.preload", "ld.so.conf", "ld.so.conf.d", "ld.so.cache", "alternatives")


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _walk(upper: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(sandbox-relative path, lstat) of every entry in the agent's writable layer."""
    stack = [upper]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            yield os.path.relpath(e.path, upper), st
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(e.path))


def layer_changes(upper: Path, image: Path) -> list[Change]:
    """The agent's changes against the image, as Docker's `container diff` lists them,
    read off the overlay's writable layer (a whiteout is a deletion)."""
    out = []
    for rel, st in _walk(upper):
        if _is_whiteout(st):
            kind = ChangeKind.DELETED
        elif os.path.lexists(image / rel):
            kind = ChangeKind.MODIFIED
        else:
            kind = ChangeKind.ADDED
        out.append(Change("/" + rel, kind))
    return out


def image_commands(image: Path) -> frozenset[str]:
    """Toolchain command names the image itself has in its PATH directories."""
    names: set[str] = set()
    for d in STANDARD_PATH_DIRS:
        try:
            names.update(n for n in os.listdir(image / d.lstrip("/")) if TOOLCHAIN_COMMAND.match(n))
        except OSError:
            continue
    return frozenset(names)


def tamper_scan(upper: Path, image: Path, *, workdir: str) -> list[str]:
    """Absolute sandbox paths the agent wrote (created, changed or deleted) that the verifier's
    run depends on (the rule: sandbox/tamper.py). `upper` is the agent's writable layer,
    `image` the image's own view, both as this process sees them."""
    changes = layer_changes(upper, image)
    entry_points = {}
    for c in changes:
        if c.path.endswith("/entry_points.txt") and c.kind != ChangeKind.DELETED:
            try:
                text = (upper / c.path.lstrip("/")).read_bytes()[:65536]
            except OSError:
                continue
            entry_points[c.path] = text.decode("utf-8", "replace")
    hits = tampered_paths(
        changes, image_commands=image_commands(image), entry_points=entry_points, workdir=workdir
    )
    return list(hits)


def verifier_binds(
    root: Path,
    image: Path,
    ns: str,
    *,
    trusted: Sequence[str] = (),
    top_files: Sequence[str] = (),
) -> list[str]:
    """bubblewrap arguments laid over `--bind {ns}/root /`.

    `root` (the agent's root) and `image` (the image's own view) are paths as this process
    sees them, for the checks; the arguments name them as the holder sees them, under `ns`.
    `top_files` are the non-directories the agent created at the top of the root (hidden).
    """
    args: list[str] = []
    for name in PROTECTED_TOP:
        if os.path.lexists(image / name):
            args += ["--ro-bind", f"{ns}/image/{name}", "/" + name]
    names = set(PROTECTED_ETC)
    for base in (image / "etc", root / "etc"):
        try:
            names.update(n for n in os.listdir(base) if n.startswith("python3"))
        except OSError:
            pass
    for name in sorted(names):
        if os.path.lexists(image / "etc" / name):
            args += ["--ro-bind", f"{ns}/image/etc/{name}", "/etc/" + name]
        elif os.path.isdir(root / "etc" / name):
            args += ["--tmpfs", "/etc/" + name]
        elif os.path.lexists(root / "etc" / name):
            args += ["--ro-bind", "/dev/null", "/etc/" + name]
    for name in top_files:
        args += ["--ro-bind", "/dev/null", "/" + name]
    for path in trusted:
        p = "/" + path.strip("/")
        if os.path.isdir(str(root) + p):
            args += ["--bind", f"{ns}/root{p}", p]
    return args
