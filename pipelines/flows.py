"""The Prefect campaign flow: `ppo_campaign` trains on one pool version with
`training.campaign.run_campaign` (the loop is written once, there) and adds what a Prefect
user expects around it:

- a run name from the parameters, renamed once the pool version is resolved (a run for "the
  latest" is named after the version it trains on), and tags `campaign:<run id>`,
  `pool:<pool>`, `pool_version:<v>`;
- a `campaigns` row in the warehouse when the run starts and one when it ends (finished or
  failed), with the pool version, audit version, preset, config hash and both orchestrators'
  run ids (`pipelines.campaign_provenance`);
- retries on the I/O tasks (reading the pool, labelling the run, reporting to Dagster);
- a progress artifact and a log line per step, a markdown artifact per evaluation (its
  figures, the pool version, links to Dagster) and a table of the steps' main metrics;
- reporting each evaluation to Dagster's `evaluation_results` is best-effort: retried, then
  logged as a warning; it never aborts training.

Held-out evaluation tasks are kept out of training by lineage: a pool task that descends from
one, or is an ancestor of one, is excluded (`warehouse.lineage.relatives`).
Tasks use `cache_policy=NONE`: their inputs are tasks and live objects, never to be hashed.
No `from __future__ import annotations` here: Prefect builds the parameter schema from the
flow's annotations at run time, and string annotations leave `Pool` undefined.
"""

from typing import Any, cast
from uuid import UUID

from prefect import flow, get_run_logger, runtime, task
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NONE

from pipelines.campaign_deployment import (
    CampaignRequest,
    ClusterAddress,
    EvalEvery,
    PoolVersion,
    Preset,
    Steps,
    flow_run_url,
    run_name_of,
)
from pipelines.campaign_plan import (
    CampaignTasks,
    campaign_config,
    ensure_policy,
    split_campaign_tasks,
    with_audit_version,
)
from pipelines.campaign_provenance import recorded_campaign, start_record
from pipelines.campaign_recovery import process_label
from pipelines.campaign_slot import campaign_slot
from pipelines.progress import Heartbeat
from pipelines.reporting import report_evaluation
from tasks.pools import Pool
from training.campaign_config import CampaignConfig

DEFAULTS = CampaignRequest()


def campaign_run_name() -> str:
    """The flow run's name, from its parameters (see `run_name_of`; it never raises)."""
    try:
        parameters = dict(runtime.flow_run.parameters)
    except Exception:  # noqa: BLE001 - no run context: still a name
        parameters = {}
    return run_name_of(parameters)


@task(retries=3, retry_delay_seconds=[1, 5, 15], cache_policy=NONE)
def campaign_tasks_of(cfg: CampaignConfig, pool: str, version: int | None) -> CampaignTasks:
    """Read the pool version from the warehouse and split off the held-out tasks."""
    return split_campaign_tasks(cfg, pool, version)


@task(retries=2, retry_delay_seconds=2, cache_policy=NONE)
def run_labels(tags: list[str], name: str) -> None:
    """Add tags to this flow run and name it after the resolved pool version (a run started
    for "the latest" was named `...-vlatest` before the version was known)."""
    from prefect.client.orchestration import get_client

    run_id = runtime.flow_run.id
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id).tags
        client.update_flow_run(
            run_id,
            name=name,
            tags=sorted({*current, *tags}),
            # this process: what `pipelines.campaign_recovery` checks after a kill
            infrastructure_pid=process_label(),
        )


@task(retries=3, retry_delay_seconds=[2, 10, 30], cache_policy=NONE)
def evaluation_report(metadata: dict[str, Any], dagster_url: str | None) -> None:
    """Report one evaluation to Dagster's `evaluation_results` asset."""
    report_evaluation(metadata, webserver_url=dagster_url)


@task(cache_policy=NONE)
def evaluation_artifact(metadata: dict[str, Any]) -> None:
    """A markdown artifact of one evaluation, with links back to Dagster."""
    create_markdown_artifact(
        evaluation_markdown(metadata),
        key=f"evaluation-{metadata['campaign_run_id']}-{metadata['checkpoint']}".lower(),
        description=f"evaluation of {metadata['checkpoint']} on {metadata['benchmark']}",
    )


def evaluation_markdown(md: dict[str, Any]) -> str:
    rows = [
        ("checkpoint", md["checkpoint"]),
        ("step", md["step"]),
        ("benchmark", md["benchmark"]),
        ("tasks", md["tasks"]),
        ("resolved rate (validate/pass_rate)", f"{md['validate/pass_rate']:.3f}"),
        ("mean passing assertions (validate/dense_score)", f"{md['validate/dense_score']:.2f}"),
        ("pool", f"{md['pool']} v{md['pool_version']} (audit {md['audit_version']})"),
        ("campaign run", md["campaign_run_id"]),
    ]
    if md.get("dagster_run_url"):
        rows.append(
            ("started by Dagster run", f"[{md['dagster_run_id']}]({md['dagster_run_url']})")
        )
    if md.get("dagster_url"):
        rows.append(("in the asset graph", f"[evaluation_results]({md['dagster_url']})"))
    return "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def report_best_effort(metadata: dict[str, Any], dagster_url: str | None) -> None:
    """Report with retries; a report that still fails is logged, and training goes on."""
    state = evaluation_report(metadata, dagster_url, return_state=True)
    if state.is_failed():
        get_run_logger().warning(
            f"evaluation {metadata['checkpoint']} not reported to Dagster after retries "
            f"({state.message}); it is recorded in the warehouse, training goes on"
        )


@flow(name="ppo_campaign", flow_run_name=campaign_run_name, log_prints=True)
def ppo_campaign(
    pool: Pool | None = None,
    pool_version: PoolVersion = DEFAULTS.pool_version,
    preset: Preset | None = None,
    cluster_address: ClusterAddress = DEFAULTS.cluster_address,
    steps: Steps = DEFAULTS.steps,
    eval_every: EvalEvery = DEFAULTS.eval_every,
    audit_version: str = "",
    store: str | None = None,
    policy_path: str | None = None,
    runs_dir: str | None = None,
    dagster_url: str | None = None,
    dagster_run_id: str | None = None,
    resume_from: str | None = None,
    report_evaluations: bool = True,
) -> list[dict[str, float]]:
    """A PPO campaign on a pool version; returns every step's metrics.

    Args:
        pool: pool to train on (t1, rst, tmax, seed); empty: t1, resuming: the run's.
        pool_version: pool version; empty: the latest recorded, resuming: the run's.
        preset: name under training/presets/ or a TOML path; empty: tiny-cpu, resuming:
            the run's (its recorded settings; another preset is refused).
        cluster_address: where the trials run: local, or a Ray address (auto, host:6379,
            ray://host:10001); empty: the preset's, else $T1_RAY_ADDRESS.
        steps: PPO steps; empty: the preset's.
        eval_every: evaluate every K steps and after the last; empty: the preset's.
        audit_version: the audit version that selected the pool version, for versions the
            warehouse has none recorded for (Dagster sets it from the pool asset).
        store: warehouse directory; empty: $T1_WAREHOUSE, else data/warehouse.
        policy_path: initial checkpoint; empty: the warm-started tiny policy.
        runs_dir: where the run's directory goes (<runs_dir>/<run id>); empty: the preset's.
        dagster_url: Dagster webserver to report evaluations to; empty: $DAGSTER_HOME.
        dagster_run_id: the Dagster run that started this campaign (for links back).
        resume_from: a run directory (or checkpoint) to continue with its recorded settings
            (config.json) and the parameters given; empty: a new run.
        report_evaluations: report each evaluation to Dagster; off when the Dagster run that
            started this campaign follows it and reports them itself (attached to that run).
    """
    from training.campaign import CampaignHooks, run_campaign

    chosen = {
        "pool": pool, "pool_version": pool_version, "preset": preset, "steps": steps,
        "eval_every": eval_every, "cluster_address": cluster_address,
    }  # fmt: skip
    request = CampaignRequest(**{k: v for k, v in chosen.items() if v is not None})
    cfg = campaign_config(
        **request.chosen(),
        store=store,
        policy_path=policy_path,
        runs_dir=runs_dir,
        resume_from=resume_from,
    )
    run_id = str(cfg.run_id)
    split = with_audit_version(
        campaign_tasks_of(cfg, str(cfg.pool), cfg.pool_version), audit_version
    )
    cfg = cfg.model_copy(update={"pool_version": split.pool_version or None})  # as resolved
    logger = get_run_logger()
    logger.info(
        f"campaign run {run_id}: {len(split.train)} tasks of {split.pool} v{split.pool_version}"
        f" (audit {split.audit_version or 'unknown'}), {len(split.held_out)} held out; "
        f"{len(split.excluded)} excluded by lineage {split.excluded[:5]}"
    )
    resolved = CampaignRequest(
        pool=split.pool, pool_version=cfg.pool_version, preset=cfg.preset or cfg.campaign,
        steps=cfg.steps,
    )  # fmt: skip
    labels = run_labels(
        [f"campaign:{run_id}", f"pool:{split.pool}", f"pool_version:{split.pool_version}"],
        resolved.run_name(),
        return_state=True,
    )
    if labels.is_failed():
        logger.warning(f"could not tag the flow run: {labels.message}")
    links = run_links(dagster_url, dagster_run_id)
    progress = cast(  # a UUID: this flow is synchronous
        UUID, create_progress_artifact(0.0, key=f"progress-{run_id}".lower(), description="steps")
    )

    beat = Heartbeat(logger.info, f"campaign {run_id}")

    def on_step(step: int, metrics: dict[str, float]) -> None:
        done = step + 1
        update_progress_artifact(progress, 100.0 * done / cfg.steps)
        shown = ", ".join(f"{k}={metrics[k]:.4g}" for k in STEP_COLUMNS[:3] if k in metrics)
        logger.info(f"step {done}/{cfg.steps}: {shown}")
        beat.heard(f"step {done + 1}/{cfg.steps}" if done < cfg.steps else "finishing")

    flow_run_id = str(runtime.flow_run.id)
    url = flow_run_url(flow_run_id)

    def on_evaluation(summary: Any) -> None:
        metadata = {
            **summary.metadata(),
            "campaign_run_id": summary.run_id,
            "pool": split.pool,
            "pool_version": split.pool_version,
            "audit_version": split.audit_version or "unknown",
            "prefect_flow_run_id": flow_run_id,
            **({"prefect_flow_run_url": url} if url else {}),
            **links,
        }
        evaluation_artifact(metadata)
        if report_evaluations:
            report_best_effort(metadata, dagster_url)

    def on_checkpoint(step: int, path: Any) -> None:
        logger.info(f"checkpoint after step {step + 1}: {path}")

    hooks = CampaignHooks(on_step=on_step, on_evaluation=on_evaluation, on_checkpoint=on_checkpoint)
    start = start_record(
        cfg,
        split,
        prefect_flow_run_id=flow_run_id,
        dagster_run_id=dagster_run_id,
    )
    with beat, campaign_slot(cfg, wait=beat.note), recorded_campaign(cfg, start):
        ensure_policy(cfg, beat.note)
        beat.heard("starting the engine and the first step's rollouts")
        result = run_campaign(cfg, hooks=hooks, tasks=split.train, eval_tasks=split.held_out)
    metrics_artifact(run_id, result.metrics)
    return result.metrics


STEP_COLUMNS = (
    "rollout/reward",
    "rollout/resolved_rate",
    "losses/policy",
    "losses/value",
    "train/kl",
    "weights/version",
    "perf/step_seconds",
)


@task(cache_policy=NONE)
def metrics_artifact(run_id: str, history: list[dict[str, float]]) -> None:
    """A table artifact of the run's steps (the main metrics; all of them are in
    run_dir/metrics.jsonl)."""
    rows = [
        {"step": i, **{k: round(m[k], 5) for k in STEP_COLUMNS if k in m}}
        for i, m in enumerate(history)
    ]
    create_table_artifact(rows, key=f"metrics-{run_id}".lower(), description="steps")


def run_links(dagster_url: str | None, dagster_run_id: str | None) -> dict[str, str]:
    """Links from this campaign back to Dagster (what exists of them)."""
    links: dict[str, str] = {}
    if dagster_run_id:
        links["dagster_run_id"] = dagster_run_id
    if dagster_url:
        base = dagster_url.rstrip("/")
        links["dagster_url"] = f"{base}/assets/evaluation_results"
        if dagster_run_id:
            links["dagster_run_url"] = f"{base}/runs/{dagster_run_id}"
    return links
