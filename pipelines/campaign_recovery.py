"""After a kill, the three records of a campaign run agree: Prefect's flow run, the Dagster
run that followed it and the warehouse's `campaigns` rows.

A flow run whose process is gone (the Prefect server, `t1 ui` or the machine was killed while
it ran; its runner could not say so to a server that was down) stayed `Running` in Prefect and
held the deployment's only concurrency slot: new runs waited with no reason shown, while
Dagster said Failure and the warehouse said failed (or, after a SIGKILL, started).
`reconcile_campaign_runs` marks such a run `Crashed` (which releases its slot: Prefect frees a
deployment's slot when a run leaves Running, and the lease of the old server is gone with it),
ends its `campaigns` row as failed with the same reason, and says what it did.
`fail_orphaned_followers` fails the Dagster `train_campaign` runs still `STARTED` whose flow
run has ended that way. The deployment's server (`pipelines.serve_campaign`) reconciles when
it starts and every half minute; `t1 ui` fails the followers when it starts.

A run's process is named by the flow itself (`infrastructure_pid` = `host:pid`, set when it
labels the run); a pid that now belongs to a process started after the run is not it.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines.campaign_deployment import campaign_flow_runs

# Tag of a Dagster `train_campaign` run: the flow run it started and follows.
FLOW_RUN_TAG = "prefect_flow_run_id"
LIVE_STATES = ("PENDING", "RUNNING", "CANCELLING")


def process_label() -> str:
    """This process as a flow run records it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def process_started(pid: int) -> datetime | None:
    """When process `pid` of this host started (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat: start time in clock ticks after boot
        return datetime.fromtimestamp(_boot_time() + ticks / os.sysconf("SC_CLK_TCK"), tz=UTC)
    except (OSError, ValueError, IndexError):
        return None


def run_process_alive(
    label: str | None, since: datetime | None, host: str | None = None
) -> bool | None:
    """Whether the process `label` (`host:pid`) a flow run recorded still runs: None when it
    cannot be told here (no label, another host); False when the pid is gone or now belongs
    to a process started after `since` (the run's start)."""
    if not label or ":" not in label:
        return None
    where, _, pid = label.rpartition(":")
    if where != (host or socket.gethostname()) or not pid.isdigit():
        return None
    started = process_started(int(pid))
    if started is None:
        return False
    return since is None or started <= since + timedelta(seconds=5)


def orphaned(run: Any, *, runner_started: datetime | None) -> str | None:
    """Why a live-looking campaign flow run has no process any more, or None while it may
    still run. `runner_started`: when the deployment's runner (re)started; a deployment run
    that entered its state before that and never named its process belonged to the runner
    that died (one the new runner just picked up is younger)."""
    state = run.state.type.value if run.state is not None else ""
    if state not in LIVE_STATES:
        return None
    since = run.start_time or run.created
    alive = run_process_alive(run.infrastructure_pid, since)
    if alive is False:
        return f"its process ({run.infrastructure_pid}) is gone"
    entered = getattr(run.state, "timestamp", None)
    if (
        alive is None
        and runner_started is not None
        and run.deployment_id is not None
        and entered is not None
        and entered < runner_started
    ):
        return "its runner stopped (the deployment's server restarted)"
    return None


def crashed_message(
    why: str,
    run_dir: str | None,
    params: dict[str, Any] | None = None,
    default_store: Path | str | None = None,
) -> str:
    again = (
        f"; continue it with `{resume_command(run_dir, params or {}, default_store)}`"
        if run_dir
        else ""
    )
    return f"crashed: {why} (the Prefect server or `t1 ui` stopped while it ran){again}"


def resume_command(
    run_dir: str, params: dict[str, Any], default_store: Path | str | None = None
) -> str:
    """`t1 train --resume RUN_DIR`: the run's config.json records its settings (preset
    settings, steps, cadences, pool and version, store, cluster) and `--resume` reads them.
    Only a store the run left to its process's default (no `store` parameter: config.json
    says null, and $T1_WAREHOUSE may differ where it is resumed) is added, as `--store`
    (`default_store`, else this process's default)."""
    from warehouse.store import resolve_store_path

    words = ["t1", "train", "--resume", run_dir]
    if not params.get("store"):
        words += ["--store", str(resolve_store_path(default_store))]
    return shlex.join(words)


def end_campaign_rows(store: Path | str | None, flow_run_id: str, detail: str) -> list[str]:
    """End, as failed with `detail`, the `campaigns` runs of `flow_run_id` that have a start
    row and no end (a SIGKILL left them `started`); returns their run ids."""
    from warehouse import CampaignRecord, CampaignStatus, StoreNotFoundError, record_campaign
    from warehouse.snapshot import Snapshot

    try:
        with Snapshot.open(store) as snap:
            rows = snap.rows(
                "SELECT * FROM campaign_runs WHERE prefect_flow_run_id = $id AND status = "
                "'started'",
                {"id": flow_run_id},
            )
    except StoreNotFoundError:
        return []
    now = datetime.now(UTC)
    ended = []
    for row in rows:
        fields = {k: row[k] for k in CampaignRecord.model_fields if k in row}
        end = CampaignRecord.model_validate(
            {**fields, "status": CampaignStatus.FAILED, "ended_at": now, "detail": detail,
             "recorded_at": now}
        )  # fmt: skip
        record_campaign(store, end)
        ended.append(end.run_id)
    return ended


def reconcile_campaign_runs(
    client: Any,
    *,
    runner_started: datetime | None,
    default_store: Path | str | None = None,
    say: Callable[[str], None] = print,
) -> list[str]:
    """Crash every campaign flow run whose process is gone, end its `campaigns` rows; returns
    the flow run ids crashed."""
    from prefect.states import Crashed

    runs = campaign_flow_runs(client, LIVE_STATES)
    crashed = []
    for run in runs:
        why = orphaned(run, runner_started=runner_started)
        if why is None:
            continue
        params = run.parameters or {}
        run_dir = _run_dir(run)
        message = crashed_message(why, run_dir, params, default_store)
        client.set_flow_run_state(run.id, Crashed(message=message), force=True)
        store = params.get("store") or default_store
        ended = end_campaign_rows(store, str(run.id), message)
        say(f"flow run {run.name} ({run.id}) marked Crashed: {why}; its campaign slot is free"
            + (f"; campaigns {', '.join(ended)} ended as failed" if ended else ""))  # fmt: skip
        crashed.append(str(run.id))
    return crashed


def _run_dir(run: Any) -> str | None:
    """The campaign's run directory, from the flow run's `campaign:<run id>` tag and its
    runs_dir parameter (None when the run never got that far)."""
    tag = next((t for t in run.tags or () if t.startswith("campaign:")), None)
    if tag is None:
        return None
    runs_dir = (run.parameters or {}).get("runs_dir") or os.environ.get("T1_RUNS_DIR") or "runs"
    return str(Path(runs_dir) / tag.removeprefix("campaign:"))


def fail_orphaned_followers(
    instance: Any, final_state: Callable[[str], str | None], say: Callable[[str], None] = print
) -> list[str]:
    """Fail the Dagster runs that follow a flow run (tag `prefect_flow_run_id`) and are still
    STARTED although that flow run ended Crashed, Failed or Cancelled (their process died
    with `t1 ui`); `final_state(flow_run_id)` is that flow run's state name, or None."""
    import dagster as dg

    failed = []
    records = instance.get_run_records(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING],
            job_name="train_campaign",
        ),  # fmt: skip
        limit=100,
    )
    for record in records:
        run = record.dagster_run
        flow_run_id = run.tags.get(FLOW_RUN_TAG)
        state = final_state(flow_run_id) if flow_run_id else None
        if state not in ("Crashed", "Failed", "Cancelled"):
            continue
        instance.report_run_failed(
            run, f"its campaign's flow run {flow_run_id} ended {state} while nothing followed it"
        )
        say(f"Dagster run {run.run_id} (train_campaign) marked failed: flow run {state}")
        failed.append(run.run_id)
    return failed
