"""`python -m pipelines.serve_campaign`: serve the Prefect deployment `ppo_campaign/t1` until
interrupted (`t1 ui` and the demo's loop start it beside the Prefect server). Flow runs
execute in subprocesses, which import the flow by module path."""

from __future__ import annotations

import argparse
import os
import threading
from datetime import UTC, datetime
from typing import Any, cast

from pipelines.campaign_deployment import (
    CAMPAIGN_CONCURRENCY_LIMIT,
    DAGSTER_URL_ENV,
    DEPLOYMENT_NAME,
    CampaignRequest,
)
from pipelines.flows import ppo_campaign


def deployment_options(dagster_url: str | None) -> dict[str, Any]:
    """The deployment's settings: its default `dagster_url` (where to report) and one
    campaign at a time (a second run is queued until the first ends, never run beside it:
    two campaigns would share the one local engine and GPU)."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.deployments.runner import EntrypointType

    return {
        "name": DEPLOYMENT_NAME,
        "parameters": {"dagster_url": dagster_url} if dagster_url else {},
        "tags": ["campaign"],
        "description": "PPO campaign on a pool version; evaluations are reported to Dagster. "
        f"At most {CAMPAIGN_CONCURRENCY_LIMIT} run at a time; more wait for a slot.",
        "entrypoint_type": EntrypointType.MODULE_PATH,
        "global_limit": ConcurrencyLimitConfig(
            limit=CAMPAIGN_CONCURRENCY_LIMIT, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE
        ),
    }


def plumbing_parameters() -> list[str]:
    """The flow's parameters a user does not choose (where the store, the runs and Dagster
    are; which Dagster run follows; a resume path): every one but `CampaignRequest`'s."""
    return [p for p in ppo_campaign.parameters.properties if p not in CampaignRequest.model_fields]


def form_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The flow's parameter schema as the Prefect form shows it: the user's parameters only
    (the form listed 14, 8 of them plumbing). The server still accepts the others (the schema
    does not forbid extra parameters), so Dagster and `t1 train` pass them as before."""
    hidden = set(plumbing_parameters())
    out = dict(schema)
    out["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k not in hidden}
    if "required" in schema:
        out["required"] = [k for k in schema["required"] if k not in hidden]
    return out


def campaign_deployment(dagster_url: str | None) -> Any:
    """The deployment `serve_campaign` serves, its form showing the user's parameters."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.utilities.callables import ParameterSchema

    options = deployment_options(dagster_url)
    limit: ConcurrencyLimitConfig = options.pop("global_limit")
    deployment = cast(Any, ppo_campaign.to_deployment(**options, concurrency_limit=limit))
    schema = deployment._parameter_openapi_schema.model_dump(exclude_none=True)
    deployment._parameter_openapi_schema = ParameterSchema(**form_schema(schema))
    return deployment


KEEPER_INTERVAL_S = 15.0


def keep_runs_in_order(stop: threading.Event, interval_s: float = KEEPER_INTERVAL_S) -> None:
    """Beside the runner, every `interval_s`: crash the runs the previous runner left (none
    of them can be running: their runner is gone) and runs whose process died, and name
    waiting runs after their parameters (`pipelines.campaign_recovery`,
    `campaign_deployment.name_queued_runs`). A failed round is logged; the next one runs."""
    from prefect.client.orchestration import get_client

    from pipelines.campaign_deployment import name_queued_runs
    from pipelines.campaign_recovery import reconcile_campaign_runs
    from training.campaign_config import load_campaign_config

    def say(line: str) -> None:
        print(f"campaign keeper: {line}", flush=True)

    def steps_of(preset: str) -> int:
        return load_campaign_config(preset).steps

    started = datetime.now(UTC)  # the runner starts now: older pid-less runs were not its
    while True:
        try:
            with get_client(sync_client=True) as client:
                reconcile_campaign_runs(client, runner_started=started, say=say)
                name_queued_runs(client, steps_of)
        except Exception as e:  # noqa: BLE001 - the server may be restarting; try again
            say(f"round skipped: {type(e).__name__}: {str(e)[:200]}")
        if stop.wait(interval_s):
            return


def serve_campaign(dagster_url: str | None) -> None:
    """Register the deployment and serve it, with the keeper beside it."""
    from prefect import serve

    stop = threading.Event()
    keeper = threading.Thread(target=keep_runs_in_order, args=(stop,), daemon=True)
    keeper.start()
    try:
        serve(campaign_deployment(dagster_url), print_starting_message=False)
    finally:
        stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the T1 Forge campaign deployment.")
    parser.add_argument("--dagster-url", default=os.environ.get(DAGSTER_URL_ENV))
    serve_campaign(parser.parse_args().dagster_url)


if __name__ == "__main__":
    main()
