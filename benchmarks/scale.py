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

4. `--project`: instead of 1-3, the CPU seconds of the work itself, measured here on real
   trials (a cpuacct cgroup holding this process and every sandbox process it starts: what a
   node's cores spend, much less sensitive to the machine's load than wall time), projected
   to the paper's scale:
   - a synthesis round of `--candidates` candidates of real seed tasks (`run_synthesis`, no
     LLM, the default validation: oracle reruns, nop, extension-only, parent, scripted hacks),
     after profiling its seeds: CPU seconds per validated candidate and per recorded trial;
   - a rollout trial's sandbox side on real seed tasks: a nop trial (environment, verifier,
     reclaim) and the same trial typing `--commands` light commands into its session, so
     CPU = fixed + turns x per-command (the engine's tokens are on GPUs, not counted here);
   then 38k candidates and steps of 256 rollouts on N nodes (`--node-cores`, `--nodes-at-scale`,
   `--utilisation`, `--turns`, and `--extra-trial-cpu`: what a heavier task's trial adds to
   the light seeds measured): every assumption is printed beside the numbers.

Ray starts its workers at nice 15; the trials here run at `--niceness` (default 0, the local
pool's priority) so that both compete equally with the machine's other load.

Where cgroup v1 cpuacct is writable (root), 1. also reads the CPU seconds of every batch per
role (`RoleAccount`: this process with the local pool's sandboxes; Ray's workers with theirs;
the raylet; the GCS; Ray's agents and monitors) and counts the worker processes the raylet
started during the Ray batches. `--ray-config JSON` lays Ray system config over the
simulated nodes' own (`executor.cluster.worker_pool_config` and the health checks), to
measure another setting against the executor's.

Prints a table (and `uptime`: the load the numbers were taken under); asserts nothing else.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
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
RAY_CONFIG: dict[str, Any] = {}  # --ray-config: Ray system config over the executor's
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
    return simulated_cluster(
        head_slots, workers, system_config={"worker_niceness": NICENESS[0], **RAY_CONFIG}
    )


def close(c: Cluster) -> None:
    ray.shutdown()
    c.shutdown()


# Ray's processes by what their command line says (workers retitle themselves `ray::...`).
RAY_ROLES = (
    ("gcs_server", "gcs"),
    ("/raylet", "raylet"),
    ("DashboardAgent", "agents"),
    ("RuntimeEnvAgent", "agents"),
    ("dashboard/", "agents"),
    ("log_monitor.py", "agents"),
    ("autoscaler/_private/monitor.py", "agents"),
    ("ray::", "workers"),
)
ROLE_ORDER = ("driver", "workers", "raylet", "gcs", "agents")


def ray_role(pid: int) -> str | None:
    try:
        cmd = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return None
    return next((role for key, role in RAY_ROLES if key in cmd), None)


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


class RoleAccount:
    """CPU seconds per role through cpuacct groups of this run: `driver` (this process and
    every process it starts: the local pool's trials and their sandboxes), `workers` (Ray's
    worker processes and their sandboxes: the Ray trials), `raylet` (and any worker it
    starts after `place`), `gcs`, `agents` (dashboard agent, runtime-env agent, dashboard
    head, log monitor, autoscaler monitor). None where cgroup v1 cpuacct is not writable."""

    def __init__(self) -> None:
        self.root = CPUACCT / f"t1-scale-roles-{os.getpid()}"

    @classmethod
    def open(cls) -> RoleAccount | None:
        if not os.access(CPUACCT / "cgroup.procs", os.W_OK):
            return None
        acct = cls()
        for role in ROLE_ORDER:
            (acct.root / role).mkdir(parents=True, exist_ok=True)
        acct.join("driver", os.getpid())
        return acct

    def join(self, role: str, pid: int) -> None:
        try:
            (self.root / role / "cgroup.procs").write_text(str(pid))
        except OSError:
            pass  # exited meanwhile

    def place(self) -> None:
        """Move every Ray process under this one into its role's group."""
        for pid in descendants(os.getpid()):
            role = ray_role(pid)
            if role is not None:
                self.join(role, pid)

    def usage(self) -> dict[str, float]:
        return {r: int((self.root / r / "cpuacct.usage").read_text()) / 1e9 for r in ROLE_ORDER}

    def close(self) -> None:
        """Back to the root group (called after the cluster is shut down), groups removed."""
        for role in ROLE_ORDER:
            for pid in (self.root / role / "cgroup.procs").read_text().split():
                try:
                    (CPUACCT / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
        for role in ROLE_ORDER:
            for _ in range(50):
                try:
                    (self.root / role).rmdir()
                    break
                except OSError:  # a process still exiting
                    time.sleep(0.1)
        try:
            self.root.rmdir()
        except OSError:
            pass


def worker_starts(c: Cluster) -> int:
    """Worker processes the head node's raylet has started so far (its log says each)."""
    log = Path(c.head_node.get_logs_dir_path()) / "raylet.out"
    return log.read_text(errors="replace").count("Started worker process")


def cpu_delta(before: dict[str, float], after: dict[str, float], trials: int) -> dict[str, float]:
    """CPU milliseconds per trial, per role."""
    return {r: 1e3 * (after[r] - before[r]) / trials for r in after}


def overhead(task: Task, trials: int, slots: int, reps: int) -> dict[str, Any]:
    c, _ = cluster(slots, [])
    acct = RoleAccount.open()
    try:
        ray_ex = RayExecutor(ExecutorConfig(address="auto"))
        batch(lambda tid, t: ray_ex.submit(tid, sandbox_trial, t), 2 * slots, task)  # workers up
        if acct is not None:
            acct.place()
        local_s, ray_s, local_in, ray_in = [], [], [], []
        local_cpu: list[dict[str, float]] = []
        ray_cpu: list[dict[str, float]] = []
        started = 0
        zero = dict.fromkeys(ROLE_ORDER, 0.0)
        with LocalExecutor(workers=slots) as local:
            for _ in range(reps):
                INSIDE.clear()
                u0 = acct.usage() if acct else zero
                local_s.append(
                    batch(lambda tid, t: local.submit(tid, sandbox_trial, t), trials, task)
                )
                local_cpu.append(cpu_delta(u0, acct.usage() if acct else zero, trials))
                local_in += INSIDE
                INSIDE.clear()
                u0, w0 = acct.usage() if acct else zero, worker_starts(c)
                ray_s.append(
                    batch(lambda tid, t: ray_ex.submit(tid, sandbox_trial, t), trials, task)
                )
                ray_cpu.append(cpu_delta(u0, acct.usage() if acct else zero, trials))
                started += worker_starts(c) - w0
                ray_in += INSIDE
        n = 100  # Ray's own cost per trial: no-op trials one after another
        t0 = time.perf_counter()
        for i in range(n):
            ray_ex.submit(f"noop-{i}", noop).result()
        dispatch = (time.perf_counter() - t0) / n
        ray_ex.shutdown()
    finally:
        close(c)
        if acct is not None:
            acct.close()
    lo, ry = statistics.median(local_s) / trials, statistics.median(ray_s) / trials

    def median_cpu(rows: list[dict[str, float]]) -> dict[str, float]:
        return {r: statistics.median(row[r] for row in rows) for r in ROLE_ORDER}

    return {"local_s": lo, "ray_s": ry, "overhead": ry / lo - 1.0,
            "local_all": min(local_s) / trials, "ray_all": min(ray_s) / trials,
            "dispatch": dispatch, "local_in": statistics.median(local_in),
            "ray_in": statistics.median(ray_in), "accounted": acct is not None,
            "local_cpu": median_cpu(local_cpu), "ray_cpu": median_cpu(ray_cpu),
            "local_cpu_total": statistics.median(sum(r.values()) for r in local_cpu),
            "ray_cpu_total": statistics.median(sum(r.values()) for r in ray_cpu),
            "worker_starts": started}  # fmt: skip


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


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ACCOUNT: list[Path] = []  # this run's own cpuacct group, once joined


def join_cpu_account() -> None:
    """Move this process into a cpuacct group of its own: every process it starts after
    (the sandboxes' helpers, shells, verifiers) is counted there. `getrusage` is not enough:
    it misses the sandboxes' processes (a 0.65 s busy loop in a trial read as 0.01 s)."""
    if not (CPUACCT / "cgroup.procs").exists():
        raise SystemExit("--project needs the cgroup v1 cpuacct controller (root)")
    group = CPUACCT / f"t1-scale-bench-{os.getpid()}"
    group.mkdir(exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    ACCOUNT.append(group)


def leave_cpu_account() -> None:
    for group in ACCOUNT:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()
    ACCOUNT.clear()


def cpu_seconds() -> float:
    """CPU seconds (user + system) this process and everything it started have used since it
    joined its cpuacct group: the driver's own work and every sandbox process."""
    return int((ACCOUNT[0] / "cpuacct.usage").read_text()) / 1e9


class TurnsAgent:
    """A scripted agent typing `commands` light commands into the trial's one shell session,
    one at a time like an agent's turns (a floor for what a turn costs a sandbox node)."""

    name = "turns"

    def __init__(self, commands: int) -> None:
        self.commands = commands

    def run(self, sandbox: Any, task: Task, deadline: float) -> Any:
        from sandbox import AgentOutcome

        r = None
        for i in range(self.commands):
            r = sandbox.session().run(
                f"ls -la /app > /dev/null; echo turn {i} | wc -c", timeout_s=30
            )
        return AgentOutcome.from_exec(r) if r is not None else AgentOutcome(exit_code=0)


SEED_IDS = ("ds-sensor-summary-stats", "vc-gitignore-untrack", "sa-dedupe-hardlinks")


def measure_synthesis(candidates: int) -> dict[str, float]:
    """CPU and wall seconds per validated candidate of one local synthesis round."""
    from synthesis import ledger
    from synthesis.rounds import SynthConfig, run_synthesis, seed_parents
    from synthesis.sampler import Caps
    from warehouse import Store

    cfg = SynthConfig(
        rounds=1, per_round=candidates, seed=5, campaign="scale-bench", seed_ids=SEED_IDS,
        caps=Caps(children_per_parent=candidates, root_share=1.0, category_share=1.0,
                  family_share=1.0),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(Path(tmp) / "wh", create=True)
        seed_parents(store, cfg)  # profiling is once per seed, not per candidate
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        (stats,) = run_synthesis(cfg, store)
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - t0
        counts = ledger.validation_trial_counts(store, cfg.campaign)
    trials = sum(n for modes in counts.values() for n in modes.values())
    return {"candidates": stats.candidates, "accepted": stats.accepted, "trials": trials,
            "cpu_per_candidate": cpu / stats.candidates, "wall_per_candidate": wall /
            stats.candidates, "cpu_per_trial": cpu / max(1, trials),
            "workers": cfg.workers}  # fmt: skip


def measure_rollout_side(commands: int, reps: int) -> dict[str, float]:
    """Sandbox CPU of a rollout trial without its engine: fixed (nop) and per command."""
    from tasks.corpus import load_seeds

    tasks = [t for t in load_seeds() if t.id in SEED_IDS]
    for t in tasks:  # warm each environment's image once
        run_trial(t, "nop")
    fixed, with_turns = [], []
    for _ in range(reps):
        for t in tasks:
            c0 = cpu_seconds()
            r = run_trial(t, "nop")
            fixed.append(cpu_seconds() - c0)
            c0 = cpu_seconds()
            r2 = run_trial(t, TurnsAgent(commands))
            with_turns.append(cpu_seconds() - c0)
            for x in (r, r2):
                if x.failure_mode.infrastructure:
                    raise RuntimeError(f"{t.id}: {x.failure_mode} {x.failure_detail[:200]}")
    f, w = statistics.median(fixed), statistics.median(with_turns)
    return {"fixed": f, "per_command": max(0.0, w - f) / commands, "trials": len(fixed)}


def project(args: argparse.Namespace) -> None:
    """Measure (`measure_synthesis`, `measure_rollout_side`) and print the projection."""
    s = measure_synthesis(args.candidates)
    r = measure_rollout_side(args.commands, args.reps)
    accept = s["accepted"] / s["candidates"] if s["candidates"] else float("nan")
    u, cores = args.utilisation, args.node_cores
    print("\n| measured (this machine) | value |\n|---|---|")
    print(
        f"| synthesis round: candidates / accepted / recorded validation trials | "
        f"{s['candidates']:.0f} / {s['accepted']:.0f} / {s['trials']:.0f} |"
    )
    print(f"| CPU s per validated candidate (driver + sandboxes) | {s['cpu_per_candidate']:.1f} |")
    print(
        f"| wall s per candidate ({s['workers']:.0f} validations at once) | "
        f"{s['wall_per_candidate']:.1f} |"
    )
    print(f"| CPU s per recorded validation trial | {s['cpu_per_trial']:.2f} |")
    print(
        f"| rollout trial, sandbox CPU s without commands (nop, median of {r['trials']:.0f}) | "
        f"{r['fixed']:.2f} |"
    )
    print(f"| rollout trial, sandbox CPU s per light command (of {args.commands}) | "
          f"{r['per_command']:.3f} |")  # fmt: skip
    per_candidate = s["trials"] / s["candidates"]
    print(f"\nAssumptions: nodes of {cores} cores, one sandbox slot per core, {100 * u:.0f}% of "
          "the cores busy with trials, warm image caches. A candidate runs the trials it ran "
          f"here ({per_candidate:.0f} recorded; the default validation) and each costs what it "
          "cost here plus `extra` CPU s: the seeds measured do little work (a few file "
          "operations, a shell verifier), the paper's tasks build and test software, so the "
          "`extra 0` rows are floors and the others say what heavier tasks cost. 38k = "
          "validated candidates (RST-38k counts accepted tasks: at this run's acceptance of "
          f"{100 * accept:.0f}%, {38_000 / accept if accept else float('nan'):,.0f} "
          "candidates).")  # fmt: skip
    head = " | ".join(f"wall h, {n} node(s)" for n in args.nodes_at_scale)
    print(f"\n| 38k candidates | CPU s each | CPU hours | {head} |")
    print("|---" * (3 + len(args.nodes_at_scale)) + "|")
    for extra in args.extra_trial_cpu:
        each = s["cpu_per_candidate"] + per_candidate * extra
        total_h = 38_000 * each / 3600
        walls = " | ".join(f"{total_h / (n * cores * u):.2f}" for n in args.nodes_at_scale)
        print(f"| extra {extra:g} CPU s per trial | {each:.1f} | {total_h:,.0f} | {walls} |")
    slots = math.ceil(args.batch * (1 + args.oversample))
    print(
        f"\nA step launches {slots} rollouts ({args.batch} x (1 + {args.oversample})), each "
        f"holding a slot (a core) for its whole trial: {math.ceil(slots / (cores * u))} "
        "node(s) hold them at once, whatever they compute. Their sandbox CPU, beside the "
        f"engine's GPUs, per {args.step_minutes:.0f}-min step (the engine sets the step time):"
    )
    print("\n| turns per trial | extra CPU s per trial | sandbox CPU s per trial | CPU s per step "
          "| cores busy on average |\n|---|---|---|---|---|")  # fmt: skip
    for turns in args.turns:
        for extra in args.extra_trial_cpu:
            per = r["fixed"] + turns * r["per_command"] + extra
            step = slots * per
            print(f"| {turns} | {extra:g} | {per:.1f} | {step:,.0f} | "
                  f"{step / (60 * args.step_minutes):.1f} |")  # fmt: skip


# ---- 5. `--campaign`: the paper-size run simulated end to end ---------------------------


def _burn(cpu_s: float) -> None:
    """Spend about `cpu_s` of CPU (a busy loop: the stand-in's share of a trial's work)."""
    end = time.process_time() + cpu_s
    x = 0
    while time.process_time() < end:
        x += 1


def _standin_trials(task: Task, n: int, assertions: int, ok_for: Callable[[int], bool]) -> list:
    from tasks.results import AssertionResult, AssertionStatus, TrialResult, VerifierReport

    out = []
    for j in range(n):
        ok = ok_for(j)
        report = VerifierReport(
            assertions=[
                AssertionResult(
                    name=f"test_outputs::test_{k}",
                    status=AssertionStatus.PASSED if ok or k % 2 else AssertionStatus.FAILED,
                    message="" if ok or k % 2 else "AssertionError: " + "m" * 100,
                    duration_s=0.01,
                )
                for k in range(assertions)
            ]
        )
        out.append(
            TrialResult(trial_id=f"standin:{task.content_hash[:20]}:{j}:{uuid.uuid4().hex[:6]}",
                        task_id=task.id, task_hash=task.content_hash,
                        agent=("oracle", "nop", "parent", "hack:stub")[j % 4], backend="standin",
                        agent_s=0.5, verifier_s=0.3, total_s=1.0, report=report)
        )  # fmt: skip
    return out


class StandinValidator:
    """`validate` replaced by a calibrated stand-in (a `synthesis.rounds.Validator`): for
    each of `trials` trials it spends `trial_cpu_s` of CPU and sleeps `trial_s`, then returns
    `trials` TrialResults of `assertions` assertions each (the real per-candidate shape) and
    accepts a share `accept` of candidates (by hash). It leaves a mark per start in `marks`
    (node, worker pid, time) for the scheduling and recovery figures."""

    def __init__(self, marks: str, trials: int, assertions: int, trial_s: float,
                 trial_cpu_s: float, accept: float) -> None:  # fmt: skip
        self.marks, self.trials, self.assertions = marks, trials, assertions
        self.trial_s, self.trial_cpu_s, self.accept = trial_s, trial_cpu_s, accept

    def __call__(self, task: Task, parent: Any, vcfg: Any, stage: Any) -> Any:
        from synthesis.validate import Validation, Verdict

        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
        t0 = time.time()
        mark = f"{task.content_hash[:16]}_{node}_{os.getpid()}_{t0:.3f}"
        Path(self.marks, f"s_{mark}").touch()
        for _ in range(self.trials):
            _burn(self.trial_cpu_s)
            time.sleep(self.trial_s)
        accepted = int(task.content_hash[:8], 16) % 1000 < self.accept * 1000
        trials = _standin_trials(task, self.trials, self.assertions, lambda j: j % 4 == 0)
        Path(self.marks, f"e_{mark}_{time.time():.3f}").touch()
        return Validation(
            task=task,
            verdict=Verdict.ACCEPTED if accepted else Verdict.NOT_LOAD_BEARING,
            detail="" if accepted else "stand-in: discarded",
            trials=trials,
            profile=parent.profile.model_copy(update={"task_hash": task.content_hash}),
            sandbox_s=self.trials * (self.trial_s + self.trial_cpu_s),
        )


class StandinRunner:
    """The audit's trial runner (`audit.selection.Runner`) replaced the same way: each trial
    spends `trial_cpu_s` and sleeps `trial_s`; the reference solution passes (plain and
    under the perturbed conditions: a robust task), nop, the scripted hacks and the
    solution's mutants fail every assertion."""

    def __init__(self, trial_s: float, trial_cpu_s: float, assertions: int) -> None:
        self.trial_s, self.trial_cpu_s, self.assertions = trial_s, trial_cpu_s, assertions

    def __call__(self, task: Task, agent: Any, *args: Any, **kwargs: Any) -> Any:
        from tasks.results import AssertionStatus

        _burn(self.trial_cpu_s)
        time.sleep(self.trial_s)
        name = agent if isinstance(agent, str) else str(getattr(agent, "name", ""))
        passes = name == "oracle" or name.startswith("rerun")
        trial = _standin_trials(task, 1, self.assertions, lambda _: passes)[0]
        if not passes:  # nothing passes, not half (`_standin_trials` fails the even ones)
            for a in trial.report.assertions:
                a.status, a.message = AssertionStatus.FAILED, "AssertionError: stand-in"
        return trial


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def campaign(args: argparse.Namespace) -> dict[str, Any]:
    """Synthesis -> audit -> pools of `--rounds` x `--per-round` candidates on a simulated
    cluster (a head without slots and `--campaign-nodes` nodes of `--campaign-slots` slots),
    trials replaced by the stand-ins above; one node killed once `--kill-at` of the
    candidates are committed. Returns the figures (also printed)."""
    from audit.pools import record_t1
    from audit.rubric import load_rubric
    from audit.selection import SelectionConfig, run_selection
    from executor import ExecutorConfig
    from synthesis import ledger
    from synthesis.rounds import SynthConfig, run_synthesis
    from synthesis.sampler import Caps
    from synthesis.validate import ValidationConfig
    from warehouse import Store, rst_members
    from warehouse.snapshot import Snapshot

    scale = args.time_scale
    trial_s, trial_cpu = args.trial_wall_s * scale, args.trial_cpu_s * scale
    c, nodes = simulated_cluster(0, [args.campaign_slots] * args.campaign_nodes)
    address = c.address
    ray.shutdown()  # the campaign connects by itself, as `t1 synth` does on a cluster
    out: dict[str, Any] = {"nodes": args.campaign_nodes, "slots": args.campaign_slots,
                           "trial_s": trial_s, "trial_cpu_s": trial_cpu}  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="t1-scale-campaign-"))
    marks = tmp / "marks"
    marks.mkdir()
    store = Store.open(tmp / "wh", create=True)
    commits: list[tuple[float, float]] = []  # (wall, cpu) seconds per commit
    append = store.append

    def timed_append(tables: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return append(tables)
        finally:
            commits.append((time.perf_counter() - t0, time.process_time() - c0))

    store.append = timed_append  # type: ignore[method-assign]
    cfg = SynthConfig(
        rounds=args.rounds, per_round=args.per_round, seed=11, campaign="scale-sim",
        seed_ids=tuple(args.seed_ids.split(",")),
        caps=Caps(children_per_parent=args.per_round, root_share=1.0, category_share=1.0,
                  family_share=1.0),
        validation=ValidationConfig(reruns=1, max_repairs=0),
        executor=ExecutorConfig(address=address, no_slot_timeout_s=120),
    )  # fmt: skip
    validator = StandinValidator(str(marks), args.trials_per_candidate, args.assertions,
                                 trial_s, trial_cpu, args.accept)  # fmt: skip
    total = args.rounds * args.per_round
    killed: dict[str, Any] = {}
    seen = [0]

    marginal: list[tuple[float, float, int]] = []  # (driver CPU, wall, committed) per commit

    def kill_mid_work(victim: Any) -> None:
        """Kill `victim` once it runs candidates (a start mark without an end mark)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            names = [p.name for p in marks.iterdir()]
            ended = {n[2:].rsplit("_", 1)[0] for n in names if n.startswith("e_")}
            busy = [n for n in names if n.startswith("s_") and victim.node_id in n
                    and n[2:] not in ended]  # fmt: skip
            if busy:
                killed.update(at=time.time(), node=victim.node_id, after=seen[0],
                              busy=len(busy))  # fmt: skip
                c.remove_node(victim, allow_graceful=False)
                return
            time.sleep(0.05)

    def on_recorded(row: Any) -> None:
        seen[0] += 1
        marginal.append((time.process_time(), time.perf_counter(), seen[0]))
        if not killed and args.kill_at and seen[0] >= args.kill_at * total:
            killed["pending"] = True
            threading.Thread(target=kill_mid_work, args=(nodes[-1],), daemon=True).start()

    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        stats = run_synthesis(cfg, store, on_recorded=on_recorded, validator=validator)
        synth_wall, synth_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        out.update(synth_wall_s=synth_wall, synth_driver_cpu_s=synth_cpu)
        # from the first candidate committed to the last: the driver's cost per candidate
        # without its start (connecting, profiling the seeds' on the cluster)
        (c_a, w_a, n_a), (c_b, w_b, n_b) = marginal[0], marginal[-1]
        out.update(steady_driver_cpu_ms=1e3 * (c_b - c_a) / max(1, n_b - n_a),
                   steady_wall_s=w_b - w_a, steady_candidates=n_b - n_a,
                   start_wall_s=w_a - t0, start_driver_cpu_s=c_a - cpu0)  # fmt: skip
        with Snapshot.open(store, with_lineage=False) as snap:
            n_rows = snap.sql("SELECT count(*) FROM synth_candidates").fetchone()[0]  # type: ignore[index]
            trials = snap.sql("SELECT count(*), count(DISTINCT trial_id) FROM trials").fetchone()
            listed = snap.sql("SELECT sum(len(trial_ids)) FROM synth_candidates").fetchone()[0]  # type: ignore[index]
        candidates = sum(s.candidates for s in stats)
        out.update(candidates=candidates, accepted=sum(s.accepted for s in stats),
                   candidate_rows=n_rows, trials=trials, trials_listed=listed,
                   commits=len(commits))  # fmt: skip
        synth_commits = list(commits)
        # audit -> pools, the same cluster, one executor for the run
        accepted = ledger.pool_parents(store, cfg.campaign, args.rounds + 1)
        tasks = [p.task for p in accepted][: args.audit_tasks]
        runner = StandinRunner(trial_s, trial_cpu, args.assertions)
        scfg = SelectionConfig(rubric=load_rubric("t1"), task_workers=2,
                               executor=ExecutorConfig(address=address))  # fmt: skip
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = run_selection(store, tasks, scfg, runner=runner)
        pv, members = record_t1(store, result.version, size=len(tasks), only=result.hashes())
        out["rst_members"] = len(rst_members(store))
        out.update(audit_tasks=len(tasks), audit_wall_s=time.perf_counter() - t0,
                   audit_driver_cpu_s=time.process_time() - cpu0, t1_members=len(members),
                   audit_commits=len(commits) - len(synth_commits))  # fmt: skip
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
    # scheduling and recovery from the stand-in's marks: s_<key>_<node>_<pid>_<start>,
    # e_<key>_<node>_<pid>_<start>_<end>
    starts: dict[str, list[tuple[float, str]]] = {}  # candidate -> (start, node)
    by_worker: dict[str, list[tuple[float, float]]] = {}  # pid -> (start, end)
    finished: set[tuple[str, str, float]] = set()  # (candidate, node, start)
    for p in marks.iterdir():
        kind, key, node, pid, *times = p.name.split("_")
        if kind == "s":
            starts.setdefault(key, []).append((float(times[0]), node))
        else:
            by_worker.setdefault(pid, []).append((float(times[0]), float(times[1])))
            finished.add((key, node, float(times[0])))
    gaps = []
    for runs in by_worker.values():
        runs.sort()
        gaps += [b[0] - a[1] for a, b in zip(runs, runs[1:], strict=False) if b[0] >= a[1]]
    out.update(slot_gap_p50_s=_pct(gaps, 0.5), slot_gap_p95_s=_pct(gaps, 0.95),
               workers=len(by_worker))  # fmt: skip
    if "node" in killed:
        dead = killed["node"]
        lost = [r for k, r in starts.items()
                if any(n == dead and (k, n, t) not in finished for t, n in r)]  # fmt: skip
        rerun = [max(t for t, n in r if n != dead) for r in lost
                 if any(n != dead and t > killed["at"] for t, n in r)]  # fmt: skip
        out.update(killed_after=killed["after"], busy_at_kill=killed["busy"],
                   lost_on_node=len(lost), rerun=len(rerun),
                   recover_s=(max(rerun) - killed["at"]) if rerun else float("nan"))  # fmt: skip
    walls = [w for w, _ in synth_commits]
    cpus = [c_ for _, c_ in synth_commits]
    out.update(commit_p50_s=_pct(walls, 0.5), commit_p95_s=_pct(walls, 0.95),
               commit_max_s=max(walls, default=float("nan")), commit_cpu_p50_s=_pct(cpus, 0.5),
               commit_cpu_p95_s=_pct(cpus, 0.95), commit_total_s=sum(walls))  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def print_campaign(o: dict[str, Any], args: argparse.Namespace) -> None:
    n = o["candidates"]
    print("\n| measure (simulated campaign) | value |\n|---|---|")
    print(f"| cluster | head without slots + {o['nodes']} nodes x {o['slots']} slots "
          f"(ray.cluster_utils, this machine) |")  # fmt: skip
    print(
        f"| stand-in trial | {o['trial_cpu_s'] * 1e3:.0f} ms CPU + {o['trial_s'] * 1e3:.0f} ms "
        f"sleep, {args.trials_per_candidate} per candidate, {args.assertions} assertions |"
    )
    print(f"| candidates (assignments) / accepted / candidate rows | {n:,} / {o['accepted']:,} / "
          f"{o['candidate_rows']:,} |")  # fmt: skip
    print(f"| trial rows / distinct / named by candidates | {o['trials'][0]:,} / "
          f"{o['trials'][1]:,} / {o['trials_listed']:,} |")  # fmt: skip
    print(f"| synthesis wall s | {o['synth_wall_s']:.0f} |")
    print(f"| driver CPU s, synthesis (per candidate) | {o['synth_driver_cpu_s']:.1f} "
          f"({1e3 * o['synth_driver_cpu_s'] / n:.1f} ms) |")  # fmt: skip
    print(f"| of which the start (connect, seeds profiled on the cluster): CPU s / wall s | "
          f"{o['start_driver_cpu_s']:.1f} / {o['start_wall_s']:.0f} |")  # fmt: skip
    print(
        f"| driver CPU per candidate, first commit to last ({o['steady_candidates']:,} "
        f"candidates in {o['steady_wall_s']:.0f} s) | {o['steady_driver_cpu_ms']:.1f} ms |"
    )
    print(f"| warehouse commits (synthesis) / candidates per commit | {o['commits']:,} / "
          f"{n / max(1, o['commits']):.1f} |")  # fmt: skip
    print(f"| commit wall p50 / p95 / max s | {o['commit_p50_s']:.3f} / {o['commit_p95_s']:.3f} "
          f"/ {o['commit_max_s']:.3f} |")  # fmt: skip
    print(f"| commit CPU p50 / p95 s | {o['commit_cpu_p50_s']:.3f} / {o['commit_cpu_p95_s']:.3f} |")
    print(f"| a slot's idle gap between two candidates, p50 / p95 s ({o['workers']} workers) "
          f"| {o['slot_gap_p50_s']:.3f} / {o['slot_gap_p95_s']:.3f} |")  # fmt: skip
    if "killed_after" in o:
        print(f"| node killed after commit / candidates running there / lost / re-run "
              f"elsewhere | {o['killed_after']} / {o['busy_at_kill']} / {o['lost_on_node']} / "
              f"{o['rerun']} |")  # fmt: skip
        print(f"| kill -> last lost candidate restarted, s | {o['recover_s']:.1f} |")
    print(
        f"| audit: tasks / wall s / driver CPU s / commits | {o['audit_tasks']} / "
        f"{o['audit_wall_s']:.0f} / {o['audit_driver_cpu_s']:.1f} / {o['audit_commits']} |"
    )
    print(f"| pools: rst / t1 members | {o['rst_members']} / {o['t1_members']} |")


# ---- 6. `--rollout-bytes`: what one step's rollouts ship to the trainer -------------------


def rollout_bytes(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Bytes one rollout trial sends from its node to the trainer (a `training.harness.
    Rollout` as the executor ships it: pickle protocol 5, numpy arrays out of band, as Ray
    serializes), at a 30B-A3B shape: `--moe-layers` x `--top-k` routed experts per token,
    `--trajectory-tokens` tokens in `--turns-per-trajectory` turns (each turn's prompt is the
    whole stream so far, as the TITO harness sends it; its routed experts cover only the new
    positions, `routed_experts_start_len`), per routed-expert dtype."""
    import pickle

    import numpy as np

    from tasks.results import AssertionResult, AssertionStatus, TrialResult, VerifierReport
    from training.engine_protocol import Generation
    from training.harness import AgentTrajectory, Rollout
    from training.tito import TurnRecord

    layers, k, total, turns = (
        args.moe_layers,
        args.top_k,
        args.trajectory_tokens,
        args.trajectory_turns,
    )
    per_turn = total // turns
    out_tokens = per_turn * 3 // 10  # ~30% of each turn is the model's output
    rng = np.random.default_rng(0)
    rows = []
    for dtype in ("int32", "int16", "uint8"):
        gens, stream = [], 0
        for t in range(turns):
            prompt_len = stream + per_turn - out_tokens
            start = max(0, stream - 1) if t else 0
            new = prompt_len + out_tokens - 1 - start
            gens.append(
                TurnRecord(
                    generation=Generation(
                        rid=uuid.uuid4().hex,
                        prompt_ids=rng.integers(0, 151_000, prompt_len).tolist(),
                        output_ids=rng.integers(0, 151_000, out_tokens).tolist(),
                        output_logprobs=(-rng.random(out_tokens)).tolist(),
                        finish="stop",
                        weight_version="v3",
                        routed_experts=rng.integers(0, 128, (new, layers, k)).astype(dtype),
                        routed_experts_start=start,
                    )
                )
            )
            stream = prompt_len + out_tokens
        trial = TrialResult(
            trial_id="r", task_id="t", task_hash="a" * 64, agent="policy", backend="local",
            report=VerifierReport(assertions=[AssertionResult(name=f"test_{i}",
                                  status=AssertionStatus.PASSED) for i in range(8)]),
        )  # fmt: skip
        rollout = Rollout(trial=trial, trajectory=AgentTrajectory(task_id="t", turns=gens))
        t0 = time.perf_counter()
        buffers: list[pickle.PickleBuffer] = []
        inband = pickle.dumps(rollout, protocol=5, buffer_callback=buffers.append)
        dump_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pickle.loads(inband, buffers=buffers)
        load_s = time.perf_counter() - t0
        experts = sum(
            g.generation.routed_experts.nbytes
            for g in gens
            if g.generation.routed_experts is not None
        )
        prompts = len(pickle.dumps([g.generation.prompt_ids for g in gens], protocol=5))
        size = len(inband) + sum(b.raw().nbytes for b in buffers)
        rows.append({"dtype": dtype, "bytes": size, "experts": experts, "prompt_ids": prompts,
                     "tokens": stream, "dump_s": dump_s, "load_s": load_s})  # fmt: skip
    return rows


def print_rollout_bytes(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    step = math.ceil(args.batch * (1 + args.oversample))
    print(f"\nRollout bytes at {args.moe_layers} MoE layers x top-{args.top_k}, "
          f"{rows[0]['tokens']:,}-token trajectories in {args.trajectory_turns} turns; a step "
          f"launches {step} rollouts ({args.batch} x (1 + {args.oversample})):")  # fmt: skip
    print(
        "\n| routed experts dtype | MB per trajectory | of which routed experts | of which "
        "prompt ids | GB per step | s per step at 10 Gbit/s | pickle + unpickle s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        gb = step * r["bytes"] / 1e9
        print(f"| {r['dtype']} | {r['bytes'] / 1e6:.1f} | {r['experts'] / 1e6:.1f} | "
              f"{r['prompt_ids'] / 1e6:.1f} | {gb:.2f} | {8 * gb / 10:.1f} | "
              f"{r['dump_s'] + r['load_s']:.2f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=24, help="trials per batch")
    ap.add_argument("--slots", type=int, default=2, help="sandbox slots per node")
    ap.add_argument("--reps", type=int, default=3, help="alternating local/Ray batches")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--niceness", type=int, default=0, help="Ray workers' nice (Ray's own: 15)")
    ap.add_argument(
        "--ray-config", type=json.loads, default={},
        help="Ray system config (JSON) over the simulated nodes' own, e.g. the worker pool "
        "before the fix: '{\"num_workers_soft_limit\": 2, "
        "\"idle_worker_killing_time_threshold_ms\": 1000}'",
    )  # fmt: skip
    ap.add_argument("--project", action="store_true", help="measure CPU s and project (4.)")
    ap.add_argument("--candidates", type=int, default=6, help="synthesis candidates measured")
    ap.add_argument("--commands", type=int, default=20, help="light commands per turns trial")
    ap.add_argument("--node-cores", type=int, default=64)
    ap.add_argument("--nodes-at-scale", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--utilisation", type=float, default=0.8, help="share of cores in trials")
    ap.add_argument("--turns", type=int, nargs="+", default=[10, 50, 300])
    ap.add_argument("--batch", type=int, default=256, help="rollouts trained on per step")
    ap.add_argument("--oversample", type=float, default=0.25, help="alpha of the scheduler")
    ap.add_argument("--step-minutes", type=float, default=30.0, help="assumed step wall time")
    ap.add_argument(
        "--extra-trial-cpu", type=float, nargs="+", default=[0.0, 10.0, 60.0],
        help="CPU s a heavier task's trial adds (builds, test suites): one row each",
    )  # fmt: skip
    ap.add_argument("--campaign", action="store_true", help="simulate a campaign (5.)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=260)
    ap.add_argument("--campaign-nodes", type=int, default=3)
    ap.add_argument("--campaign-slots", type=int, default=8, help="slots per simulated node")
    ap.add_argument("--seed-ids", default=",".join(SEED_IDS + ("vc-reflog-recover",
                    "sa-access-log-csv-report", "ds-multiple-regression")))  # fmt: skip
    ap.add_argument("--trials-per-candidate", type=int, default=16)
    ap.add_argument("--assertions", type=int, default=8, help="per stand-in trial")
    ap.add_argument("--trial-wall-s", type=float, default=0.8, help="measured, before scaling")
    ap.add_argument("--trial-cpu-s", type=float, default=0.2, help="measured, before scaling")
    ap.add_argument("--time-scale", type=float, default=0.05, help="stand-in trial x this")
    ap.add_argument("--accept", type=float, default=0.4, help="stand-in acceptance share")
    ap.add_argument("--kill-at", type=float, default=0.5, help="share committed; 0: no kill")
    ap.add_argument("--audit-tasks", type=int, default=200, help="accepted tasks audited")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--rollout-bytes", action="store_true", help="rollout transfer (6.)")
    ap.add_argument("--moe-layers", type=int, default=48)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--trajectory-tokens", type=int, default=32_768)
    ap.add_argument("--trajectory-turns", type=int, default=32, help="engine calls per trajectory")
    args = ap.parse_args()
    if args.rollout_bytes or args.campaign:
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"machine: {os.cpu_count()} cores; before: {load}")
        figures: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
        if args.rollout_bytes:
            figures["rollout"] = rows = rollout_bytes(args)
            print_rollout_bytes(rows, args)
        if args.campaign:
            figures["campaign"] = o = campaign(args)
            print_campaign(o, args)
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"\nafter: {load}")
        figures["uptime"] = load
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str) + "\n")
        return
    if args.project:
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"machine: {os.cpu_count()} cores; before: {load}")
        join_cpu_account()
        try:
            project(args)
        finally:
            leave_cpu_account()
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"\nafter: {load}")
        return
    NICENESS[0] = args.niceness
    RAY_CONFIG.update(args.ray_config)
    task = bench_task()
    sandbox_trial(task)  # warm the image cache once
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {os.cpu_count()} cores; Ray workers at nice {args.niceness}; "
          f"Ray config over the executor's: {RAY_CONFIG or 'none'}; before: {load}")  # fmt: skip
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
    print(f"| worker processes Ray started during the {args.reps} Ray batches | "
          f"{o['worker_starts']} |")  # fmt: skip
    if o["accounted"]:
        lc, rc = o["local_cpu"], o["ray_cpu"]
        print(f"| CPU ms per trial, all processes: local / Ray (median batch) | "
              f"{o['local_cpu_total']:.1f} / {o['ray_cpu_total']:.1f} |")  # fmt: skip
        print(f"| CPU ms per trial, the trials (local: this process; Ray: its workers) | "
              f"{lc['driver']:.1f} / {rc['workers']:.1f} |")  # fmt: skip
        print(
            "| CPU ms per trial in Ray batches: "
            + ", ".join(ROLE_ORDER[2:])
            + ", driver | "
            + " / ".join(f"{rc[r]:.1f}" for r in (*ROLE_ORDER[2:], "driver"))
            + " |"
        )
        print(
            "| CPU ms per trial in local batches: "
            + ", ".join(ROLE_ORDER[1:])
            + " (idle) | "
            + " / ".join(f"{lc[r]:.1f}" for r in ROLE_ORDER[1:])
            + " |"
        )
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
