"""Report a training campaign's evaluation into the Dagster asset graph.

Through the webserver's HTTP endpoint when a URL is given (the campaign runs in another
process or on another machine), else straight into the local Dagster instance
($DAGSTER_HOME). Values under keys ending in `_url` become links where the instance is
written directly (the HTTP endpoint stores every value as text).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

EVALUATION_ASSET = "evaluation_results"


def scalar_metadata(metadata: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """The scalar entries of `metadata` (what both report paths can carry)."""
    return {k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool)}


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
    if webserver_url:
        url = f"{webserver_url.rstrip('/')}/report_asset_materialization/{EVALUATION_ASSET}"
        r = httpx.post(url, json={"metadata": clean}, timeout=timeout_s)
        r.raise_for_status()
        body = r.json() if r.content else {}
        if isinstance(body, dict) and body.get("error"):
            raise RuntimeError(f"dagster refused the report: {json.dumps(body)[:300]}")
        return
    import dagster as dg

    typed = {
        k: dg.MetadataValue.url(v) if k.endswith("_url") and isinstance(v, str) else v
        for k, v in clean.items()
    }
    event = dg.AssetMaterialization(asset_key=EVALUATION_ASSET, metadata=typed)
    if instance is not None:
        instance.report_runless_asset_event(event)
        return
    with dg.DagsterInstance.get() as inst:
        inst.report_runless_asset_event(event)
