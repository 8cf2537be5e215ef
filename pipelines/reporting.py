"""Report a training campaign's evaluation into the Dagster asset graph.

Two paths. A campaign that Dagster's `train_campaign` started and follows is reported by
that Dagster run itself, attached to it: the run reads what the campaign recorded in the
warehouse (`recorded_evaluations`) and logs a materialization per checkpoint, URLs as links.
A campaign nobody in Dagster follows (started from the Prefect UI, `t1 train`) reports
itself: over HTTP when the webserver's URL is given (the campaign runs in another process or
on another machine), by launching a run of the `evaluation_report` job through the
webserver's GraphQL API with the evaluation as run config; that run logs the materialization,
so it belongs to a run and its URLs are links. (The webserver's /report_asset_materialization
endpoint was used before: it stores every value as text, so links were not clickable.)
Without a URL it is recorded runless, straight into the local Dagster instance
($DAGSTER_HOME). On both paths the values under keys ending in `_url` become links.
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


REPORT_JOB = "evaluation_report"

LOCATIONS_OF_JOBS = """
    query { repositoriesOrError {
      ... on RepositoryConnection { nodes { name location { name } jobs { name } } }
      ... on Error { message } } }
"""

LAUNCH_RUN = """
    mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
      __typename
      ... on LaunchRunSuccess { run { runId } }
      ... on RunConfigValidationInvalid { errors { message } }
      ... on Error { message } } }
"""


class ReportRefusedError(RuntimeError):
    """The Dagster webserver answered, but did not take the report (no such job, a refused
    launch)."""


def graphql(webserver_url: str, query: str, variables: dict[str, Any], timeout_s: float) -> Any:
    """The `data` of a GraphQL request to the webserver (ReportRefusedError on `errors`)."""
    r = httpx.post(
        f"{webserver_url.rstrip('/')}/graphql",
        json={"query": query, "variables": variables},
        timeout=timeout_s,
    )
    r.raise_for_status()
    try:
        body = r.json()
    except ValueError:  # a page, not GraphQL: the URL is not a Dagster webserver's
        raise ReportRefusedError(
            f"{webserver_url}/graphql did not answer GraphQL (is it a Dagster webserver?)"
        ) from None
    if not isinstance(body, dict) or body.get("errors") or "data" not in body:
        raise ReportRefusedError(f"dagster refused the report: {json.dumps(body)[:300]}")
    return body["data"]


def report_job_selector(webserver_url: str, timeout_s: float) -> dict[str, str]:
    """The GraphQL selector of the `evaluation_report` job in the webserver's workspace."""
    data = graphql(webserver_url, LOCATIONS_OF_JOBS, {}, timeout_s)["repositoriesOrError"]
    for repo in data.get("nodes") or []:
        if any(job["name"] == REPORT_JOB for job in repo["jobs"]):
            return {
                "repositoryLocationName": repo["location"]["name"],
                "repositoryName": repo["name"],
                "jobName": REPORT_JOB,
            }
    raise ReportRefusedError(
        f"the Dagster at {webserver_url} has no job {REPORT_JOB!r} "
        f"({data.get('message') or 'not in any code location'})"
    )


REPORT_TAGS = ("campaign_run_id", "checkpoint", "pool", "pool_version", "prefect_flow_run_id")


def launch_report_run(
    metadata: dict[str, str | int | float | bool], webserver_url: str, timeout_s: float
) -> str:
    """Launch an `evaluation_report` run carrying `metadata`; its id. The run logs the
    `evaluation_results` materialization (see `pipelines.defs.evaluation`)."""
    params = {
        "selector": report_job_selector(webserver_url, timeout_s),
        "runConfigData": {
            "ops": {"reported_evaluation": {"config": {"metadata_json": json.dumps(metadata)}}}
        },
        "executionMetadata": {
            "tags": [{"key": k, "value": str(metadata[k])} for k in REPORT_TAGS if k in metadata]
        },
    }
    result = graphql(webserver_url, LAUNCH_RUN, {"params": params}, timeout_s)["launchRun"]
    if result["__typename"] != "LaunchRunSuccess":
        why = result.get("message") or "; ".join(e["message"] for e in result.get("errors", []))
        raise ReportRefusedError(f"dagster refused the report run ({result['__typename']}): {why}")
    return str(result["run"]["runId"])


def report_evaluation(
    metadata: dict[str, Any],
    *,
    webserver_url: str | None = None,
    instance: Any = None,
    timeout_s: float = 10.0,
) -> None:
    """Record a materialization of `evaluation_results` with `metadata` (URLs as links):
    over HTTP when `webserver_url` is given (a run of `evaluation_report`, launched; it
    records the materialization moments later), else runless into `instance` (default:
    DAGSTER_HOME's instance).

    Raises httpx.HTTPError when the webserver is unreachable, ReportRefusedError when it
    refuses.
    """
    clean = scalar_metadata(metadata)
    if webserver_url:
        launch_report_run(clean, webserver_url, timeout_s)
        return
    import dagster as dg

    event = dg.AssetMaterialization(asset_key=EVALUATION_ASSET, metadata=typed_metadata(clean))
    if instance is not None:
        instance.report_runless_asset_event(event)
        return
    with dg.DagsterInstance.get() as inst:
        inst.report_runless_asset_event(event)
