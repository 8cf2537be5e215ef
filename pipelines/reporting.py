"""Report a training campaign's evaluation into the Dagster asset graph.

Through the webserver's HTTP endpoint when a URL is given (the campaign runs in another
process), else straight into the local Dagster instance.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

EVALUATION_ASSET = "evaluation_results"


def report_evaluation(
    metadata: dict[str, Any],
    *,
    webserver_url: str | None = None,
    instance: Any = None,
    timeout_s: float = 10.0,
) -> None:
    """Record a runless materialization of `evaluation_results` with `metadata`: over HTTP
    when `webserver_url` is given, else into `instance` (default: DAGSTER_HOME's instance).

    Raises httpx.HTTPStatusError when the webserver refuses the report.
    """
    clean = {k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool)}
    if webserver_url:
        url = f"{webserver_url.rstrip('/')}/report_asset_materialization/{EVALUATION_ASSET}"
        r = httpx.post(url, json={"metadata": clean}, timeout=timeout_s)
        r.raise_for_status()
        body = r.json() if r.content else {}
        if isinstance(body, dict) and body.get("error"):
            raise RuntimeError(f"dagster refused the report: {json.dumps(body)[:300]}")
        return
    import dagster as dg

    event = dg.AssetMaterialization(asset_key=EVALUATION_ASSET, metadata=clean)
    if instance is not None:
        instance.report_runless_asset_event(event)
        return
    with dg.DagsterInstance.get() as inst:
        inst.report_runless_asset_event(event)
