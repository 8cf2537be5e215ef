"""`t1 train`: a PPO campaign on a pool version, as the Prefect flow or the plain function.

The options' defaults are `CampaignRequest`'s (the deployment's parameters and the Dagster
`train_campaign` config take theirs from it too); resuming, the run's own recorded settings.
Like `t1 ui`, it uses $DAGSTER_HOME (default ./.dagster) so evaluations reach the same asset
graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError

from pipelines.campaign_deployment import CampaignRequest
from pipelines.cli.output import validation_message
from pipelines.cli.root import app
from tasks.pools import Pool

if TYPE_CHECKING:
    from training.campaign_config import CampaignConfig

DEFAULTS = CampaignRequest()
FIELDS = CampaignRequest.model_fields


def _fail(message: str) -> typer.Exit:
    from pipelines.cli.output import fail

    return fail(message)


@app.command("train")
def train(
    pool: Pool | None = typer.Option(
        None,
        case_sensitive=False,
        help=f"{FIELDS['pool'].description} (default: {DEFAULTS.pool}; resuming: the run's)",
    ),
    pool_version: int | None = typer.Option(None, help=FIELDS["pool_version"].description),
    preset: str | None = typer.Option(
        None, help=f"{FIELDS['preset'].description} (default: {DEFAULTS.preset})"
    ),
    steps: int | None = typer.Option(None, help=FIELDS["steps"].description),
    eval_every: int | None = typer.Option(None, help=FIELDS["eval_every"].description),
    cluster_address: str | None = typer.Option(None, help=FIELDS["cluster_address"].description),
    runs_dir: Path | None = typer.Option(
        None,
        help="each run writes config, metrics and weights in <dir>/<run id> (default: "
        "the preset's, runs/; resuming: where the run is)",
    ),
    store: Path | None = typer.Option(None, help="warehouse (default: $T1_WAREHOUSE)"),
    policy_path: Path | None = typer.Option(None, help="initial checkpoint (default: warm start)"),
    flow: bool = typer.Option(True, help="run as the Prefect flow (else the plain function)"),
    dagster_url: str | None = typer.Option(
        None, help="Dagster webserver to report evaluations to (default: $DAGSTER_HOME)"
    ),
    report: bool = typer.Option(True, help="report evaluations to Dagster (--no-flow only)"),
    resume: Path | None = typer.Option(
        None,
        "--resume",
        metavar="RUN_DIR",
        help="continue a run from its latest checkpoint (a run directory, or one checkpoint "
        "directory) with the settings it recorded (RUN_DIR/config.json: preset settings, "
        "steps, pool, store, ...); the options given replace theirs (--steps 20: to 20 in all)",
    ),
) -> None:
    """Run a PPO campaign and print each step's metrics as a JSON line (as it finishes, with
    a progress bar on stderr under --no-flow; the flow logs a line per step). `--resume
    RUN_DIR` continues a stopped run from its latest checkpoint, with its own settings.
    Exit codes: 0 done, 1 the campaign failed, 2 bad options."""
    from pipelines.main_job import dagster_home

    chosen = {
        "pool": pool, "pool_version": pool_version, "preset": preset, "steps": steps,
        "eval_every": eval_every, "cluster_address": cluster_address,
    }  # fmt: skip
    try:  # the options given; the defaults (or a resumed run's settings) fill in the rest
        request = CampaignRequest(**{k: v for k, v in chosen.items() if v is not None})
    except ValidationError as e:
        raise _fail(validation_message(e)) from None
    if policy_path is not None and not policy_path.is_dir():
        raise _fail(f"--policy-path {policy_path}: no checkpoint directory there")
    first = _check_resume(resume) if resume is not None else 0
    cfg = _config(request, store, policy_path, runs_dir, resume)
    _check_pool(cfg)
    dagster_home()
    if flow:
        _check_slot(cfg)  # the flow itself would wait; a terminal is told at once
        with _prefect_server_for_flow():
            # the flow returns the steps it ran: a resumed run's first is the checkpoint's
            # (it printed `"step": 0` before)
            for step, metrics in enumerate(
                _run_flow(request, runs_dir, store, policy_path, dagster_url, resume), first
            ):
                _print_step(step, metrics)
    else:
        _run_plain(cfg, dagster_url, report)


@contextmanager
def _prefect_server_for_flow() -> Iterator[None]:
    """With no PREFECT_API_URL, start a Prefect server of our own on PREFECT_HOME's database
    for the run (`pipelines.services.temporary_prefect_server`: its readiness wait fits the
    machine's load) and refuse in one line (exit 2) when a server already runs on it (`t1
    ui`: the second server failed with "database is locked") or it does not come up."""
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, PREFECT_UI_URL, temporary_settings

    from pipelines.services import (
        PrefectDatabaseInUseError,
        ServiceError,
        temporary_prefect_server,
    )

    if PREFECT_API_URL.value():
        yield
        return
    home = Path(PREFECT_HOME.value()).expanduser().resolve()
    log = home / "t1-train-server.log"
    typer.echo(f"starting a Prefect server for this run (log: {log}) ...", err=True)
    with ExitStack() as stack:
        try:
            api = stack.enter_context(temporary_prefect_server(home, log))
        except PrefectDatabaseInUseError as e:
            raise _fail(f"{e}; or pass --no-flow") from None
        except ServiceError as e:
            raise _fail(
                f"{e} (its log: {log}); or set PREFECT_API_URL, or pass --no-flow"
            ) from None
        # No UI outlives this command: no flow-run links to it are recorded.
        stack.enter_context(temporary_settings(updates={PREFECT_API_URL: api, PREFECT_UI_URL: ""}))
        yield


def _print_step(step: int, metrics: dict[str, float]) -> None:
    """One JSON line per step; a NaN metric (a loss that diverged) is `null`, not `NaN`."""
    from pipelines.cli.output import dumps

    typer.echo(dumps({"step": step, **{k: round(v, 5) for k, v in metrics.items()}}))


def _check_resume(resume: Path) -> int:
    """The step a --resume directory continues at (its latest checkpoint's); refused in one
    line when it has no checkpoint to continue from."""
    from training.checkpoint import latest_checkpoint, read_state

    try:
        return read_state(latest_checkpoint(resume)).step
    except ValueError as e:
        raise _fail(f"--resume {resume}: {str(e).splitlines()[0]}") from None


def _config(
    request: CampaignRequest,
    store: Path | None,
    policy_path: Path | None,
    runs_dir: Path | None,
    resume: Path | None,
) -> CampaignConfig:
    """The run's config as the flow resolves it too (`campaign_plan.campaign_config`: a
    resumed run's own, with the options given); refused in one line when the preset, or the
    resumed run's config.json, cannot be read."""
    from pipelines.campaign_plan import campaign_config

    try:
        return campaign_config(
            **request.chosen(),
            store=str(store) if store else None,
            policy_path=str(policy_path) if policy_path else None,
            runs_dir=str(runs_dir) if runs_dir else None,
            resume_from=str(resume) if resume else None,
        )
    except ValueError as e:
        where = f"--resume {resume}: " if resume is not None else ""
        raise _fail(where + str(e).splitlines()[0]) from None


def _check_pool(cfg: CampaignConfig) -> None:
    """Refuse, in one line, a pool version that does not exist."""
    from warehouse import WarehouseError, pool_version

    if cfg.pool == Pool.SEED:  # the seed pool falls back to the bundled corpus
        return
    try:
        pool_version(cfg.store, str(cfg.pool), cfg.pool_version)
    except (ValueError, WarehouseError) as e:  # a fresh store has no pool to train on yet
        raise _fail(
            f"{str(e).splitlines()[0]}; build the pool first (`t1 demo`, `t1 audit run-all`) "
            "or train on the bundled seed tasks: --pool seed"
        ) from None


def _check_slot(cfg: CampaignConfig) -> None:
    """Refuse, in one line (exit 2, `LockHeldError`), a campaign while another one runs on
    this store and engine (`pipelines.campaign_slot`)."""
    from pipelines.campaign_slot import campaign_slot

    with campaign_slot(cfg):
        pass


def _run_flow(request, runs_dir, store, policy_path, dagster_url, resume) -> list[dict[str, float]]:
    from pipelines.flows import ppo_campaign

    return ppo_campaign(
        **request.model_dump(exclude_unset=True),  # the options given: the flow resolves
        store=str(store) if store else None,
        policy_path=str(policy_path) if policy_path else None,
        runs_dir=str(runs_dir) if runs_dir else None,
        dagster_url=dagster_url,
        resume_from=str(resume) if resume else None,
    )


def _run_plain(cfg: CampaignConfig, dagster_url: str | None, report: bool) -> None:
    """`run_campaign` with a progress bar and a JSON line per step; evaluations reported to
    Dagster best-effort."""
    from pipelines.campaign_plan import ensure_policy, split_campaign_tasks
    from pipelines.campaign_provenance import recorded_campaign, start_record
    from pipelines.campaign_slot import campaign_slot
    from pipelines.cli.output import progress
    from pipelines.reporting import report_evaluation
    from training.campaign import CampaignHooks, run_campaign

    split = split_campaign_tasks(cfg, str(cfg.pool), cfg.pool_version)
    cfg = cfg.model_copy(update={"pool_version": split.pool_version or None})  # as resolved

    def on_evaluation(summary) -> None:
        metadata = {
            **summary.metadata(),
            "campaign_run_id": summary.run_id,
            "pool": split.pool,
            "pool_version": split.pool_version,
            "audit_version": split.audit_version or "unknown",
        }
        try:
            report_evaluation(metadata, webserver_url=dagster_url)
        except Exception as e:  # best-effort: the evaluation is in the warehouse already
            typer.echo(f"warning: evaluation not reported to Dagster: {e}", err=True)

    with progress(f"training {cfg.run_id}", cfg.steps) as advance:

        def on_step(step: int, metrics: dict[str, float]) -> None:
            _print_step(step, metrics)
            advance()

        hooks = CampaignHooks(on_step=on_step, on_evaluation=on_evaluation if report else None)
        with (
            campaign_slot(cfg),  # refused in one line while another campaign holds it
            recorded_campaign(cfg, start_record(cfg, split)),
        ):
            ensure_policy(cfg, lambda line: typer.echo(line, err=True))
            run_campaign(cfg, hooks=hooks, tasks=split.train, eval_tasks=split.held_out)
