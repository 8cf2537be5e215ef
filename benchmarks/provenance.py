"""What a benchmark row was measured with: the versions of the libraries that decide its
numbers, the lock (constraints.txt) the environment was installed from and whether it still
matches it, and the commit. Every benchmark that writes result rows adds this to each row
(`with_environment`), so a row can be rebuilt under the same versions (`make install`
installs the lock) or told apart from one built under others.

Regression: the committed learning rows did not say which transformers built their SFT
checkpoint; a rebuild under another version moved an arm from 40.7% to 20.7% resolved.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "constraints.txt"
# What decides the figures: the numerics of training and inference, and the store's engine.
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "duckdb", "pydantic")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return "-".join(name.lower().replace("_", "-").replace(".", "-").split("-"))


def locked_versions(text: str) -> dict[str, str]:
    """{canonical name: version} of a constraints file's `name==version` lines. Raises
    ValueError naming the line for anything else that is not a comment."""
    pins: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip() or ";" in line:
            raise ValueError(f"constraints.txt line {n}: not a `name==version` pin: {raw!r}")
        pins[canonical(name.strip())] = version.strip()
    return pins


def same_version(installed: str, locked: str) -> bool:
    """Equal, ignoring a local label the lock leaves out (torch 2.13.0+cpu is 2.13.0)."""
    return installed == locked or ("+" not in locked and installed.split("+")[0] == locked)


def lock_mismatches(lock: Path = LOCK) -> list[str]:
    """`name installed != locked` for each locked distribution installed at another version
    (empty: this environment is the lock's, as far as it is installed)."""
    out = []
    for name, locked in sorted(locked_versions(lock.read_text()).items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if not same_version(installed, locked):
            out.append(f"{name} {installed} != {locked}")
    return out


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "-"
    return head + ("-dirty" if dirty else "")


@functools.cache
def environment() -> dict[str, Any]:
    """This process's measuring environment (computed once)."""
    lock = LOCK.read_bytes() if LOCK.is_file() else b""
    return {
        "python": platform.python_version(),
        **{name: _version(name) for name in LIBRARIES},
        "lock": hashlib.sha256(lock).hexdigest()[:12] if lock else "-",
        "lock_mismatches": lock_mismatches() if lock else ["no constraints.txt"],
        "commit": _commit(),
    }


def with_environment(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its measuring environment under `environment` (a row that has one keeps
    it: a cached row was measured when it was written, not now)."""
    return row if "environment" in row else {**row, "environment": environment()}
