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
import posixpath
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from sandbox import safefs
from sandbox.git_guards import MAX_CONFIG_BYTES, driver_sections, is_config_file
from sandbox.tamper import (
    STANDARD_PATH_DIRS,
    TOOLCHAIN_COMMAND,
    Change,
    ChangeKind,
    tampered_paths,
)
from tasks.model import VERIFIER_VENV

PROTECTED_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# /etc entries the verifier's view takes from the image (an agent's is hidden): the loader's,
# and gnupg (every gpg reads /etc/gnupg/gpg.conf, even with --no-options: a program it names
# would run for the verifier's git signature checks; sandbox.git_guards).
PROTECTED_ETC = (
    "ld.so.preload",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.cache",
    "alternatives",
    "gnupg",
)


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


def image_commands(image: Path, path_dirs: Sequence[str] = ()) -> frozenset[str]:
    """Toolchain command names the image itself has in its PATH directories (the standard
    ones and those of the image's own PATH), looked up without following a link."""
    names: set[str] = set()
    fd = safefs.open_root(image)
    try:
        for d in dict.fromkeys((*STANDARD_PATH_DIRS, *path_dirs)):
            names.update(n for n in safefs.listdir(fd, d) if TOOLCHAIN_COMMAND.match(n))
    finally:
        os.close(fd)
    return frozenset(names)


def tamper_scan(
    upper: Path,
    image: Path,
    *,
    workdir: str,
    path_dirs: Sequence[str] = (),
    changes: list[Change] | None = None,
) -> list[str]:
    """Absolute sandbox paths the agent wrote (created, changed or deleted) that the verifier's
    run depends on (the rule: sandbox/tamper.py). `upper` is the agent's writable layer,
    `image` the image's own view, both as this process sees them; `path_dirs` the image's
    PATH; `changes` the layer's changes when already listed. Files are read as data: no link
    followed, regular files only, capped."""
    changes = layer_changes(upper, image) if changes is None else changes
    entry_points = {}
    ufd = safefs.open_root(upper)
    try:
        for c in changes:
            if c.path.endswith("/entry_points.txt") and c.kind != ChangeKind.DELETED:
                text = safefs.read_file(ufd, c.path, 65536, resolve=safefs.NO_LINKS)
                if text is not None:
                    entry_points[c.path] = text.decode("utf-8", "replace")
    finally:
        os.close(ufd)
    hits = tampered_paths(
        changes,
        path_dirs=path_dirs,
        image_commands=image_commands(image, path_dirs),
        entry_points=entry_points,
        workdir=workdir,
    )
    return list(hits)


def agent_git_drivers(root: Path, changes: Sequence[Change]) -> set[tuple[str, str]]:
    """The git driver sections (sandbox.git_guards) defined by the configuration files the
    agent wrote, and the files they include, read in the agent's root `root` (as this process
    sees it), regular files only, capped."""
    paths = [c.path for c in changes if c.kind != ChangeKind.DELETED and is_config_file(c.path)]
    if not paths:
        return set()
    fd = safefs.open_root(root)
    try:
        return driver_sections(paths, lambda p: safefs.read_file(fd, p, MAX_CONFIG_BYTES))
    finally:
        os.close(fd)


def _image_dir(image_fd: int, name: str) -> str | None:
    """The image path a top-level entry stands for: itself when a real directory, the target
    of a link (resolved one level, inside the image) when that is a real directory; None
    otherwise. Never a path through a link, so a bind of it cannot resolve on the host."""
    st = safefs.lstat(image_fd, name)
    if st is None:
        return None
    if stat.S_ISDIR(st.st_mode):
        return name
    target = safefs.readlink(image_fd, name)
    if target is None:
        return None
    resolved = safefs.relpath(posixpath.join("/", target))
    found = safefs.lstat(image_fd, resolved)
    return resolved if found is not None and stat.S_ISDIR(found.st_mode) else None


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
    Every source named is free of links (checked here), and the agent's links at the
    destinations are removed first (its processes are gone): bubblewrap resolves neither
    through content the task or the agent made.
    """
    rfd, ifd = safefs.open_root(root), safefs.open_root(image)
    try:
        return _binds(rfd, ifd, ns, trusted, top_files)
    finally:
        os.close(rfd)
        os.close(ifd)


def _binds(
    rfd: int, ifd: int, ns: str, trusted: Sequence[str], top_files: Sequence[str]
) -> list[str]:
    args: list[str] = []
    for name in PROTECTED_TOP:
        src = _image_dir(ifd, name)
        if src is not None:
            # the image's own link (merged /usr: /bin -> usr/bin) stays; one the agent made
            # or changed is removed, so the bind lands on the path itself
            if safefs.readlink(rfd, name) != safefs.readlink(ifd, name):
                safefs.ensure_not_link(rfd, name)
            args += ["--ro-bind", f"{ns}/image/{src}", "/" + name]
    image_etc = safefs.lstat(ifd, "etc")
    agent_etc = safefs.lstat(rfd, "etc")
    if image_etc is not None and stat.S_ISDIR(image_etc.st_mode):
        names = set(PROTECTED_ETC)
        for fd in (ifd, rfd):
            names.update(n for n in safefs.listdir(fd, "etc") if n.startswith("python3"))
        if agent_etc is None or not stat.S_ISDIR(agent_etc.st_mode):
            # the agent's /etc is no longer a directory: the verifier gets the image's
            safefs.ensure_not_link(rfd, "etc")
            args += ["--ro-bind", f"{ns}/image/etc", "/etc"]
            names = set()
        for name in sorted(names):
            rel = "etc/" + name
            mine, theirs = safefs.lstat(rfd, rel), safefs.lstat(ifd, rel)
            if theirs is not None and stat.S_ISLNK(theirs.st_mode):
                continue  # a link would resolve on this host; the tamper scan covers it
            if theirs is not None:
                safefs.ensure_not_link(rfd, rel)
                args += ["--ro-bind", f"{ns}/image/{rel}", "/" + rel]
            elif mine is not None and stat.S_ISDIR(mine.st_mode):
                args += ["--tmpfs", "/" + rel]
            elif mine is not None:
                safefs.ensure_not_link(rfd, rel)
                args += ["--ro-bind", "/dev/null", "/" + rel]
    for name in top_files:
        safefs.ensure_not_link(rfd, name)
        args += ["--ro-bind", "/dev/null", "/" + name]
    for path in trusted:
        rel = safefs.relpath(path)

        st = safefs.lstat(rfd, rel)  # no component of it may be a link
        if rel != "." and st is not None and stat.S_ISDIR(st.st_mode):
            args += ["--bind", f"{ns}/root/{rel}", "/" + rel]
    # a trusted path above it (/usr, /usr/lib) never exposes the agent's copy of the
    # verifier's own venv: the image's is laid back over it
    venv = safefs.relpath(VERIFIER_VENV)
    if trusted and _image_dir(ifd, venv) == venv:
        args += ["--ro-bind", f"{ns}/image/{venv}", "/" + venv]
    return args
