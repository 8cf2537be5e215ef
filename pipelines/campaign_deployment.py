"""The campaign's Prefect deployment: what a user chooses, serving it, and starting runs of it.

`CampaignRequest` is the one typed model of a campaign launch (pool, pool version, preset,
steps, evaluation interval): the flow's parameters, the Dagster `train_campaign` config and
`t1 train`'s options all take their defaults from it. `t1 ui` serves the deployment
(`python -m pipelines.serve_campaign`) beside the Prefect server, so the Prefect UI lists it and
Dagster starts runs of it with `start_campaign_run` (`run_deployment`, over HTTP).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

from pydantic import AfterValidator, BaseModel, Field

from tasks.pools import Pool

FLOW_NAME = "ppo_campaign"
DEPLOYMENT_NAME = "t1"
DEPLOYMENT = f"{FLOW_NAME}/{DEPLOYMENT_NAME}"
# t1 ui tells its children where the Dagster webserver is (links and evaluation reports).
DAGSTER_URL_ENV = "T1_DAGSTER_URL"

PoolName = Annotated[str, AfterValidator(lambda v: Pool.parse(v).value)]
# The constrained parameter types, shared by `CampaignRequest` and the flow's signature (so
# the Prefect form and the server refuse `steps=0` before a run is created).
PoolVersion = Annotated[
    int | None, Field(ge=1, description="pool version to train on; None: the latest recorded")
]
Steps = Annotated[int | None, Field(ge=1, description="PPO steps; None: the preset's")]
EvalEvery = Annotated[
    int | None,
    Field(ge=1, description="evaluate every K steps (and after the last); None: the preset's"),
]
Preset = Annotated[
    str, Field(min_length=1, description="name under training/presets/ or a TOML path")
]
ClusterAddress = Annotated[
    str | None,
    Field(
        min_length=1,
        description="where the rollout and evaluation trials run: 'local', or a Ray address "
        "(auto, host:6379, ray://host:10001); None: the preset's, else $T1_RAY_ADDRESS",
    ),
]
# One campaign at a time per deployment: a second run waits (AwaitingConcurrencySlot).
CAMPAIGN_CONCURRENCY_LIMIT = 1


class CampaignRequest(BaseModel):
    """A campaign launch, as a user chooses it in the Prefect UI, Dagster or `t1 train`."""

    pool: PoolName = Field(Pool.T1.value, description="pool to train on: t1, rst, tmax, seed")
    pool_version: PoolVersion = None
    preset: Preset = "tiny-cpu"
    steps: Steps = None
    eval_every: EvalEvery = None
    cluster_address: ClusterAddress = None

    def chosen(self) -> dict[str, Any]:
        """Each field as chosen, None where left to its default (or, resuming, to the run's
        own setting): `campaign_plan.campaign_config`'s keywords."""
        return {k: getattr(self, k) if k in self.model_fields_set else None for k in FIELDS}

    def run_name(self) -> str:
        """`<preset>-<pool>-v<version or latest>[-<steps>steps]`: the flow run's name."""
        steps = f"-{self.steps}steps" if self.steps else ""
        return f"{Path(self.preset).stem}-{self.pool}-v{self.pool_version or 'latest'}{steps}"


FIELDS = tuple(CampaignRequest.model_fields)


def run_name_of(parameters: dict[str, Any], steps_of: Callable[[str], int] | None = None) -> str:
    """The flow run's name from raw parameters; never raises (a name callable that raised
    crashed the run with no log: "This run didn't generate logs"). Invalid parameters get
    `<preset>-invalid-parameters`, and the flow then fails with the reason in its log.
    `steps_of(preset)` fills in the preset's steps when the run chose none."""
    fields = {k: parameters[k] for k in CampaignRequest.model_fields if k in parameters}
    try:
        request = CampaignRequest(**{k: v for k, v in fields.items() if v is not None})
        if request.steps is None and steps_of is not None:
            request = request.model_copy(update={"steps": steps_of(request.preset)})
        return request.run_name()
    except Exception:  # noqa: BLE001 - a name must always come back
        preset = str(fields.get("preset") or "campaign")
        return f"{Path(preset).stem or 'campaign'}-invalid-parameters"


QUEUED_STATES = ("SCHEDULED", "PENDING")


def campaign_flow_runs(client: Any, states: tuple[str, ...], limit: int = 200) -> list[Any]:
    """The campaign flow's runs in any of `states` (Prefect state type names)."""
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    return list(
        client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW_NAME])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType(x) for x in states])
                )
            ),
            limit=limit,
        )
    )


def name_queued_runs(client: Any, steps_of: Callable[[str], int]) -> list[str]:
    """Name every waiting campaign flow run after its parameters, steps included
    (`tiny-cpu-t1-v3-20steps`): a run started from Prefect's form waited under a random name
    (`crafty-owl`) until it started, and none showed its pool or steps. Returns the names
    given."""
    runs = campaign_flow_runs(client, QUEUED_STATES)
    named = []
    for run in runs:
        want = run_name_of(dict(run.parameters or {}), steps_of)
        if run.name != want:
            client.update_flow_run(run.id, name=want)
            named.append(want)
    return named


def flow_run_url(flow_run_id: object) -> str | None:
    """The Prefect UI page of a flow run (PREFECT_UI_URL, derived from the API URL); None
    when no UI is known (a temporary server: a relative link to a server that is gone)."""
    from prefect.settings import PREFECT_UI_URL

    base = PREFECT_UI_URL.value() or ""
    if not base.startswith(("http://", "https://")):
        return None
    return f"{base.rstrip('/')}/runs/flow-run/{flow_run_id}"


class NoDeploymentError(RuntimeError):
    """The Prefect server is unreachable or does not serve the campaign deployment."""


def start_campaign_run(
    request: CampaignRequest, *, extra: dict[str, Any] | None = None, tags: tuple[str, ...] = ()
) -> Any:
    """Create a flow run of the deployment (returns at once with the `FlowRun`)."""
    import httpx
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    params = {**request.model_dump(), **(extra or {})}
    try:
        return run_deployment(
            DEPLOYMENT,
            parameters=params,
            timeout=0,
            tags=list(tags),
            flow_run_name=request.run_name(),
        )
    except ObjectNotFound as e:
        where = PREFECT_API_URL.value() or "the temporary Prefect server (PREFECT_API_URL unset)"
        raise NoDeploymentError(
            f"{where} has no deployment {DEPLOYMENT!r}: start it with `t1 ui` (it serves the "
            "campaign), or set PREFECT_API_URL to a server that does"
        ) from e
    except (httpx.HTTPError, OSError) as e:
        raise NoDeploymentError(
            f"cannot reach Prefect at {PREFECT_API_URL.value()!r} ({e}); start `t1 ui` or set "
            "PREFECT_API_URL"
        ) from e


def follow_flow_run(flow_run_id: UUID, timeout_s: float, poll_s: float = 5.0) -> Iterator[Any]:
    """Poll a flow run until it is final, yielding the FlowRun at every poll (the last one
    yielded is final); TimeoutError after `timeout_s`."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(flow_run_id)
            yield run
            if run.state is not None and run.state.is_final():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"flow run {flow_run_id} not finished after {timeout_s:.0f} s")
            time.sleep(poll_s)


def latest_log_line(flow_run_id: UUID | str) -> str | None:
    """The flow run's newest log message (its progress), or None (no logs, or Prefect does
    not answer: a follower goes on)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort

    try:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[UUID(str(flow_run_id))])),
                limit=1,
                sort=LogSort.TIMESTAMP_DESC,
            )
    except Exception:  # noqa: BLE001 - progress only
        return None
    return logs[0].message.strip().splitlines()[0] if logs and logs[0].message.strip() else None


WAITING_STATES = {
    "AwaitingConcurrencySlot": "waiting for the campaign slot: one campaign runs at a time "
    "on the deployment (another is running; this one starts when it ends)",
    "AwaitingRetry": "waiting to retry",
    "Scheduled": "scheduled: waiting for the deployment's server (`t1 ui` serves it) to pick it up",
    "Late": "late: nothing picked it up; is `t1 ui` (the deployment's server) running?",
}


def state_line(name: str) -> str:
    """A flow run state as a follower says it: why a waiting run waits."""
    return f"flow run: {name}" + (f" ({WAITING_STATES[name]})" if name in WAITING_STATES else "")


def state_name(run: Any) -> str:
    return (run.state.name if run.state else None) or "unknown"


def wait_for_flow_run(
    flow_run_id: UUID,
    timeout_s: float,
    on_state: Callable[[str], None] | None = None,
    poll_s: float = 5.0,
) -> Any:
    """Poll a flow run until it is final; returns the FlowRun (TimeoutError after
    `timeout_s`). `on_state` gets each new state name."""
    seen, run = "", None
    for run in follow_flow_run(flow_run_id, timeout_s, poll_s):
        name = state_name(run)
        if name != seen and on_state is not None:
            on_state(name)
        seen = name
    return run
