"""The main job: run the `build_pools` job headless, stage by stage, into the persistent
Dagster instance (so the UI shows the runs afterwards, as runs of `build_pools`).

seeds -> synthesis rounds (in order) -> validation trials -> audit -> pools -> reports, with
every asset check beside its asset.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.utils import make_new_run_id

from pipelines.definitions import defs
from pipelines.defs.jobs import POOL_LIMIT, STAGES
from pipelines.defs.resources import ForgeConfig

# The synthesis and audit assets' pools (`pipelines.defs.jobs`) allow one step at a time.
INSTANCE_CONCURRENCY = f"concurrency:\n  pools:\n    default_limit: {POOL_LIMIT}\n"


def dagster_home() -> Path:
    """DAGSTER_HOME, defaulting to ./.dagster (created, its storage initialized), so runs
    persist between commands.

    Its dagster.yaml limits each concurrency pool to one step (`INSTANCE_CONCURRENCY`).
    The storage is created here, once: the webserver and the daemon creating a fresh
    instance's SQLite storage at the same moment left two alembic heads behind, and the code
    location failed to load ("more than one head present").
    """
    home = Path(os.environ.get("DAGSTER_HOME", ".dagster")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    text = config.read_text()
    if "concurrency:" not in text:  # also brings an instance made before the pools forward
        config.write_text(text.rstrip("\n") + "\n" + INSTANCE_CONCURRENCY)
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get():
        pass
    return home


@dataclass
class StepOutcome:
    step: str
    success: bool
    seconds: float
    checks: dict[str, str] = field(default_factory=dict)  # name -> pass | warn | fail
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_id: str = ""


def forge_run_config(forge: ForgeConfig, **ops: dict[str, Any]) -> dict[str, Any]:
    """Run config that sets the `forge` resource to `forge` (and `ops` configs)."""
    config: dict[str, Any] = {
        "resources": {"forge": {"config": forge.model_dump()}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    if ops:
        config["ops"] = {name: {"config": c} for name, c in ops.items()}
    return config


def check_outcome(evaluation: dg.AssetCheckEvaluation) -> str:
    if evaluation.passed:
        return "pass"
    return "warn" if evaluation.severity == dg.AssetCheckSeverity.WARN else "fail"


@contextmanager
def user_log_lines(
    instance: dg.DagsterInstance, run_id: str, on_log: Callable[[str], None], poll_s: float = 2.0
) -> Iterator[None]:
    """While the block runs, pass each message the run's assets log (their `context.log`
    lines, not Dagster's own events) to `on_log` as `<step>: <message>`, within `poll_s`."""
    seen = 0
    stop = threading.Event()

    def flush() -> None:
        nonlocal seen
        entries = instance.all_logs(run_id)
        for entry in entries[seen:]:
            if entry.dagster_event is None and entry.user_message:
                on_log(f"{entry.step_key or 'run'}: {entry.user_message}")
        seen = len(entries)

    def tail() -> None:
        while not stop.wait(poll_s):
            try:
                flush()
            except Exception:  # noqa: BLE001 - the run goes on; its lines are in the UI
                return

    thread = threading.Thread(target=tail, daemon=True, name="dagster-log-tail")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        with suppress(Exception):
            flush()


def run_stage(
    names: tuple[str, ...],
    forge: ForgeConfig,
    instance: dg.DagsterInstance,
    on_log: Callable[[str], None] | None = None,
) -> StepOutcome:
    """One run of `build_pools` restricted to `names` (and their checks); `on_log` hears the
    assets' log lines as they come (`user_log_lines`)."""
    t0 = time.monotonic()
    job = defs().resolve_job_def("build_pools")
    run_id = make_new_run_id()
    with user_log_lines(instance, run_id, on_log) if on_log else nullcontext():
        result = job.execute_in_process(
            run_config=forge_run_config(forge),
            instance=instance,
            asset_selection=[dg.AssetKey(n) for n in names],
            raise_on_error=False,
            run_id=run_id,
        )
    metadata = {
        e.materialization.asset_key.to_user_string(): {
            k: getattr(v, "value", v) for k, v in e.materialization.metadata.items()
        }
        for e in result.get_asset_materialization_events()
    }
    return StepOutcome(
        step=", ".join(names),
        success=result.success,
        seconds=time.monotonic() - t0,
        checks={e.check_name: check_outcome(e) for e in result.get_asset_check_evaluations()},
        metadata=metadata,
        run_id=result.run_id,
    )


def run_main_job(
    forge: ForgeConfig,
    instance: dg.DagsterInstance,
    on_step: Callable[[StepOutcome], None] | None = None,
    on_log: Callable[[str], None] | None = None,
) -> list[StepOutcome]:
    """Run every stage of `build_pools`; stops after the first failed stage (its outcome is
    last). `on_log` hears the assets' progress lines while they run."""
    steps: list[StepOutcome] = []
    for names in STAGES:
        outcome = run_stage(names, forge, instance, on_log)
        steps.append(outcome)
        if on_step:
            on_step(outcome)
        if not outcome.success:
            break
    return steps
