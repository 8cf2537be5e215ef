"""Per-trial overhead of the sandbox backends with a warm image cache, phase by phase:
start (image lookup + sandbox up), session (the agent's shell starts), command (`true` typed
into it), verify (a trivial verifier in its own view), reclaim; p50/p95 over N trials.

    python benchmarks/sandbox_overhead.py [--trials 100] [--backend local|docker|all]

Where no Docker engine answers, the docker column runs against a private Podman service
started for the run (sandbox.podman). Target: local p50 of the whole trial <= 50 ms; the
session start is also shown on its own. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from sandbox.backends import get_backend
from sandbox.base import SandboxUnavailable
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


def run(backend_name: str, trials: int) -> dict[str, list[float]]:
    backend = get_backend(backend_name)
    task = bench_task()
    backend.open(task).stop()  # warm the environment cache
    names = ("start", "session", "command", "verify", "reclaim", "total")
    phases: dict[str, list[float]] = {k: [] for k in names}
    for i in range(trials):
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
        for k, v in zip(names, laps, strict=True):
            phases[k].append(v * 1000)
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--backend", default="all", choices=["local", "docker", "all"])
    args = ap.parse_args()
    names = ["local", "docker"] if args.backend == "all" else [args.backend]
    print(
        f"{'backend':8} {'phase':8} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}  (n={args.trials})"
    )
    for name in names:
        try:
            with docker_engine() if name == "docker" else contextlib.nullcontext():
                phases = run(name, args.trials)
        except SandboxUnavailable as e:
            print(f"{name:8} unavailable: {e}")
            continue
        for phase, xs in phases.items():
            print(
                f"{name:8} {phase:8} {statistics.median(xs):8.1f} {pct(xs, 0.95):8.1f} "
                f"{statistics.fmean(xs):8.1f}"
            )
        p50 = statistics.median(phases["total"])
        if name == "local":
            verdict = "meets" if p50 <= 50 else "misses"
            print(f"local per-trial p50 {p50:.1f} ms {verdict} the 50 ms target")


if __name__ == "__main__":
    main()
