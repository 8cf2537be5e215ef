"""The main job: materialize the whole asset graph headless, in dependency order, into the
persistent Dagster instance (so the UI shows the runs afterwards).

seeds -> synthesis rounds (one partition each) -> validation trials -> audit -> pools ->
reports, with every asset check beside its asset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from pipelines.definitions import defs
from pipelines.defs.resources import ForgeConfig

PRE_SYNTHESIS = ("seed_corpus", "tmax_pool")
POST_SYNTHESIS = ("validation_trials", "audit_results", "rst_pool", "t1_pool", "pool_reports",
                  "evaluation_summary")  # fmt: skip


def dagster_home() -> Path:
    """DAGSTER_HOME, defaulting to ./.dagster (created), so runs persist between commands."""
    home = Path(os.environ.get("DAGSTER_HOME", ".dagster")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


@dataclass
class StepOutcome:
    step: str
    success: bool
    seconds: float
    checks: dict[str, bool] = field(default_factory=dict)
    metadata: dict[str, object] = field(default_factory=dict)


def _materialize(
    defs_obj: dg.Definitions,
    names: tuple[str, ...],
    forge: ForgeConfig,
    instance: dg.DagsterInstance,
    partition_key: str | None = None,
) -> StepOutcome:
    t0 = time.monotonic()
    assets = [a for a in defs_obj.assets or [] if not isinstance(a, dg.AssetSpec)]
    checks = list(defs_obj.asset_checks or [])
    selection = dg.AssetSelection.assets(*names) | dg.AssetSelection.checks_for_assets(*names)
    result = dg.materialize(
        [*assets, *checks],
        selection=selection,
        partition_key=partition_key,
        resources={"forge": forge},
        instance=instance,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    metadata: dict[str, object] = {}
    for name in names:
        for mat in result.asset_materializations_for_node(name):
            metadata[name] = {k: getattr(v, "value", v) for k, v in mat.metadata.items()}
    evaluations = result.get_asset_check_evaluations()
    return StepOutcome(
        step=", ".join(names) + (f" [{partition_key}]" if partition_key else ""),
        success=result.success,
        seconds=time.monotonic() - t0,
        checks={e.check_name: e.passed for e in evaluations},
        metadata=metadata,
    )


def run_main_job(
    forge: ForgeConfig,
    instance: dg.DagsterInstance,
    on_step: Callable[[StepOutcome], None] | None = None,
) -> list[StepOutcome]:
    """Materialize everything; stops after the first failed step (its outcome is last)."""
    d = defs()
    steps: list[StepOutcome] = []

    def step(names: tuple[str, ...], partition: str | None = None) -> bool:
        outcome = _materialize(d, names, forge, instance, partition)
        steps.append(outcome)
        if on_step:
            on_step(outcome)
        return outcome.success

    if not step(PRE_SYNTHESIS):
        return steps
    rounds = [str(r) for r in range(1, forge.rounds + 1)]
    instance.add_dynamic_partitions("synthesis_rounds", rounds)
    for r in rounds:
        if not step(("synthesis_round",), r):
            return steps
    step(POST_SYNTHESIS)
    return steps
