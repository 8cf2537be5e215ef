"""The Prefect campaign flow: `ppo_campaign`, a thin skin over `training.campaign`.

Each task is one call into `training.campaign`; the flow repeats `run_campaign`'s order
(rollouts -> critic then actor -> publish -> log -> record -> evaluate) so each stage shows up
as its own task run in the Prefect UI. After every evaluation the flow reports it into the
Dagster asset graph (`evaluation_results`) with `pipelines.reporting.report_evaluation`.
Tasks use `cache_policy=NONE`: their inputs are live models and an engine client, which must
never be hashed or cached.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NONE

from pipelines.reporting import report_evaluation
from training import campaign as tc
from training.campaign_config import CampaignConfig, load_campaign_config
from training.harness import Rollout


@task(cache_policy=NONE)
def campaign_setup(cfg: CampaignConfig) -> tc.Campaign:
    """Actor, critic, optimizers and engine of the run."""
    train, held_out = tc.campaign_tasks(cfg)
    return tc.setup(cfg, train, held_out)


@task(cache_policy=NONE)
def rollouts(c: tc.Campaign, step: int) -> list[Rollout]:
    """One sandbox trial per task drawn for `step`."""
    return tc.collect_rollouts(c, step)


@task(cache_policy=NONE)
def ppo_update(c: tc.Campaign, step: int, batch_rollouts: list[Rollout]) -> tc.Metrics:
    """TITO assembly, advantages, then the critic update before the actor update."""
    batch = tc.assemble(c, batch_rollouts)
    tc.compute_advantages(c, batch)
    metrics = tc.update_critic(c, batch)
    if step >= c.cfg.critic_warmup_steps:
        metrics |= tc.update_actor(c, batch)
    return metrics | tc.rollout_metrics(batch_rollouts, batch)


@task(cache_policy=NONE)
def published_weights(c: tc.Campaign, step: int) -> tc.Metrics:
    """Publish the actor to the engine with version step + 1, generation paused."""
    return tc.publish_weights(c, step)


@task(cache_policy=NONE)
def step_records(
    c: tc.Campaign, step: int, batch_rollouts: list[Rollout], metrics: tc.Metrics
) -> None:
    """Metrics line and trajectory rows of one step."""
    tc.log_metrics(c, step, metrics)
    tc.record_trajectories_of(c, step, batch_rollouts)


@task(cache_policy=NONE)
def evaluation(c: tc.Campaign, step: int) -> tc.EvaluationSummary:
    """Held-out evaluation of the current weights, recorded in the warehouse."""
    return tc.evaluate(c, step)


@task(cache_policy=NONE)
def evaluation_report(summary: tc.EvaluationSummary, webserver_url: str | None) -> None:
    """Report the evaluation to Dagster's `evaluation_results` asset."""
    report_evaluation(summary.metadata(), webserver_url=webserver_url)


@flow(name="ppo_campaign", log_prints=True)
def ppo_campaign(
    preset: str = "tiny-cpu",
    steps: int | None = None,
    run_dir: str | None = None,
    store: str | None = None,
    policy_path: str | None = None,
    webserver_url: str | None = None,
) -> list[dict[str, Any]]:
    """A PPO campaign from a preset (a name under training/presets/ or a TOML path);
    returns the metrics of every step."""
    cfg = load_campaign_config(
        preset,
        steps=steps,
        run_dir=Path(run_dir) if run_dir else None,
        store=Path(store) if store else None,
        policy_path=Path(policy_path) if policy_path else None,
    )
    c = campaign_setup(cfg)
    history: list[dict[str, Any]] = []
    try:
        for step in range(cfg.steps):
            t0 = time.monotonic()
            batch_rollouts = rollouts(c, step)
            metrics = ppo_update(c, step, batch_rollouts)
            metrics |= published_weights(c, step)
            metrics["perf/step_seconds"] = time.monotonic() - t0
            step_records(c, step, batch_rollouts, metrics)
            history.append(metrics)
            if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                evaluation_report(evaluation(c, step), webserver_url)
    finally:
        tc.close(c)
    return history
