"""The loop, headless (the end of `t1 demo`): a Prefect server and the campaign deployment
start, Dagster's `train_campaign` job runs the campaign on the latest t1 version through them,
and the evaluation comes back into `evaluation_results` with its pool version; then
`evaluation_summary` is refreshed. The same path a UI user clicks, without the browser.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.utils import make_new_run_id

from pipelines.definitions import defs
from pipelines.defs.evaluation import EVALUATION_RESULTS
from pipelines.defs.resources import ForgeConfig
from pipelines.main_job import forge_run_config, user_log_lines
from pipelines.services import (
    PrefectDatabaseInUseError,
    ServiceError,
    Services,
    free_port,
    port_in_use,
    prefect_database,
    prefect_env,
    prefect_services,
)


@dataclass
class LoopOutcome:
    success: bool
    dagster_run_id: str
    evaluation: dict[str, Any] = field(default_factory=dict)  # evaluation_results metadata
    error: str = ""


def run_campaign_loop(
    forge: ForgeConfig,
    instance: dg.DagsterInstance,
    *,
    prefect_home: Path,
    log_path: Path,
    steps: int | None = None,
    prefect_port: int | None = None,
    on_log: Callable[[str], None] | None = None,
) -> LoopOutcome:
    """Serve the deployment, run `train_campaign` on t1 in process, read the evaluation back.

    The Prefect server listens on `prefect_port` when it is free (so the links recorded stay
    valid under `t1 ui` with the same port and home), else on any free port. The servers'
    output goes to `log_path`; they are stopped before this returns. `on_log` hears the
    campaign's progress as `train_campaign` relays it.
    """
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

    host = "127.0.0.1"
    port = prefect_port if prefect_port and not port_in_use(host, prefect_port) else free_port()
    env = prefect_env(host, port, prefect_home)
    before = latest_evaluation(instance)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    database = ExitStack()
    try:
        database.enter_context(prefect_database(prefect_home, env["PREFECT_API_URL"]))
    except PrefectDatabaseInUseError as e:
        return LoopOutcome(False, "", error=str(e))
    with database, open(log_path, "ab") as log, Services(env, log=log) as servers:
        try:
            for service in prefect_services(host, port):
                servers.start(service)
        except ServiceError as e:
            return LoopOutcome(False, "", error=f"{e} (its output: {log_path})")
        settings = {PREFECT_API_URL: env["PREFECT_API_URL"], PREFECT_UI_URL: env["PREFECT_UI_URL"]}
        with temporary_settings(updates=settings):
            config = {"steps": steps} if steps else {}
            job = defs().resolve_job_def("train_campaign")
            run_id = make_new_run_id()
            with user_log_lines(instance, run_id, on_log) if on_log else nullcontext():
                result = job.execute_in_process(
                    run_config=forge_run_config(forge, campaign_flow_run=config),
                    instance=instance,
                    raise_on_error=False,
                    run_id=run_id,
                )
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        error = failures[0].step_failure_data.error if failures else None
        message = error.message if error is not None else "failed"
        return LoopOutcome(False, result.run_id, error=message.strip().splitlines()[0])
    record = latest_evaluation(instance)
    if record is None or (before is not None and record.storage_id == before.storage_id):
        return LoopOutcome(False, result.run_id, error="the campaign reported no evaluation")
    mat = record.asset_materialization
    metadata = {k: getattr(v, "value", v) for k, v in (mat.metadata if mat else {}).items()}
    summary = (
        defs()
        .resolve_job_def("evaluation_summary_job")
        .execute_in_process(
            run_config=forge_run_config(forge), instance=instance, raise_on_error=False
        )
    )
    return LoopOutcome(summary.success, result.run_id, metadata)


def latest_evaluation(instance: dg.DagsterInstance) -> dg.EventLogRecord | None:
    records = instance.fetch_materializations(EVALUATION_RESULTS, limit=1).records
    return records[0] if records else None
