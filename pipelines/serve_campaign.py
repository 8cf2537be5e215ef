"""`python -m pipelines.serve_campaign`: serve the Prefect deployment `ppo_campaign/t1` until
interrupted (`t1 ui` and the demo's loop start it beside the Prefect server). Flow runs
execute in subprocesses, which import the flow by module path."""

from __future__ import annotations

import argparse
import os
from typing import Any

from pipelines.campaign_deployment import (
    CAMPAIGN_CONCURRENCY_LIMIT,
    DAGSTER_URL_ENV,
    DEPLOYMENT_NAME,
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


def serve_campaign(dagster_url: str | None) -> None:
    """Register the deployment and serve it."""
    ppo_campaign.serve(**deployment_options(dagster_url), print_starting_message=False)


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the T1 Forge campaign deployment.")
    parser.add_argument("--dagster-url", default=os.environ.get(DAGSTER_URL_ENV))
    serve_campaign(parser.parse_args().dagster_url)


if __name__ == "__main__":
    main()
