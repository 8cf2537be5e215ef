"""The rollout pool's cluster path without a cluster: what comes back from the executor becomes
a row. A trial the machinery lost is an infrastructure row (never reward), a trial cancelled on
its node is a CANCELLED row, a straggler cancel goes through `Executor.cancel`, and every
settled trial id is forgotten (the campaign's executor lives as long as the run).

`ScriptedExecutor` stands in for the cluster (the executor interface is the boundary the
pool talks to; the real Ray path is tests/executor/test_cluster_campaign.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from executor import TrialLost
from tasks.results import TrialResult
from training.engine_protocol import EngineClient
from training.harness import AgentTrajectory, HarnessConfig, Rollout
from training.rollouts import RolloutPool, plan_jobs
from training.task_families import fileops_task

pytestmark = pytest.mark.torch


def finished(job: Any) -> Rollout:
    """What a node sends back for a trial that ran to its verdict (no assertion passed)."""
    trial = TrialResult(
        trial_id=f"t{job.slot}", task_id=job.task.id, task_hash=job.task.content_hash,
        agent="policy", backend="local",
    )  # fmt: skip
    return Rollout(trial, AgentTrajectory(task_id=job.task.id), sample=job.slot)


class ScriptedExecutor:
    """Settles trial `<pool>:<batch>:<slot>` as `script[slot]` says: 'lost' (TrialLost), 'ok'
    (a finished rollout of its job, once every slot was submitted), 'hold' (never, until
    cancelled). Records submits,
    cancels and forgets."""

    def __init__(self, script: dict[int, str]) -> None:
        self.script = script
        self.futures: dict[str, Future[Any]] = {}
        self.submitted: list[tuple[str, str | None]] = []
        self.cancelled: list[str] = []
        self.forgotten: list[str] = []
        self.lock = threading.Lock()
        self.all_submitted = threading.Event()
        self.urls: dict[str, str] = {}

    def submit(self, trial_id: str, fn: Any, /, *args: Any, affinity: str | None = None):
        fut: Future[Any] = Future()
        with self.lock:
            self.futures[trial_id] = fut
            self.submitted.append((trial_id, affinity))
            self.urls[trial_id] = args[2]  # the engine URL the trial generates at
        what = self.script[int(trial_id.rsplit(":", 1)[1])]
        if what == "lost":
            fut.set_exception(TrialLost(trial_id, 4, "NodeDiedError: gone"))
        elif what == "ok":  # once every trial is on the cluster (a deterministic straggler)
            job = args[0]

            def finish() -> None:
                self.all_submitted.wait(30)
                fut.set_result(finished(job))

            threading.Thread(target=finish, daemon=True).start()
        if len(self.submitted) == len(self.script):
            self.all_submitted.set()
        return fut

    def cancel(self, trial_id: str) -> bool:
        with self.lock:
            self.cancelled.append(trial_id)
            fut = self.futures.get(trial_id)
        if fut is not None and fut.cancel():
            fut.set_running_or_notify_cancel()
        return fut is not None

    def forget(self, trial_id: str) -> None:
        with self.lock:
            self.forgotten.append(trial_id)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def test_lost_and_cancelled_trials_on_a_cluster_are_rows_not_reward(tokenizer):
    tasks = [fileops_task(i, "train", 0) for i in range(3)]
    jobs = plan_jobs(tasks, [0, 1, 2], samples_per_task=1, launch=3, step=0, seed=1)
    client = EngineClient("http://127.0.0.1:9", num_layers=2, top_k=2)  # never called
    pool = RolloutPool(client, tokenizer, workers=3, name="run-x")
    assert pool.remote is None  # local by default: no executor in the way
    remote = ScriptedExecutor({0: "lost", 1: "ok", 2: "hold"})
    pool.remote, pool._remote_fn = remote, object()  # type: ignore[assignment]
    try:
        batch = pool.start(0, jobs, HarnessConfig(), want=1, admission="first_finished")
        batch.result(timeout=30)
        cancelled = batch.cancelled()
    finally:
        pool.close()
    assert [r.sample for r in batch.admitted] == [1]
    (lost,) = batch.infrastructure
    assert lost.sample == 0 and lost.trial.failure_mode == "sandbox_error"
    assert not lost.trial.rewardable and "NodeDiedError" in lost.trial.failure_detail
    (straggler,) = cancelled
    assert straggler.sample == 2 and straggler.trial.failure_mode == "cancelled"
    assert straggler.trial.failure_detail == "cancelled on its node"
    ids = [f"run-x:step0-1:{slot}" for slot in range(3)]
    assert sorted(t for t, _ in remote.submitted) == ids
    assert dict(remote.submitted)[ids[2]] == tasks[2].environment_hash  # image affinity
    assert remote.cancelled == [ids[2]] and sorted(remote.forgotten) == ids


def test_without_a_router_each_trial_generates_on_the_server_its_id_picks(tokenizer):
    """Several servers, no router: the pool gives each trial the server `for_trial` picks (a
    stable hash of the trial id), so all of a trial's turns reach one server's prefix cache;
    the trials spread over both servers."""
    tasks = [fileops_task(i, "train", 0) for i in range(6)]
    jobs = plan_jobs(tasks, list(range(6)), samples_per_task=1, launch=6, step=0, seed=1)
    servers = ["http://127.0.0.1:9", "http://127.0.0.1:10"]  # never called
    client = EngineClient(None, num_layers=2, top_k=2, servers=servers)
    pool = RolloutPool(client, tokenizer, workers=6, name="run-x")
    remote = ScriptedExecutor(dict.fromkeys(range(6), "ok"))
    pool.remote, pool._remote_fn = remote, object()  # type: ignore[assignment]
    try:
        rollouts = pool.run_all(jobs, HarnessConfig())
    finally:
        pool.close()
    ids = [f"run-x:all1:{slot}" for slot in range(6)]
    assert [r.sample for r in rollouts] == list(range(6))
    assert remote.urls == {t: client.for_trial(t).base_url for t in ids}
    assert set(remote.urls.values()) == set(servers)
