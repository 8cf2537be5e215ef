"""The Prefect campaign flow: `ppo_campaign`, a thin skin over `training.campaign.run_campaign`.

The step order lives once, in `run_campaign`; the flow passes hooks. After every evaluation
the `evaluation_report` task reports it into the Dagster asset graph (`evaluation_results`)
with `pipelines.reporting.report_evaluation`. Tasks use `cache_policy=NONE`: their inputs are
live objects that must never be hashed or cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NONE

from pipelines.reporting import report_evaluation
from training.campaign import CampaignHooks, EvaluationSummary, run_campaign
from training.campaign_config import load_campaign_config


@task(cache_policy=NONE)
def evaluation_report(summary: EvaluationSummary, webserver_url: str | None) -> None:
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
    `run_dir` is the directory runs are written under. Returns the metrics of every step."""
    cfg = load_campaign_config(
        preset,
        steps=steps,
        runs_dir=Path(run_dir) if run_dir else None,
        store=Path(store) if store else None,
        policy_path=Path(policy_path) if policy_path else None,
    )
    hooks = CampaignHooks(on_evaluation=lambda s: evaluation_report(s, webserver_url))
    return run_campaign(cfg, hooks=hooks).metrics
