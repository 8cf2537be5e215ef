"""Per-trial overhead of the sandbox backends with a warm image cache, phase by phase:
start (image lookup + sandbox up), session (the agent's shell starts), command (`true` typed
into it), verify (a trivial verifier, judged in a fresh sandbox of the image: sandbox.judge),
reclaim; p50/p95 over N trials, wall time and CPU time.

    python benchmarks/sandbox_overhead.py [--trials 100] [--backend local|docker|all]

CPU time (`cpu` rows) is what every process of a trial used: the benchmark moves itself into
a cgroup v1 cpuacct group (or a v2 group) of its own before it starts anything, so the runner,
the holders, the helpers and every sandbox process count (their memory/pids/cpu groups are
other hierarchies); the docker column counts the runner and a private Podman service it
starts, not the containers' own processes. Wall time depends on what else the machine runs;
CPU time much less. Where no Docker engine answers, the docker column runs against a private
Podman service started for the run (sandbox.podman). Targets: local whole-trial p50 <= 60 ms
idle, CPU <= 40 ms. Prints a table and the load average before and after; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from pathlib import Path

from sandbox.backends import get_backend
from sandbox.base import SandboxUnavailable
from sandbox.cgroups import CGROUP_ROOT, cpu_time_ns
from sandbox.podman import docker_engine
from sandbox.trial import verify
from tasks.model import Category, EnvironmentSpec, Limits, Task
from tasks.results import TrialResult

TRIVIAL_VERIFIER = (
    b"#!/bin/sh\n"
    b'echo \'{"results":{"tool":{"name":"sh"},"tests":[{"name":"ok","status":"passed",'
    b'"duration":0}]}}\' > /logs/verifier/ctrf.json\n'
)


def bench_task() -> Task:
    return Task(
        id="bench-overhead",
        name="bench",
        instruction="nothing\n",
        category=Category.OTHER,
        limits=Limits(agent_timeout_s=10, verifier_timeout_s=10, memory_mb=256),
        environment=EnvironmentSpec(files={"app/input.txt": b"warm layer\n"}),
        solution={"solve.sh": b"#!/bin/sh\ntrue\n"},
        verifier={"test.sh": TRIVIAL_VERIFIER},
    )


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def cpu_group() -> str | None:
    """This process in a cpuacct group of its own (v1, else v2); its name, or None."""
    name = f"t1-forge-bench-{os.getpid()}"
    for top in (CGROUP_ROOT / "cpuacct", CGROUP_ROOT):
        group = top / name
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            continue
        if cpu_time_ns(name) is not None:
            return name
    return None


def run(backend_name: str, trials: int, group: str | None) -> dict[str, list[float]]:
    backend = get_backend(backend_name)
    task = bench_task()
    backend.open(task).stop()  # warm the environment cache
    names = ("start", "session", "command", "verify", "reclaim", "total", "cpu")
    phases: dict[str, list[float]] = {k: [] for k in names}
    for i in range(trials):
        cpu0 = cpu_time_ns(group) if group else None
        t0 = time.perf_counter()
        sb = backend.open(task)
        t1 = time.perf_counter()
        shell = sb.session()
        t2 = time.perf_counter()
        r = shell.run("true", timeout_s=10)
        t3 = time.perf_counter()
        result = TrialResult(
            trial_id=str(i), task_id=task.id, task_hash="-", agent="bench", backend=backend_name
        )
        verify(sb, task, result)
        t4 = time.perf_counter()
        sb.stop()
        t5 = time.perf_counter()
        if r.exit_code != 0 or result.passed != 1:
            raise RuntimeError(f"trial {i} misbehaved: {r} {result.report}")
        laps = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)
        for k, v in zip(names, laps, strict=False):
            phases[k].append(v * 1000)
        cpu1 = cpu_time_ns(group) if group else None
        if cpu0 is not None and cpu1 is not None:
            phases["cpu"].append((cpu1 - cpu0) / 1e6)
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--backend", default="all", choices=["local", "docker", "all"])
    args = ap.parse_args()
    names = ["local", "docker"] if args.backend == "all" else [args.backend]
    group = cpu_group()
    print(f"load average before: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(
        f"{'backend':8} {'phase':8} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}  (n={args.trials})"
    )
    for name in names:
        try:
            with docker_engine() if name == "docker" else contextlib.nullcontext():
                phases = run(name, args.trials, group)
        except SandboxUnavailable as e:
            print(f"{name:8} unavailable: {e}")
            continue
        for phase, xs in phases.items():
            if not xs:
                continue
            print(
                f"{name:8} {phase:8} {statistics.median(xs):8.1f} {pct(xs, 0.95):8.1f} "
                f"{statistics.fmean(xs):8.1f}"
            )
        if name == "local":
            p50 = statistics.median(phases["total"])
            cpu = statistics.median(phases["cpu"]) if phases["cpu"] else float("nan")
            print(
                f"local per-trial p50 {p50:.1f} ms wall (target 60 ms idle), "
                f"{cpu:.1f} ms CPU (target 40 ms)"
            )
    print(f"load average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if group is not None:  # back to the top group; the empty one removed
        for top in (CGROUP_ROOT / "cpuacct", CGROUP_ROOT):
            with contextlib.suppress(OSError):
                (top / "cgroup.procs").write_text(str(os.getpid()))
                (top / group).rmdir()


if __name__ == "__main__":
    main()
