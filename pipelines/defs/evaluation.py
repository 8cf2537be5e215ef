"""Evaluation results reported by a training campaign (an external asset) and what reacts.

A Prefect campaign reports each evaluation into the graph with `pipelines.reporting` (over
HTTP: a run of the `evaluation_report` job below, launched through the webserver's GraphQL
API; else the instance directly), with the pool, pool version and audit version it trained
on; the sensor below (running by default) then materializes `evaluation_summary` from the
warehouse.
"""

import json
from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from pipelines.defs.resources import ForgeConfig
from pipelines.reporting import REPORT_JOB, typed_metadata
from warehouse import Snapshot

EVALUATION_RESULTS = dg.AssetKey("evaluation_results")

evaluation_results = dg.AssetSpec(
    EVALUATION_RESULTS,
    group_name="training",
    description="Per-checkpoint held-out evaluations, reported by the training campaign with "
    "the pool version it trains on (see the train_campaign job).",
    deps=["t1_pool", "rst_pool", "tmax_pool", "seed_corpus"],
    kinds={"prefect"},
)


class EvaluationReportConfig(dg.Config):
    """An evaluation a campaign reports over HTTP (`pipelines.reporting.launch_report_run`)."""

    metadata_json: str = Field(description="the evaluation's metadata: a JSON object of scalars")


@dg.op(out={})
def reported_evaluation(config: EvaluationReportConfig) -> Iterator[dg.AssetMaterialization]:
    """Log the reported evaluation as a materialization of `evaluation_results`, attached to
    this run, the values under keys ending in `_url` as links."""
    try:
        metadata = json.loads(config.metadata_json)
    except json.JSONDecodeError as e:
        raise dg.Failure(description=f"metadata_json: not JSON ({e})") from None
    if not isinstance(metadata, dict):
        raise dg.Failure(description=f"metadata_json: not a JSON object: {metadata!r:.80}")
    label = f"{metadata.get('checkpoint')} of {metadata.get('campaign_run_id')}"
    yield dg.AssetMaterialization(
        asset_key=EVALUATION_RESULTS,
        description=f"{label} on {metadata.get('pool')} v{metadata.get('pool_version')}",
        metadata=typed_metadata(metadata),
    )


@dg.job(
    name=REPORT_JOB,
    tags={"kind": "evaluation_report"},
    description="Record one evaluation a training campaign reported over HTTP (launched by the "
    "campaign, not from the Launchpad).",
)
def evaluation_report() -> None:
    reported_evaluation()


@dg.asset(group_name="training", deps=[EVALUATION_RESULTS], kinds={"duckdb"})
def evaluation_summary(forge: ForgeConfig) -> dg.MaterializeResult:
    """Resolved rate and mean dense score per campaign checkpoint, with the pool version (and
    audit) it trained on, from the warehouse's `evaluation_scores`."""
    with Snapshot.open(forge.store_path, with_lineage=False) as snap:
        rows = snap.rows(SUMMARY_QUERY)
    return dg.MaterializeResult(
        metadata={"checkpoints": len(rows), "summary": dg.MetadataValue.md(summary_table(rows))}
    )


SUMMARY_QUERY = "SELECT * FROM evaluation_scores ORDER BY run_id, recorded_at, checkpoint"


def summary_table(rows: list[dict]) -> str:
    """`evaluation_scores` rows as a markdown table (pool `?` for runs that recorded none)."""
    lines = [
        "| campaign | checkpoint | pool | audit | benchmark | tasks | resolved | dense |",
        "|---" * 8 + "|",
    ]
    for r in rows:
        pool = f"{r['pool']} v{r['pool_version']}" if r["pool"] is not None else "?"
        lines.append(
            f"| {r['run_id']} | {r['checkpoint']} | {pool} | {r['audit_version'] or '?'} | "
            f"{r['benchmark']} | {r['tasks']} | {r['resolved_rate']:.3f} | "
            f"{r['dense_score']:.2f} |"
        )
    return "\n".join(lines)


evaluation_summary_job = dg.define_asset_job(
    "evaluation_summary_job", selection=[evaluation_summary]
)


@dg.asset_sensor(
    asset_key=EVALUATION_RESULTS,
    job=evaluation_summary_job,
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def evaluation_reported(context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry):
    """When a campaign reports an evaluation, refresh the summary."""
    mat = asset_event.asset_materialization
    checkpoint = mat.metadata.get("checkpoint") if mat else None
    label = checkpoint.value if checkpoint is not None else "unknown"
    yield dg.RunRequest(
        run_key=f"evaluation-{asset_event.timestamp}", tags={"checkpoint": str(label)}
    )
