"""`python -m pipelines.serve_campaign`: serve the Prefect deployment `ppo_campaign/t1` until
interrupted (`t1 ui` and the demo's loop start it beside the Prefect server). Flow runs
execute in subprocesses, which import the flow by module path."""

from __future__ import annotations

import argparse
import os

from pipelines.campaign_deployment import DAGSTER_URL_ENV, DEPLOYMENT_NAME
from pipelines.flows import ppo_campaign


def serve_campaign(dagster_url: str | None) -> None:
    """Register the deployment (its default `dagster_url`: where to report) and serve it."""
    from prefect.deployments.runner import EntrypointType

    defaults = {"dagster_url": dagster_url} if dagster_url else {}
    ppo_campaign.serve(
        name=DEPLOYMENT_NAME,
        parameters=defaults,
        tags=["campaign"],
        description="PPO campaign on a pool version; evaluations are reported to Dagster.",
        entrypoint_type=EntrypointType.MODULE_PATH,
        print_starting_message=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the T1 Forge campaign deployment.")
    parser.add_argument("--dagster-url", default=os.environ.get(DAGSTER_URL_ENV))
    serve_campaign(parser.parse_args().dagster_url)


if __name__ == "__main__":
    main()
