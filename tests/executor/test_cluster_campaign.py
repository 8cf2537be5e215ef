"""A short PPO campaign whose rollout and evaluation trials run on a 2-node Ray cluster
(`CampaignConfig.executor`) records the same rows as the same campaign on local threads.

The engine is the local CPU engine in the driver's process, reached by the Ray workers over
HTTP; weights are published between the steps through the run directory. One trial at a time,
synchronous steps: the engine then sees the same requests in the same order in both runs, so
the sampled tokens, verdicts and updates are equal, not only similar.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor import ExecutorConfig

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.sandbox, pytest.mark.torch]
ray = pytest.importorskip("ray")
pytest.importorskip("torch")

TRAJECTORY_COLUMNS = (
    "step, sample, task_hash, weight_version, weight_version_max, staleness, reward, "
    "assertions_passed, assertions_total, turns, tokens, failure_mode, status"
)
EVALUATION_COLUMNS = (
    "checkpoint, task_hash, attempt, resolved, dense_score, assertions_total, failure_mode, "
    "weight_version"
)


def run(tmp: Path, policy: Path, address: str, spy: list[Any]) -> tuple[list, list, list]:
    from training.campaign import run_campaign
    from training.campaign_config import CampaignConfig
    from training.harness import HarnessConfig
    from warehouse import open_snapshot

    cfg = CampaignConfig(
        campaign=f"ray-{address}", runs_dir=tmp / "runs", store=tmp / "wh", policy_path=policy,
        train_task_ids=["vc-gitignore-untrack", "sa-dedupe-hardlinks"],
        eval_task_ids=["sa-fix-snapshot-script-filenames"], eval_every=2, steps=2,
        tasks_per_step=2, rollout_workers=1, async_rollouts=False, lr=1e-4, critic_lr=1e-4,
        truncation="scored", local_engine="thread", executor=ExecutorConfig(address=address),
        harness=HarnessConfig(max_turns=2, max_new_tokens=48, max_context_tokens=4096, seed=0),
    )  # fmt: skip
    result = run_campaign(cfg)
    with open_snapshot(tmp / "wh") as snap:
        where = f"WHERE campaign = '{result.run_id}'"
        trajectories = snap.rows(
            f"SELECT {TRAJECTORY_COLUMNS} FROM trajectories {where} ORDER BY step, sample"
        )
        evaluations = snap.rows(
            f"SELECT {EVALUATION_COLUMNS} FROM evaluations {where} ORDER BY task_hash, attempt"
        )
    timing = ("perf/", "rollout/seconds")
    metrics = [
        json.dumps({k: v for k, v in m.items() if not k.startswith(timing)}, sort_keys=True)
        for m in result.metrics
    ]
    return trajectories, evaluations, metrics


def test_a_campaign_on_two_nodes_records_the_local_rows(tmp_path, warm_policy, monkeypatch):
    from executor.cluster import simulated_cluster
    from training import rollouts

    executors: list[Any] = []
    close = rollouts.RolloutPool.close

    def spy_close(pool: rollouts.RolloutPool) -> None:  # the pool's executor, before it goes
        executors.append(pool.remote)
        close(pool)

    monkeypatch.setattr(rollouts.RolloutPool, "close", spy_close)
    local = run(tmp_path / "local", warm_policy, "local", executors)
    assert executors == [None]  # local: no executor in the way
    cluster, nodes = simulated_cluster(0, [1, 1])  # the head (driver, engine) has no slots
    try:
        there = run(tmp_path / "ray", warm_policy, "auto", executors)
        ex = executors[-1]
        assert ex is not None
        workers = {n.node_id for n in nodes}
        ran_on = dict(ex.ran_on)
    finally:
        ray.shutdown()
        cluster.shutdown()
    trajectories, evaluations, metrics = local
    assert len(trajectories) == 4 and len(evaluations) == 1  # 2 steps x 2 trials; 1 eval
    assert {r["weight_version"] for r in trajectories} == {0, 1}  # step 1 ran on published v1
    assert sum(r["turns"] for r in trajectories) > 0
    # every trial of the Ray run (4 rollouts, 1 evaluation) ran on a worker node
    assert set(ran_on) <= workers and sum(ran_on.values()) == 5
    assert there == local
