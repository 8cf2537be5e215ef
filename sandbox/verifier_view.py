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
visible. Writes that target the verifier's run are also reported (`tamper_scan`): the trial
is then recorded as `tampered` and never rewarded, even though the view above neutralizes them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

PROTECTED_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
PROTECTED_ETC = ("ld.so.preload", "ld.so.conf", "ld.so.conf.d", "ld.so.cache", "alternatives")
PATH_DIRS = ("usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin")
# Commands a verifier's run resolves through PATH: shadowing one decides the verdict.
TOOLCHAIN_COMMANDS = ("bash", "sh", "dash", "env", "pytest", "py.test", "uv", "uvx", "pip", "pip3")
# Files pytest reads from a test's ancestors (/tests and /) and modules Python loads at start.
PYTEST_CONFIG = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "setup.py")
PYTHON_HOOKS = ("sitecustomize.py", "usercustomize.py")
TEST_RUNNER_PACKAGES = ("pytest", "_pytest", "pluggy", "py.py", "pytest.py", "iniconfig")
VERIFIER_ONLY = ("tests", "logs/verifier")


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


def toolchain_target(rel: str, *, workdir: str, image_has: bool) -> bool:
    """Is the sandbox path `rel` (relative to /) one the verifier's run depends on? (pure)

    `image_has`: the image shipped a file at this path (a change to it is a modification).
    """
    parts = rel.split("/")
    name = parts[-1]
    if any(rel == p or rel.startswith(p + "/") for p in VERIFIER_ONLY):
        return True
    if len(parts) == 1 and (name in PYTEST_CONFIG or name == "conftest.py"):
        return True
    if parts[0] == "etc" and len(parts) >= 2:
        if parts[1] in PROTECTED_ETC or parts[1].startswith("python3"):
            return True
    parent = "/".join(parts[:-1])
    if parent in PATH_DIRS and (name in TOOLCHAIN_COMMANDS or name.startswith("python")):
        return True
    for i, p in enumerate(parts[:-1]):
        if p in ("site-packages", "dist-packages") and i + 1 < len(parts):
            top = parts[i + 1]
            if i + 2 == len(parts) and (top in PYTHON_HOOKS or top.endswith(".pth")):
                return True
            if top in TEST_RUNNER_PACKAGES or top.startswith(("pytest", "_pytest", "pluggy")):
                return True
    if parts[0] == "usr" and len(parts) > 3 and parts[1] == "lib" and parts[2].startswith("python"):
        if image_has:  # the standard library as shipped, modified
            return True
    wd = workdir.strip("/")
    if wd and rel.startswith(wd + "/"):  # `python -m pytest` puts the workdir on sys.path
        first = rel[len(wd) + 1 :].split("/")[0]
        if first in (*TEST_RUNNER_PACKAGES, *PYTHON_HOOKS):
            return True
    return False


def tamper_scan(upper: Path, image: Path, *, workdir: str) -> list[str]:
    """Absolute sandbox paths the agent wrote (created, changed or deleted) that the verifier's
    run depends on. `upper` is the agent's writable layer, `image` the image's own view (both
    as this process sees them)."""
    found = []
    for rel, st in _walk(upper):
        if stat.S_ISDIR(st.st_mode):
            continue  # a directory alone changes nothing; its files are visited
        image_has = _is_whiteout(st) or os.path.lexists(image / rel)
        if toolchain_target(rel, workdir=workdir, image_has=image_has):
            found.append("/" + rel)
        elif rel.endswith("entry_points.txt") and ".dist-info/" in rel:
            try:
                if b"pytest11" in (upper / rel).read_bytes()[:65536]:
                    found.append("/" + rel)
            except OSError:
                pass
    return sorted(found)


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
