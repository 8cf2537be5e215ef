"""Trial work on Ray against the local thread pool, on simulated nodes of this machine.

    python benchmarks/scale.py [--trials 24] [--slots 2] [--reps 3] [--nodes 1 2 3]

1. overhead: the same trivial sandbox trial (a real `run_trial`, oracle agent, one assertion,
   warm image cache) through `LocalExecutor(slots)` and through `RayExecutor` on a 1-node
   cluster offering `slots` sandbox slots; batches alternate local/Ray `reps` times (the
   machine is shared) and the median seconds per trial of each is compared (goal <= +10%);
2. throughput: the same trials, trials/min with 1, 2, 3 worker nodes of `slots` slots each
   (a head without slots for the driver), beside a local pool with as many threads. Simulated
   nodes share this machine's cores: more nodes means more trials in flight, not more cores,
   so this measures the placement machinery, not a real cluster's speed-up;
3. recovery: a batch of 2-second sleep trials on 2 nodes; one node is killed once its trials
   have started; reported: seconds from the kill until its last lost trial restarted on the
   survivor (detection + re-placement; health checks every 500 ms, 3 misses) and the batch's
   extra wall time against the same batch without a loss. Asserts that every trial is
   recorded exactly once.

Ray starts its workers at nice 15; the trials here run at `--niceness` (default 0, the local
pool's priority) so that both compete equally with the machine's other load.

Prints a table (and `uptime`: the load the numbers were taken under); asserts nothing else.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster

from executor import ExecutorConfig, LocalExecutor
from executor.cluster import RayExecutor, simulated_cluster
from sandbox import run_trial
from tasks.model import Category, EnvironmentSpec, Limits, Task

NICENESS = [0]  # Ray's workers run at nice 15 unless told (--niceness)
VERIFIER = (
    b"#!/bin/sh\nmkdir -p /logs/verifier\n"
    b"if [ -e /app/done ]; then s=passed; else s=failed; fi\n"
    b'echo \'{"results":{"tool":{"name":"sh"},"tests":[{"name":"done","status":"\'$s\'",'
    b'"duration":0}]}}\' > /logs/verifier/ctrf.json\n'
)


def bench_task() -> Task:
    return Task(
        id="bench-scale",
        name="bench",
        instruction="Create /app/done.\n",
        category=Category.OTHER,
        limits=Limits(agent_timeout_s=10, verifier_timeout_s=10, memory_mb=256),
        environment=EnvironmentSpec(files={"app/input.txt": b"warm layer\n"}),
        solution={"solve.sh": b"#!/bin/sh\ntouch /app/done\n"},
        verifier={"test.sh": VERIFIER},
    )


def sandbox_trial(task: Task) -> float:
    """One real trial; its seconds (raises if the trial did not pass: the numbers would lie)."""
    r = run_trial(task, "oracle")
    if not r.resolved:
        raise RuntimeError(f"bench trial failed: {r.failure_mode} {r.failure_detail[:200]}")
    return r.total_s


def sleepy_trial(marks: str, trial_id: str, seconds: float) -> str:
    node = ray.get_runtime_context().get_node_id()
    Path(marks, f"{trial_id}.{node}.{time.time():.3f}.{uuid.uuid4().hex[:6]}").touch()
    time.sleep(seconds)
    return trial_id


def noop() -> None:
    return None


INSIDE: list[float] = []  # seconds each sandbox trial reported for itself (run_trial's total_s)


def batch(submit: Callable[..., Future[Any]], n: int, *args: Any) -> float:
    """Wall seconds for `n` trials submitted at once."""
    run = uuid.uuid4().hex[:8]
    t0 = time.perf_counter()
    futures = [submit(f"{run}-{i}", *args) for i in range(n)]
    for f in futures:
        out = f.result()
        if isinstance(out, float):
            INSIDE.append(out)
    return time.perf_counter() - t0


def cluster(head_slots: float, workers: list[float]) -> tuple[Cluster, list[Any]]:
    return simulated_cluster(head_slots, workers, system_config={"worker_niceness": NICENESS[0]})


def close(c: Cluster) -> None:
    ray.shutdown()
    c.shutdown()


def overhead(task: Task, trials: int, slots: int, reps: int) -> dict[str, float]:
    c, _ = cluster(slots, [])
    try:
        ray_ex = RayExecutor(ExecutorConfig(address="auto"))
        batch(lambda tid, t: ray_ex.submit(tid, sandbox_trial, t), 2 * slots, task)  # workers up
        local_s, ray_s, local_in, ray_in = [], [], [], []
        with LocalExecutor(workers=slots) as local:
            for _ in range(reps):
                INSIDE.clear()
                local_s.append(
                    batch(lambda tid, t: local.submit(tid, sandbox_trial, t), trials, task)
                )
                local_in += INSIDE
                INSIDE.clear()
                ray_s.append(
                    batch(lambda tid, t: ray_ex.submit(tid, sandbox_trial, t), trials, task)
                )
                ray_in += INSIDE
        n = 100  # Ray's own cost per trial: no-op trials one after another
        t0 = time.perf_counter()
        for i in range(n):
            ray_ex.submit(f"noop-{i}", noop).result()
        dispatch = (time.perf_counter() - t0) / n
        ray_ex.shutdown()
    finally:
        close(c)
    lo, ry = statistics.median(local_s) / trials, statistics.median(ray_s) / trials
    return {"local_s": lo, "ray_s": ry, "overhead": ry / lo - 1.0,
            "local_all": min(local_s) / trials, "ray_all": min(ray_s) / trials,
            "dispatch": dispatch, "local_in": statistics.median(local_in),
            "ray_in": statistics.median(ray_in)}  # fmt: skip


def local_throughput(task: Task, trials: int, threads: int) -> float:
    with LocalExecutor(workers=threads) as ex:
        batch(lambda tid, t: ex.submit(tid, sandbox_trial, t), threads, task)
        wall = batch(lambda tid, t: ex.submit(tid, sandbox_trial, t), trials, task)
    return 60.0 * trials / wall


def throughput(task: Task, trials: int, slots: int, nodes: int) -> float:
    c, _ = cluster(0, [slots] * nodes)
    try:
        ex = RayExecutor(ExecutorConfig(address="auto"))
        batch(lambda tid, t: ex.submit(tid, sandbox_trial, t), nodes * slots, task)
        wall = batch(lambda tid, t: ex.submit(tid, sandbox_trial, t), trials, task)
        ex.shutdown()
    finally:
        close(c)
    return 60.0 * trials / wall


def recovery(slots: int) -> dict[str, float]:
    n, seconds = 4 * slots, 2.0
    c, (a, b) = cluster(0, [slots, slots])
    try:
        with tempfile.TemporaryDirectory() as marks:
            ex = RayExecutor(ExecutorConfig(address="auto"))
            batch(lambda tid, *args: ex.submit(tid, sleepy_trial, *args), 2 * slots, marks, "w", 0)
            base = batch(lambda tid, *a_: ex.submit(tid, sleepy_trial, marks, tid, seconds), n)
            for p in Path(marks).iterdir():
                p.unlink()
            ids = [f"lost-{i}" for i in range(n)]
            t0 = time.perf_counter()
            futures = {ex.submit(t, sleepy_trial, marks, t, seconds): t for t in ids}
            while not any(b.node_id in p.name for p in Path(marks).iterdir()):
                time.sleep(0.05)
            time.sleep(0.3)  # let both of its slots start
            killed_at = time.time()
            c.remove_node(b, allow_graceful=False)
            results = [f.result(120) for f in futures]
            wall = time.perf_counter() - t0
            starts: dict[str, list[tuple[float, str]]] = {}
            for p in Path(marks).iterdir():
                tid, node, sec, ms, _ = p.name.split(".")
                starts.setdefault(tid, []).append((float(f"{sec}.{ms}"), node))
            ex.shutdown()
    finally:
        close(c)
    if sorted(results) != sorted(ids):
        raise RuntimeError(f"trials lost or counted twice: {sorted(results)}")
    lost = [t for t, s in starts.items() if any(node == b.node_id for _, node in s)]
    restarted = [max(ts for ts, node in starts[t] if node == a.node_id) for t in lost]
    return {"lost": len(lost), "recover_s": max(restarted) - killed_at, "extra_s": wall - base,
            "base_s": base}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=24, help="trials per batch")
    ap.add_argument("--slots", type=int, default=2, help="sandbox slots per node")
    ap.add_argument("--reps", type=int, default=3, help="alternating local/Ray batches")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--niceness", type=int, default=0, help="Ray workers' nice (Ray's own: 15)")
    args = ap.parse_args()
    NICENESS[0] = args.niceness
    task = bench_task()
    sandbox_trial(task)  # warm the image cache once
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {os.cpu_count()} cores; Ray workers at nice {args.niceness}; before: {load}")
    o = overhead(task, args.trials, args.slots, args.reps)
    print("\n| measure | value |\n|---|---|")
    how = f"{args.slots} slots, median of {args.reps} batches of {args.trials}"
    print(f"| local pool, s/trial ({how}) | {o['local_s']:.3f} |")
    print(f"| Ray 1 node, s/trial ({how}) | {o['ray_s']:.3f} |")
    print(f"| Ray overhead at 1 node (goal <= +10%) | {100 * o['overhead']:+.1f}% |")
    print(f"| best batch: local / Ray, s/trial | {o['local_all']:.3f} / {o['ray_all']:.3f} |")
    print(f"| median trial's own run_trial seconds: local / Ray | {o['local_in']:.3f} / "
          f"{o['ray_in']:.3f} |")  # fmt: skip
    print(f"| Ray round trip of a no-op trial, ms (100 in sequence) | {1e3 * o['dispatch']:.1f} |")
    for k in args.nodes:
        tpm = throughput(task, args.trials, args.slots, k)
        same = local_throughput(task, args.trials, k * args.slots)
        print(f"| trials/min, {k} simulated node(s) x {args.slots} slots (local pool of "
              f"{k * args.slots} threads) | {tpm:.0f} ({same:.0f}) |")  # fmt: skip
    r = recovery(args.slots)
    print(f"| node loss: trials re-run elsewhere | {r['lost']:.0f} |")
    print(f"| node loss: kill -> last lost trial restarted, s | {r['recover_s']:.1f} |")
    print(f"| node loss: extra batch wall, s (batch without loss {r['base_s']:.1f} s) | "
          f"{r['extra_s']:.1f} |")  # fmt: skip
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"\nafter: {load}")


if __name__ == "__main__":
    main()
