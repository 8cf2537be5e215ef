"""A campaign run's provenance in the warehouse: a `campaigns` row when it starts and one when
it ends (finished, or failed with the error), so SQL can say which pool version, audit and
orchestrator runs a checkpoint came from (docs/orchestration.md, "Provenance in SQL").

Prefect- and Dagster-free: the flow and `t1 train --no-flow` both wrap `run_campaign` in
`recorded_campaign`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from pipelines.campaign_plan import CampaignTasks
from training.campaign_config import CampaignConfig
from warehouse import CampaignRecord, CampaignStatus, record_campaign

# Where a run's files go, which run it is, and labels (the preset's name; the pool version is
# a column of its own): not settings, so not in the hash.
UNHASHED_FIELDS = frozenset(
    {"run_id", "resume_from", "runs_dir", "store", "preset", "pool_version"}
)


def config_hash(cfg: CampaignConfig) -> str:
    """sha256 of the run's settings (the config less its id, resume path and locations):
    two runs with the same settings share it."""
    data = cfg.model_dump_json(exclude=set(UNHASHED_FIELDS))
    return hashlib.sha256(data.encode()).hexdigest()


def start_record(
    cfg: CampaignConfig,
    split: CampaignTasks,
    *,
    preset: str | None = None,
    prefect_flow_run_id: str | None = None,
    dagster_run_id: str | None = None,
) -> CampaignRecord:
    """The `campaigns` row of a run that starts now on `split`'s pool version. `preset`
    None: the config's (a run recorded before configs named theirs: its campaign name)."""
    if cfg.run_id is None:
        raise ValueError("a recorded campaign needs its run id before it starts (cfg.run_id)")
    return CampaignRecord(
        run_id=cfg.run_id,
        started_at=datetime.now(UTC),
        status=CampaignStatus.STARTED,
        pool=split.pool,
        pool_version=split.pool_version,
        audit_version=split.audit_version,
        preset=preset or cfg.preset or cfg.campaign,
        config_hash=config_hash(cfg),
        steps=cfg.steps,
        prefect_flow_run_id=prefect_flow_run_id,
        dagster_run_id=dagster_run_id,
        resumed_from=str(cfg.resume_from) if cfg.resume_from is not None else None,
    )


def end_record(start: CampaignRecord, error: BaseException | None) -> CampaignRecord:
    """The row that closes `start`: finished, or failed with the error's first line."""
    detail = None
    if error is not None:
        text = str(error).strip().splitlines()
        detail = f"{type(error).__name__}: {text[0] if text else ''}"[:1000]
    return start.model_copy(
        update={
            "status": CampaignStatus.FAILED if error is not None else CampaignStatus.FINISHED,
            "ended_at": datetime.now(UTC),
            "detail": detail,
            "recorded_at": datetime.now(UTC),
        }
    )


@contextmanager
def recorded_campaign(cfg: CampaignConfig, start: CampaignRecord) -> Iterator[CampaignRecord]:
    """Record `start` now and its end when the block exits (failed on any exception,
    cancellation included, which is re-raised)."""
    record_campaign(cfg.store, start)
    try:
        yield start
    except BaseException as e:
        record_campaign(cfg.store, end_record(start, e))
        raise
    record_campaign(cfg.store, end_record(start, None))
