"""Cached environment layers for the local backend, like Docker's layer cache.

A task's environment (app files, required tools, setup steps) is built once into a directory
keyed by the task's environment hash; later trials mount it read-only under their own
writable layer. Building is serialized per key with a file lock, and the finished layer is
published by an atomic rename, so a killed build never leaves a half layer behind.
"""

from __future__ import annotations

import fcntl
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from sandbox.base import EnvironmentBuildError
from sandbox.local import STATE_DIR, LocalSandbox
from tasks.environment import SETUP_DIR, app_files, setup_files
from tasks.model import Task


def needs_layer(task: Task) -> bool:
    env = task.environment
    return bool(env.setup or env.files or env.requires)


def missing_tools_command(tools: list[str]) -> str:
    """Shell command printing each tool of `tools` that is not on PATH, one per line."""
    quoted = " ".join(shlex.quote(t) for t in tools)
    return f'for t in {quoted}; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'


def ensure_env_layer(task: Task, hide: list[str] | None = None) -> Path | None:
    """Path of the task's built environment layer (building it if needed), or None."""
    if not needs_layer(task):
        return None
    root = STATE_DIR / "env"
    root.mkdir(parents=True, exist_ok=True)
    key = task.environment_hash
    final = root / key
    if (final / "layer").is_dir():
        return final / "layer"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "layer").is_dir():
            return final / "layer"
        build = Path(tempfile.mkdtemp(dir=root, prefix=f"{key}.build-"))
        try:
            _build(task, build, hide)
            (build / "up").rename(build / "layer")
            shutil.rmtree(build / "work", ignore_errors=True)
            build.rename(final)
        finally:
            if build.exists():
                shutil.rmtree(build, ignore_errors=True)
    return final / "layer"


def _build(task: Task, build: Path, hide: list[str] | None) -> None:
    env = task.environment
    limits = task.limits.model_copy(update={"disk_mb": max(task.limits.disk_mb, 64)})
    sb = LocalSandbox(
        limits, allow_network=env.allow_network, workdir=env.workdir, upper_dir=build, hide=hide
    )
    deadline = time.monotonic() + task.limits.build_timeout_s
    sb.start()
    try:
        if env.requires:
            r = sb.exec(missing_tools_command(env.requires), timeout_s=30, cwd="/")
            missing = r.stdout.split()
            if missing:
                raise EnvironmentBuildError(
                    f"task {task.id}: required tools missing in the sandbox: {', '.join(missing)}"
                    " (install them on the host, e.g. apt-get install ...)"
                )
        sb.upload(app_files(task), env.workdir)
        sb.upload(setup_files(task), SETUP_DIR)
        for i, step in enumerate(env.setup):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EnvironmentBuildError(f"task {task.id}: environment build timed out")
            r = sb.exec(step, timeout_s=remaining, cwd=env.workdir)
            if not r.ok:
                why = "timed out" if r.timed_out else f"exit {r.exit_code}"
                tail = (r.stderr or r.stdout)[-800:]
                raise EnvironmentBuildError(
                    f"task {task.id}: setup step {i + 1} ({step!r}) failed ({why}): {tail}"
                )
        sb.exec(f"rm -rf {SETUP_DIR}", timeout_s=30, cwd="/")
    finally:
        sb.stop()
