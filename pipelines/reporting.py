"""Report a training campaign's evaluation into the Dagster asset graph.

Two paths. A campaign that Dagster's `train_campaign` started and follows is reported by
that Dagster run itself, attached to it: the run reads what the campaign recorded in the
warehouse (`recorded_evaluations`) and logs a materialization per checkpoint, URLs as links.
A campaign nobody in Dagster follows (started from the Prefect UI, `t1 train`) reports
runless: through the webserver's HTTP endpoint when a URL is given (the campaign runs in
another process or on another machine; every value arrives as text), else straight into the
local Dagster instance ($DAGSTER_HOME; values under keys ending in `_url` become links).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

EVALUATION_ASSET = "evaluation_results"


def scalar_metadata(metadata: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """The scalar entries of `metadata` (what both report paths can carry)."""
    return {k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool)}


def typed_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` with the values under keys ending in `_url` as Dagster URL values (links)."""
    import dagster as dg

    return {
        k: dg.MetadataValue.url(v) if k.endswith("_url") and isinstance(v, str) else v
        for k, v in metadata.items()
    }


EVALUATIONS_OF_FLOW_RUN = """
    SELECT * FROM evaluation_scores WHERE prefect_flow_run_id = $id ORDER BY recorded_at
"""


def recorded_evaluations(store: Any, prefect_flow_run_id: str) -> list[dict[str, Any]]:
    """The evaluations a campaign's flow run has recorded in the warehouse, as
    `evaluation_results` metadata (from `evaluation_scores`: the scores with the pool
    version, audit version and run ids of the run's `campaigns` row), oldest first."""
    from warehouse import Snapshot, StoreNotFoundError

    try:
        with Snapshot.open(store, with_lineage=False) as snap:
            rows = snap.rows(EVALUATIONS_OF_FLOW_RUN, {"id": prefect_flow_run_id})
    except StoreNotFoundError:
        return []
    return [evaluation_metadata(r) for r in rows]


def evaluation_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """One `evaluation_scores` row as `evaluation_results` metadata (the flow's names)."""
    md: dict[str, Any] = {
        "checkpoint": row["checkpoint"],
        "benchmark": row["benchmark"],
        "tasks": row["tasks"],
        "samples": row["samples"],
        "infrastructure_failures": row["infrastructure_failures"],
        "validate/pass_rate": row["resolved_rate"],
        "validate/dense_score": row["dense_score"],
        "campaign_run_id": row["run_id"],
        "pool": row["pool"],
        "pool_version": row["pool_version"],
        "audit_version": row["audit_version"] or "unknown",
        "preset": row["preset"],
        "config_hash": row["config_hash"],
        "prefect_flow_run_id": row["prefect_flow_run_id"],
        "dagster_run_id": row["dagster_run_id"],
    }
    if row["weight_version"] is not None:
        md["weight_version"] = row["weight_version"]
    return {k: v for k, v in md.items() if v is not None}


def report_evaluation(
    metadata: dict[str, Any],
    *,
    webserver_url: str | None = None,
    instance: Any = None,
    timeout_s: float = 10.0,
) -> None:
    """Record a runless materialization of `evaluation_results` with `metadata`: over HTTP
    when `webserver_url` is given, else into `instance` (default: DAGSTER_HOME's instance).

    Raises httpx.HTTPError (or RuntimeError) when the webserver is unreachable or refuses.
    """
    clean = scalar_metadata(metadata)
    if webserver_url:  # the endpoint stores every value as text: links are not clickable
        url = f"{webserver_url.rstrip('/')}/report_asset_materialization/{EVALUATION_ASSET}"
        r = httpx.post(url, json={"metadata": clean}, timeout=timeout_s)
        r.raise_for_status()
        body = r.json() if r.content else {}
        if isinstance(body, dict) and body.get("error"):
            raise RuntimeError(f"dagster refused the report: {json.dumps(body)[:300]}")
        return
    import dagster as dg

    event = dg.AssetMaterialization(asset_key=EVALUATION_ASSET, metadata=typed_metadata(clean))
    if instance is not None:
        instance.report_runless_asset_event(event)
        return
    with dg.DagsterInstance.get() as inst:
        inst.report_runless_asset_event(event)
