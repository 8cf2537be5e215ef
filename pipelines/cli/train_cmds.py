"""`t1 train`: a PPO campaign from a preset, as the Prefect flow or the plain function."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pipelines.cli import app


@app.command("train")
def train(
    steps: int | None = typer.Option(None, help="PPO steps (default: the preset's)"),
    preset: str = typer.Option("tiny-cpu", help="name under training/presets/ or a TOML path"),
    run_dir: Path | None = typer.Option(
        None, help="runs directory: each run writes config, metrics and weights in <dir>/<run id>"
    ),
    store: Path | None = typer.Option(None, help="warehouse (default: $T1_WAREHOUSE)"),
    policy_path: Path | None = typer.Option(None, help="initial checkpoint (default: warm start)"),
    flow: bool = typer.Option(True, help="run as the Prefect flow (else the plain function)"),
    webserver_url: str | None = typer.Option(
        None, help="Dagster webserver to report evaluations to (default: the local instance)"
    ),
    report: bool = typer.Option(
        True, help="report evaluations to Dagster (--no-flow; the flow always does)"
    ),
) -> None:
    """Run a PPO campaign and print each step's metrics as a JSON line."""
    if flow:
        from pipelines.flows import ppo_campaign

        history = ppo_campaign(
            preset=preset,
            steps=steps,
            run_dir=str(run_dir) if run_dir else None,
            store=str(store) if store else None,
            policy_path=str(policy_path) if policy_path else None,
            webserver_url=webserver_url,
        )
    else:
        from pipelines.reporting import report_evaluation
        from training.campaign import CampaignHooks, run_campaign
        from training.campaign_config import load_campaign_config

        cfg = load_campaign_config(
            preset, steps=steps, runs_dir=run_dir, store=store, policy_path=policy_path
        )
        hooks = CampaignHooks()
        if report:
            hooks.on_evaluation = lambda s: report_evaluation(
                s.metadata(), webserver_url=webserver_url
            )
        history = run_campaign(cfg, hooks=hooks).metrics
    for step, metrics in enumerate(history):
        typer.echo(json.dumps({"step": step, **{k: round(v, 5) for k, v in metrics.items()}}))
