"""A real sandbox trial through RayExecutor on a 1-node cluster gives the LocalExecutor's row;
the machinery's failures surface as `TrialLost`, the callable's own as its exception."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import wait
from pathlib import Path

import pytest

from executor import ExecutorConfig, LocalExecutor, TrialLost
from sandbox import run_trial
from tests.factories import make_task

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray")
from executor.cluster import RayExecutor  # noqa: E402 - needs ray

# What differs between two runs of the same trial by construction.
VOLATILE = {"trial_id", "started_at", "environment_s", "agent_s", "verifier_s", "total_s"}


def worker_pid(hold_s: float) -> int:
    time.sleep(hold_s)  # long enough that the two trials of a batch hold both slots
    return os.getpid()


def test_workers_stay_up_between_batches(one_node_cluster):
    """A node keeps a worker per slot through a pause longer than Ray's idle-kill delay
    (~1 s): the next batch runs in the same processes instead of starting new ones."""
    ex = RayExecutor(ExecutorConfig(address="auto"))

    def batch(tag: str) -> set[int]:
        futs = [ex.submit(f"{tag}-{i}", worker_pid, 0.5) for i in range(2)]
        return {f.result(60) for f in futs}

    batch("warm")
    before = batch("before")
    time.sleep(3.0)
    after = batch("after")
    assert len(before) == 2, before
    assert after == before, (before, after)


def worker_processes(raylet_pid: int) -> set[int]:
    """The raylet's Python worker processes now: its children titled `ray::...` (IDLE or the
    task running), not its agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`)."""
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == raylet_pid and cmd.startswith(b"ray::") and b"Agent" not in cmd:
            found.add(int(entry.name))
    return found


def test_a_backlogged_batch_after_a_pause_starts_no_worker(one_node_cluster):
    """Trials queued behind busy slots run on the node's workers already up: Ray starts no
    process for them. (With `num_workers_soft_limit` = slots, Ray prestarted up to that many
    extra workers whenever a batch had a backlog, gave them no trial and killed them after
    1 s idle: a Python start each, ~0.5 CPU s, at every batch; docs/scale.md "Measured".)"""
    raylet_pid = one_node_cluster.head_node.all_processes["raylet"][0].process.pid
    ex = RayExecutor(ExecutorConfig(address="auto"))

    def batch(tag: str, n: int) -> set[int]:
        futs = [ex.submit(f"{tag}-{i}", worker_pid, 0.15) for i in range(n)]
        return {f.result(60) for f in futs}

    ran = batch("warm", 2)
    time.sleep(2.5)  # idle past Ray's idle-worker kill delay (1 s)
    up = worker_processes(raylet_pid)
    seen: set[int] = set(up)
    done = threading.Event()

    def watch() -> None:  # every worker process that exists at any moment of the batch
        while not done.is_set():
            seen.update(worker_processes(raylet_pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        ran |= batch("backlog", 12)  # 12 trials on 2 slots: a backlog of 10
        time.sleep(0.5)
    finally:
        done.set()
        watcher.join()
    ex.shutdown()
    assert ran <= up, (ran, up)
    assert seen == up, f"workers started during the batch: {sorted(seen - up)}"


def test_the_docs_start_real_nodes_with_the_simulated_nodes_worker_pool():
    """docs/scale.md's `ray start` lines carry `worker_pool_config` as `RAY_<name>=<value>`
    (what the simulated clusters set), so a real node pools its workers the same way."""
    from pathlib import Path

    from executor.cluster import worker_pool_config

    docs = (Path(__file__).parents[2] / "docs" / "scale.md").read_text()
    for name, value in worker_pool_config().items():
        assert f"RAY_{name}={value}" in docs, name


def refuse(x: int) -> int:
    raise ValueError(f"bad input {x}")


@pytest.mark.sandbox
def test_a_sandbox_trial_on_ray_gives_the_local_row(one_node_cluster):
    solved, unsolved = make_task("ray-tiny"), make_task("ray-tiny-2", solve="true\n")
    with LocalExecutor(workers=2) as local:
        here = [local.submit(f"l{i}", run_trial, t, "oracle").result() for i, t in
                enumerate((solved, unsolved))]  # fmt: skip
    ex = RayExecutor(ExecutorConfig(address="auto"))
    there = [
        ex.submit(f"r{i}", run_trial, t, "oracle", affinity=t.environment_hash).result(120)
        for i, t in enumerate((solved, unsolved))
    ]
    ex.shutdown()
    assert [(r.passed, r.total) for r in there] == [(1, 1), (0, 1)]
    assert [r.model_dump(exclude=VOLATILE) for r in there] == [
        r.model_dump(exclude=VOLATILE) for r in here
    ]
    assert ex.affinity[solved.environment_hash] == ex.placements["r0"]


def poison(marks: str) -> None:
    """A poison trial: starts a real sandbox (lease file, cgroups), notes its id, and kills
    its worker process, as a node's OOM killer or a crash would, leaving the sandbox's
    remains behind."""
    from sandbox.backends import get_backend

    sandbox = get_backend("local").open(make_task("poison"))
    Path(marks, sandbox.id).touch()  # type: ignore[attr-defined]
    os._exit(1)


@pytest.mark.sandbox
def test_a_poison_trial_runs_retries_plus_one_times_and_its_remains_are_reclaimed(
    one_node_cluster, tmp_path
):
    """One retry layer: `retries=1` runs a trial whose worker always dies twice, then
    `TrialLost` (Ray's `max_retries` nested in the driver's relaunches ran it 4 times, 16 at
    the default 3). Each death left a sandbox lease and cgroups on the node; the executor
    reclaims them there (`sandbox.gc.collect_garbage`) without anyone running `t1 sandbox
    gc`. The callable's own exception is its result, never retried."""
    from sandbox.cgroups import SandboxCgroup
    from sandbox.gc import collect_garbage
    from sandbox.local import RUN_DIR

    ex = RayExecutor(ExecutorConfig(address="auto", retries=1), reclaim=collect_garbage)
    with pytest.raises(TrialLost, match="lost after 2 attempt") as info:
        ex.submit("crash", poison, str(tmp_path)).result(180)
    assert info.value.trial_id == "crash" and ex.attempts["crash"] == 2
    time.sleep(3.0)  # a nested retry would have started by now
    sandboxes = sorted(p.name for p in tmp_path.iterdir())
    assert len(sandboxes) == 2, sandboxes  # executions = retries + 1

    def remains() -> list[str]:
        return [
            sid
            for sid in sandboxes
            if (RUN_DIR / f"{sid}.json").exists()
            or any(SandboxCgroup(sid).path(c).exists() for c in ("memory", "pids", "cpu"))
        ]

    deadline = time.monotonic() + 60
    while remains() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert remains() == [], f"not reclaimed: {remains()}; reclaim runs: {ex.reclaimed}"
    # (which gc pass removed each is not asserted: another `t1 sandbox gc` on this machine
    # may have run meanwhile; the executor's ran on the node after the deaths)
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert ex.reclaimed and {node for node, _ in ex.reclaimed} <= alive, ex.reclaimed
    with pytest.raises(ValueError, match="bad input 3"):
        ex.submit("refuse", refuse, 3).result(60)
    assert ex.attempts["refuse"] == 1  # the callable's own failure is not retried
    ex.shutdown()


def test_cancel_stops_a_running_trial(one_node_cluster):
    ex = RayExecutor(ExecutorConfig(address="auto"))
    fut = ex.submit("long", time.sleep, 60)
    time.sleep(1.0)
    t0 = time.monotonic()
    assert ex.cancel("long") and fut.cancelled()
    assert wait([fut], timeout=5).done == {fut}  # waiters see a cancelled trial as done
    assert not ex.cancel("long")
    quick = ex.submit("after", pow, 2, 5)  # the slot is free again
    assert quick.result(30) == 32 and time.monotonic() - t0 < 30
    ex.shutdown()


def test_forget_drops_a_settled_trial_but_keeps_its_node_count(one_node_cluster):
    ex = RayExecutor(ExecutorConfig(address="auto"))
    assert ex.submit("p", pow, 3, 2).result(60) == 9
    node = ex.placements["p"]
    ex.forget("p")
    assert ex.result_of("p") is None and "p" not in ex.placements and "p" not in ex.attempts
    assert ex.ran_on[node] == 1
    assert ex.submit("p", pow, 3, 3).result(60) == 27  # forgotten: a new trial
    assert ex.ran_on[node] == 2
    ex.shutdown()


def test_a_cluster_without_enough_slots_is_refused_by_name(one_node_cluster):
    with pytest.raises(ValueError, match="t1_sandbox_slot"):
        RayExecutor(ExecutorConfig(address="auto", slots_per_trial=99))


@pytest.mark.sandbox
def test_a_synthesis_round_on_ray_records_the_local_rows(one_node_cluster, tmp_path):
    """`SynthConfig.executor` pointed at a cluster: the round's validations run as Ray trials
    and the warehouse holds the same candidates, verdicts and pool as the local run."""
    from synthesis.rounds import SynthConfig, run_synthesis
    from synthesis.sampler import Caps
    from synthesis.validate import ValidationConfig
    from warehouse.snapshot import Snapshot

    def run(where: str) -> list[tuple]:
        cfg = SynthConfig(
            rounds=1,
            per_round=1,
            seed=3,
            seed_ids=("ds-sensor-summary-stats",),
            caps=Caps(children_per_parent=2, root_share=1.0, category_share=1.0, family_share=1.0),
            validation=ValidationConfig(reruns=1, max_repairs=0),
            executor=ExecutorConfig(address=where),
        )
        run_synthesis(cfg, tmp_path / where)
        with Snapshot.open(tmp_path / where) as snap:
            rows = snap.rows("SELECT slot, candidate_hash, status, reason FROM synth_candidates")
        return sorted((r["slot"], r["candidate_hash"], r["status"], r["reason"]) for r in rows)

    local = run("local")
    assert len(local) == 1
    assert run("auto") == local


def standin_validate(task, parent, vcfg, stage):
    """A stand-in for `validate` (no sandbox): accepts the candidate, with the parent's
    profile, and says which Ray job and worker process ran it."""
    from synthesis.validate import Validation, Verdict

    job = ray.get_runtime_context().get_job_id()
    profile = parent.profile.model_copy(update={"task_hash": task.content_hash})
    return Validation(
        task=task, verdict=Verdict.ACCEPTED, profile=profile, detail=f"standin {job} {os.getpid()}"
    )


@pytest.mark.sandbox
def test_a_campaign_keeps_one_connection_and_its_workers_across_rounds(one_node_cluster, tmp_path):
    """Three rounds on the cluster are one Ray job: every candidate (built and validated on
    the node, not in the driver) ran in one of the node's two slot workers, which live
    through the whole campaign (each round used to connect and disconnect: a new job, new
    workers and a forgotten image affinity every round)."""
    from synthesis.rounds import SynthConfig, run_synthesis
    from synthesis.sampler import Caps
    from synthesis.validate import ValidationConfig
    from warehouse.snapshot import Snapshot

    cfg = SynthConfig(
        rounds=3,
        per_round=2,
        seed=3,
        seed_ids=("ds-sensor-summary-stats",),
        caps=Caps(children_per_parent=4, root_share=1.0, category_share=1.0, family_share=1.0),
        validation=ValidationConfig(reruns=1, max_repairs=0),
        executor=ExecutorConfig(address=one_node_cluster.address),
    )
    ray.shutdown()  # the campaign connects by itself, as `t1 synth` does
    try:
        stats = run_synthesis(cfg, tmp_path / "wh", validator=standin_validate)
    finally:
        if not ray.is_initialized():
            ray.init(address=one_node_cluster.address, log_to_driver=False)
    assert [s.round for s in stats] == [1, 2, 3]
    with Snapshot.open(tmp_path / "wh", with_lineage=False) as snap:
        rows = snap.rows("SELECT round, detail FROM synth_candidates")
    ran = [
        (r["round"], *r["detail"].split()[1:]) for r in rows if r["detail"].startswith("standin")
    ]
    assert {r for r, _, _ in ran} == {1, 2, 3}, rows
    assert len({job for _, job, _ in ran}) == 1, ran  # one connection for the campaign
    assert len({pid for _, _, pid in ran}) <= 2, ran  # the node's 2 slot workers, kept
