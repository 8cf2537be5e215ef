"""Content hashes of files inside a sandbox: what the audit's instrumented agents compare
before and after a change (a perturbed input, a mutant solution)."""

from __future__ import annotations

import shlex

from sandbox.base import Sandbox


def hash_files(sandbox: Sandbox, paths: list[str]) -> dict[str, str | None]:
    """sha256 of each path in the sandbox (None: absent or not a regular file)."""
    if not paths:
        return {}
    script = "\n".join(
        f"if [ -f {shlex.quote(p)} ]; then sha256sum < {shlex.quote(p)} | cut -c1-64; "
        "else echo -; fi"
        for p in paths
    )
    out = sandbox.exec(script, timeout_s=60, cwd="/").stdout.split()
    got: dict[str, str | None] = {}
    for i, p in enumerate(paths):
        h = out[i] if i < len(out) else "-"
        got[p] = None if h == "-" else h
    return got
