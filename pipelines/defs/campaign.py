"""Start the PPO campaign from Dagster: `train_campaign` (a job) and `t1_pool_updated` (an
optional sensor that starts it on each new T1 version).

The job starts a run of the Prefect deployment `ppo_campaign/t1` (served by `t1 ui`) with
`run_deployment`, links the Dagster run to the Prefect flow run (a clickable output), and by
default waits for it. The campaign reports its evaluations back as `evaluation_results`,
with the pool version, the audit version and a link back to this run.
"""

import os
from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from pipelines.campaign_deployment import (
    DAGSTER_URL_ENV,
    CampaignRequest,
    NoDeploymentError,
    flow_run_url,
    follow_flow_run,
    latest_log_line,
    start_campaign_run,
    state_line,
    state_name,
)
from pipelines.campaign_recovery import FLOW_RUN_TAG
from pipelines.defs.evaluation import EVALUATION_RESULTS
from pipelines.defs.resources import ForgeConfig
from pipelines.progress import Heartbeat
from pipelines.reporting import recorded_evaluations, typed_metadata
from tasks.pools import Pool
from warehouse import pool_version

POOL_ASSETS = {Pool.T1: "t1_pool", Pool.RST: "rst_pool", Pool.TMAX: "tmax_pool"}


class TrainCampaignConfig(dg.Config, CampaignRequest):
    """What to train on (the campaign's typed parameters) and whether to wait for it."""

    wait: bool = Field(True, description="keep this run open until the campaign finishes")
    timeout_minutes: float = Field(240.0, gt=0, description="how long to wait")


def audit_version_of(instance: dg.DagsterInstance, pool: str, version: int) -> str:
    """The audit version the pool asset recorded for `version` ('' when unknown)."""
    key = POOL_ASSETS.get(Pool.parse(pool))
    if key is None:
        return ""
    records = instance.fetch_materializations(dg.AssetKey(key), limit=50).records
    for record in records:
        mat = record.asset_materialization
        md = mat.metadata if mat else {}
        found = md.get("pool_version")
        if found is not None and found.value == version and "audit_version" in md:
            return str(md["audit_version"].value)
    return ""


@dg.op(out=dg.Out(dict))
def campaign_flow_run(
    context: dg.OpExecutionContext, config: TrainCampaignConfig, forge: ForgeConfig
) -> Iterator[dg.AssetObservation | dg.AssetMaterialization | dg.Output]:
    """Start the campaign on the chosen pool version as a Prefect flow run (and follow it)."""
    try:
        version = pool_version(forge.store_path, config.pool, config.pool_version)
    except ValueError as e:  # no such pool version (or no store): say so in one line
        raise dg.Failure(description=str(e)) from None
    # The run's cluster: the launch's own, else the forge resource's (one executor per run).
    cluster = config.cluster_address or forge.cluster_address
    request = CampaignRequest(
        **{**config.model_dump(), "pool_version": version, "cluster_address": cluster}
    )
    # A run launched from the Launchpad has no tags yet; the sensor's carry these already.
    context.instance.add_run_tags(
        context.run_id, {"pool": request.pool, "pool_version": str(version)}
    )
    dagster_url = os.environ.get(DAGSTER_URL_ENV)
    try:
        run = start_campaign_run(
            request,
            extra={
                "audit_version": audit_version_of(context.instance, request.pool, version),
                "store": str(forge.store_path.resolve()),
                "dagster_url": dagster_url,
                "dagster_run_id": context.run_id,
                # This run reports the evaluations while it follows the campaign.
                "report_evaluations": not config.wait,
            },
            tags=("campaign", f"pool:{request.pool}", f"pool_version:{version}"),
        )
    except NoDeploymentError as e:
        raise dg.Failure(description=str(e)) from e
    # the flow run this run follows: `t1 ui` fails this run if it is found orphaned
    context.instance.add_run_tags(context.run_id, {FLOW_RUN_TAG: str(run.id)})
    url = flow_run_url(run.id)
    link = {"prefect_flow_run": dg.MetadataValue.url(url)} if url else {}
    context.log.info(f"started Prefect flow run {run.name}: {url or run.id}")
    # Shown at once in this run's events and on evaluation_results: the link to Prefect.
    yield dg.AssetObservation(
        asset_key=EVALUATION_RESULTS,
        description=f"campaign started on {request.pool} v{version}",
        metadata={
            **link,
            "flow_run_name": run.name,
            "pool": request.pool,
            "pool_version": version,
        },
    )
    state = "Scheduled"
    if config.wait:
        reported: set[str] = set()
        final = None
        relayed: str | None = None
        beat = Heartbeat(context.log.info, f"flow run {run.name}")
        with beat:  # the flow's progress, relayed here: this run is never silent for long
            for final in follow_flow_run(run.id, config.timeout_minutes * 60):
                if state_name(final) != state:
                    state = state_name(final)
                    beat.note(state_line(state))
                line = latest_log_line(run.id) if state == "Running" else None
                if line is not None and line != relayed:
                    relayed = line
                    beat.note(line)
                yield from evaluation_events(forge, str(run.id), url, reported)
        if final is None or final.state is None or not final.state.is_completed():
            raise dg.Failure(
                description=f"the campaign's flow run ended {state}: {url or run.id}",
                metadata=link,
            )
    yield dg.Output(
        {"flow_run_id": str(run.id), "url": url, "state": state},
        metadata={**link, "state": state},
    )


def evaluation_events(
    forge: ForgeConfig, flow_run_id: str, flow_run_link: str | None, reported: set[str]
) -> Iterator[dg.AssetMaterialization]:
    """A materialization of `evaluation_results` per checkpoint the flow run has recorded in
    the warehouse since the last call (`reported` keeps the checkpoints already reported),
    attached to this run; the Prefect link is a URL value."""
    for md in recorded_evaluations(forge.store_path, flow_run_id):
        if md["checkpoint"] in reported:
            continue
        reported.add(md["checkpoint"])
        if flow_run_link:
            md["prefect_flow_run_url"] = flow_run_link
        yield dg.AssetMaterialization(
            asset_key=EVALUATION_RESULTS,
            description=f"{md['checkpoint']} of {md['campaign_run_id']} on "
            f"{md.get('pool')} v{md.get('pool_version')}",
            metadata=typed_metadata(md),
        )


@dg.job(
    tags={"kind": "campaign"},
    description="Train the PPO campaign on a pool version (default: the latest t1) through the "
    "Prefect deployment ppo_campaign/t1 that `t1 ui` serves.",
)
def train_campaign() -> None:
    campaign_flow_run()


def new_t1_versions(
    instance: dg.DagsterInstance, cursor: str | None
) -> tuple[list[dg.RunRequest], str, str | None]:
    """The campaign requests for T1 versions recorded after `cursor` (a storage id), the new
    cursor, and why nothing was requested (None when something was).

    With no cursor (the sensor just turned on) it starts from now: the latest version is
    marked seen, not trained on. Enabling the sensor used to start a campaign on the version
    that already existed."""
    key = dg.AssetKey(POOL_ASSETS[Pool.T1])
    if cursor is None:
        latest = instance.fetch_materializations(key, limit=1).records
        start = str(latest[0].storage_id) if latest else "0"
        return [], start, "starting from now: the next T1 version starts a campaign"
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, after_storage_id=int(cursor)),
        limit=100,
        ascending=True,
    ).records
    requests = []
    for record in records:
        mat = record.asset_materialization
        version = mat.metadata.get("pool_version") if mat else None
        if version is not None:
            requests.append(
                dg.RunRequest(
                    run_key=f"t1-v{version.value}",
                    run_config={
                        "ops": {"campaign_flow_run": {"config": {"pool_version": version.value}}}
                    },
                    tags={"pool": "t1", "pool_version": str(version.value)},
                )
            )
    last = str(records[-1].storage_id) if records else cursor
    return requests, last, None if requests else "no new T1 version"


@dg.sensor(
    job=train_campaign,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def t1_pool_updated(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Start the campaign on each new T1 version (off until turned on in the UI; the
    version that exists when it is turned on is not trained on)."""
    requests, cursor, skip = new_t1_versions(context.instance, context.cursor)
    return dg.SensorResult(
        run_requests=requests, cursor=cursor, skip_reason=dg.SkipReason(skip) if skip else None
    )
