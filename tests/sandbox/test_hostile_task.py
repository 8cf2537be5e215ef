"""The task author as adversary, against the host (issue 32, item 3): every host-side path a
task's files steer is bounded, on both backends.

A task ships a Dockerfile, archives, links and a task.toml; the runner builds, extracts,
binds and downloads on this host because of them. Each attack here was run on the code
before its defence (docs/sandbox.md, "Task-author attacks", has the table with what each did
then); what must hold now: nothing outside the sandbox's own state is read, written or grown
beyond the task's limits, and the task's own failure is the task's (a build error), never a
crash of the runner. Probes are grouped so that each property costs one sandbox per backend.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import CommandAgent, get_backend, run_trial
from tasks.model import Task
from tasks.results import FailureMode
from tests.factories import make_task

pytestmark = pytest.mark.sandbox

SECRET = "host-secret-7d41b2"


@pytest.fixture
def canary() -> Iterator[Path]:
    """A host directory no sandbox may touch, as open as /tmp (mode 1777: any host uid may
    write in it, the sandboxes' unprivileged one included) with a world-readable secret."""
    d = Path(f"/tmp/t1-canary-{uuid.uuid4().hex[:10]}")
    d.mkdir()
    d.chmod(0o1777)
    (d / "secret").write_text(SECRET)
    (d / "secret").chmod(0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def snapshot(d: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under `d` (and `d` itself): mode, size, content of files."""
    out = {".": (os.lstat(d).st_mode, 0, b"")}
    for p in sorted(d.rglob("*")):
        st = os.lstat(p)
        body = p.read_bytes() if stat.S_ISREG(st.st_mode) else b""
        out[str(p.relative_to(d))] = (st.st_mode, st.st_size, body)
    return out


def with_verifier(task: Task, script: str) -> Task:
    """`task` whose verifier runs `script` (bash) and reports one passed assertion."""
    body = (
        "#!/bin/bash\n" + script + "\n"
        'printf \'{"results":{"tool":{"name":"sh"},"tests":'
        '[{"name":"ran","status":"passed"}]}}\' > /logs/verifier/ctrf.json\n'
    )
    return task.model_copy(update={"verifier": {"test.sh": body.encode()}})


# -- trusted_paths ------------------------------------------------------------------------------
def test_trusted_paths_never_bind_a_host_directory(backend, canary):
    """Two trusted paths that lead out of the agent's root: `/../../..<canary>` (with enough
    `..` to climb out of any engine's storage; a task made in code, past the task model's
    check: `model_copy` does not validate), and a normalized
    `/srv/<name>` that the agent turns into this host's directory with a link in a component
    (`/srv -> /tmp`). The verifier reads and writes through both: the docker backend bound
    the host directory read-write both times before (the secret read, a file written); now
    the descriptors opened without links (sandbox.trusted) bind nothing of the host."""
    before = snapshot(canary)
    paths = ["/.." * 30 + str(canary), f"/srv/{canary.name}"]
    script = "".join(
        f"cat {p}/secret 2>/dev/null; echo pwned > {p}/new 2>/dev/null; " for p in paths
    )
    task = with_verifier(make_task("hostile-trusted"), script)
    task = task.model_copy(update={"trusted_paths": paths})
    r = run_trial(task, CommandAgent("rm -rf /srv; ln -s /tmp /srv; touch /app/done"), backend)
    assert snapshot(canary) == before
    assert SECRET not in r.verifier_output, r.verifier_output
    assert not r.failure_mode.infrastructure, (r.failure_mode, r.failure_detail)


# -- builds on the task's disk ------------------------------------------------------------------
FILL_DOCKERFILES = {
    # one step allocating 1.5 GB, for a 256 MB task: past any disk the step gets
    "one-step": (256, "FROM t1-forge/base:bookworm\nRUN fallocate -l 1500M /big\n"),
    # steps that each fit, together past a 64 MB task's disk (the build's budget); data, not
    # zeros (a layer's zeros are stored as holes and cost the host nothing)
    "many-steps": (
        64,
        "FROM t1-forge/base:bookworm\n"
        + "".join(f"RUN yes t1-fill | head -c 40M > /big{i}\n" for i in range(2)),
    ),
}


@pytest.mark.parametrize("fill", sorted(FILL_DOCKERFILES))
def test_a_build_cannot_fill_the_host(backend, fill):
    """A 256 MB task whose Dockerfile allocates 1.5 GB in one RUN, and a 64 MB one writing
    80 MB over two: the build is the task's error and the host's layer cache never holds
    it. Before: both built (the 1.5 GB went into the host's layer cache, local and docker
    alike)."""
    disk_mb, dockerfile = FILL_DOCKERFILES[fill]
    limits = make_task().limits.model_copy(update={"disk_mb": disk_mb})
    task = make_task(f"hostile-fill-{fill}", limits=limits)
    env = task.environment.model_copy(update={"files": {"Dockerfile": dockerfile.encode()}})
    r = run_trial(task.model_copy(update={"environment": env}), "nop", backend)
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR, (r.failure_mode, r.failure_detail)
    assert "disk" in r.failure_detail, r.failure_detail


# -- downloads ------------------------------------------------------------------------------------
def _rss_kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith(field + ":")).split()[1])


def test_a_huge_file_downloaded_costs_the_runner_no_more_than_the_cap(backend):
    """A directory holding a 512 MiB (sparse) file, downloaded as the runner downloads the
    report directory and agent paths (the same code for a file): the runner's peak RSS
    (VmHWM, reset before) grows by about twice the 64 MiB cap. Before, on docker: the whole
    archive read into memory, +1,025 MiB (the issue measured 1,076 MB for a 512 MiB file in
    the report directory); local was capped already."""
    sb = get_backend(backend).open(make_task("huge-download"))
    try:
        sb.exec("mkdir -p /tmp/d && truncate -s 512M /tmp/d/big", timeout_s=30)
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
        before = _rss_kb("VmRSS")
        got = sb.download("/tmp/d")
        growth_mib = (_rss_kb("VmHWM") - before) / 1024
    finally:
        sb.stop()
    assert set(got) == {"big"} and 0 < len(got["big"]) <= 64 << 20, {
        k: len(v) for k, v in got.items()
    }
    assert growth_mib < 200, f"peak RSS grew by {growth_mib:.0f} MiB"
