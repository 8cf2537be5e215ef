"""`t1 train`: a PPO campaign on a pool version, as the Prefect flow or the plain function.

The options' defaults are `CampaignRequest`'s (the deployment's parameters and the Dagster
`train_campaign` config take theirs from it too). Like `t1 ui`, it uses $DAGSTER_HOME
(default ./.dagster) so evaluations reach the same asset graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pipelines.campaign_deployment import CampaignRequest
from pipelines.cli.root import app
from tasks.pools import Pool

DEFAULTS = CampaignRequest()
FIELDS = CampaignRequest.model_fields


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@app.command("train")
def train(
    pool: Pool = typer.Option(
        Pool(DEFAULTS.pool), case_sensitive=False, help=FIELDS["pool"].description
    ),
    pool_version: int | None = typer.Option(None, help=FIELDS["pool_version"].description),
    preset: str = typer.Option(DEFAULTS.preset, help=FIELDS["preset"].description),
    steps: int | None = typer.Option(None, help=FIELDS["steps"].description),
    eval_every: int | None = typer.Option(None, help=FIELDS["eval_every"].description),
    run_dir: Path | None = typer.Option(None, help="config, metrics and weights"),
    store: Path | None = typer.Option(None, help="warehouse (default: $T1_WAREHOUSE)"),
    policy_path: Path | None = typer.Option(None, help="initial checkpoint (default: warm start)"),
    flow: bool = typer.Option(True, help="run as the Prefect flow (else the plain function)"),
    dagster_url: str | None = typer.Option(
        None, help="Dagster webserver to report evaluations to (default: $DAGSTER_HOME)"
    ),
    report: bool = typer.Option(True, help="report evaluations to Dagster (--no-flow only)"),
) -> None:
    """Run a PPO campaign and print each step's metrics as a JSON line. Exit codes: 0 done,
    1 the campaign failed, 2 bad options."""
    from pipelines.main_job import dagster_home

    try:
        request = CampaignRequest(
            pool=pool, pool_version=pool_version, preset=preset, steps=steps, eval_every=eval_every
        )
    except ValueError as e:
        raise _fail(str(e).splitlines()[-1]) from None
    if policy_path is not None and not policy_path.is_dir():
        raise _fail(f"--policy-path {policy_path}: no checkpoint directory there")
    _check(request, store)
    dagster_home()
    if flow:
        history = _run_flow(request, run_dir, store, policy_path, dagster_url)
    else:
        history = _run_plain(request, run_dir, store, policy_path, dagster_url, report)
    for step, metrics in enumerate(history):
        typer.echo(json.dumps({"step": step, **{k: round(v, 5) for k, v in metrics.items()}}))


def _check(request: CampaignRequest, store: Path | None) -> None:
    """Refuse, in one line, a preset or pool version that does not exist."""
    from training.campaign_config import load_campaign_config
    from warehouse import WarehouseError, pool_version

    try:
        load_campaign_config(request.preset)
        if request.pool != Pool.SEED:  # the seed pool falls back to the bundled corpus
            pool_version(store, request.pool, request.pool_version)
    except (ValueError, WarehouseError) as e:
        raise _fail(str(e).splitlines()[0]) from None


def _run_flow(request, run_dir, store, policy_path, dagster_url) -> list[dict[str, float]]:
    from pipelines.flows import ppo_campaign

    return ppo_campaign(
        **request.model_dump(),
        store=str(store) if store else None,
        policy_path=str(policy_path) if policy_path else None,
        run_dir=str(run_dir) if run_dir else None,
        dagster_url=dagster_url,
    )


def _run_plain(request, run_dir, store, policy_path, dagster_url, report) -> list[dict[str, float]]:
    import uuid

    from pipelines.campaign_plan import campaign_config, split_campaign_tasks
    from pipelines.reporting import report_evaluation
    from training.campaign import run_campaign

    cfg = campaign_config(
        request.preset,
        steps=request.steps,
        eval_every=request.eval_every,
        pool=request.pool,
        store=str(store) if store else None,
        policy_path=str(policy_path) if policy_path else None,
        run_dir=str(run_dir) if run_dir else None,
        run_id=uuid.uuid4().hex[:8],
    )
    split = split_campaign_tasks(cfg, request.pool, request.pool_version)

    def on_evaluation(summary) -> None:
        metadata = {
            **summary.metadata(),
            "campaign_run_id": cfg.campaign,
            "pool": split.pool,
            "pool_version": split.pool_version,
        }
        try:
            report_evaluation(metadata, webserver_url=dagster_url)
        except Exception as e:  # best-effort: the evaluation is in the warehouse already
            typer.echo(f"warning: evaluation not reported to Dagster: {e}", err=True)

    hook = on_evaluation if report else None
    result = run_campaign(cfg, tasks=split.train, eval_tasks=split.held_out, on_evaluation=hook)
    return result.metrics
