"""Evaluation results reported by a training campaign (an external asset) and what reacts.

A Prefect campaign reports each evaluation into the graph with `pipelines.reporting` (the
webserver's /report_asset_materialization endpoint, or the instance directly), with the pool,
pool version and audit version it trained on; the sensor below (running by default) then
materializes `evaluation_summary` from the warehouse.
"""

import dagster as dg

from pipelines.defs.resources import ForgeConfig
from warehouse import open_snapshot

EVALUATION_RESULTS = dg.AssetKey("evaluation_results")

evaluation_results = dg.AssetSpec(
    EVALUATION_RESULTS,
    group_name="training",
    description="Per-checkpoint held-out evaluations, reported by the training campaign with "
    "the pool version it trains on (see the train_campaign job).",
    deps=["t1_pool", "rst_pool", "tmax_pool", "seed_corpus"],
    kinds={"prefect"},
)


@dg.asset(group_name="training", deps=[EVALUATION_RESULTS], kinds={"duckdb"})
def evaluation_summary(forge: ForgeConfig) -> dg.MaterializeResult:
    """Resolved rate and mean dense score per campaign checkpoint, from the warehouse."""
    with open_snapshot(forge.store_path) as snap:
        rows = snap.rows(
            """SELECT campaign, checkpoint, benchmark, count(*) AS tasks,
                      avg(CASE WHEN resolved THEN 1.0 ELSE 0.0 END) AS resolved_rate,
                      avg(dense_score) AS mean_dense
               FROM evaluations GROUP BY ALL ORDER BY campaign, checkpoint"""
        )
    lines = ["| campaign | checkpoint | benchmark | tasks | resolved | dense |", "|---" * 6 + "|"]
    lines += [
        f"| {r['campaign']} | {r['checkpoint']} | {r['benchmark']} | {r['tasks']} | "
        f"{r['resolved_rate']:.3f} | {(r['mean_dense'] or 0):.2f} |"
        for r in rows
    ]
    return dg.MaterializeResult(
        metadata={"checkpoints": len(rows), "summary": dg.MetadataValue.md("\n".join(lines))}
    )


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
