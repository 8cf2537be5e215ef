"""What stages call to write: `record_tasks`, `record_trials`, `record_audits`, ...

Each call is one atomic commit (see `warehouse.store`) and is idempotent: re-recording rows
whose keys are stored already adds nothing (the first write wins). `store` may be a `Store`,
a path, or None for the default location ($T1_WAREHOUSE, else ./data/warehouse); a missing store is
created.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa

from tasks.model import Task
from tasks.results import TrialResult
from warehouse.records import (
    AuditRecord,
    CampaignRecord,
    EvaluationRecord,
    Record,
    TaskRecord,
    TrajectoryRecord,
    records_table,
    task_record,
    trial_records,
)
from warehouse.schema import table_spec
from warehouse.store import Store, WriteResult

StoreRef = Store | Path | str | None


def writable_store(store: StoreRef) -> Store:
    """`store` itself, or the store at that path (created if missing)."""
    return store if isinstance(store, Store) else Store.open(store, create=True)


def tables_of(records: Iterable[Record]) -> dict[str, pa.Table]:
    """Records of any tables as Arrow tables, grouped by table in first-seen order."""
    by_table: dict[str, list[Record]] = {}
    for rec in records:
        if not isinstance(rec, Record):
            raise ValueError(f"expected warehouse records, got {type(rec).__name__}: {rec!r}")
        by_table.setdefault(rec.table.name, []).append(rec)
    return {name: records_table(recs, table_spec(name)) for name, recs in by_table.items()}


def record_rows(store: StoreRef, records: Iterable[Record]) -> WriteResult:
    """Write records of any tables in one commit, grouped by table in first-seen order."""
    return writable_store(store).append(tables_of(records))


def record_tasks(
    store: StoreRef,
    tasks: Iterable[Task | TaskRecord],
    *,
    pool: str | None = None,
    assertion_counts: Mapping[str, int] | None = None,
    source: str | None = None,
) -> WriteResult:
    """Record task versions (one row per content hash, with lineage and the bundle).

    `pool` names the pool of origin (default: each task's lineage.source_pool);
    `assertion_counts` maps content hash -> number of verifier assertions, where known;
    `source` where the tasks were read from (an imported directory).
    """
    counts = assertion_counts or {}
    rows: list[Record] = []
    for t in tasks:
        if isinstance(t, TaskRecord):
            rows.append(t)
        elif isinstance(t, Task):
            h = t.content_hash
            rows.append(task_record(t, pool=pool, assertion_count=counts.get(h), source=source))
        else:
            raise ValueError(f"expected Task or TaskRecord, got {type(t).__name__}: {t!r}")
    return record_rows(store, rows)


def record_trials(store: StoreRef, results: Iterable[TrialResult]) -> WriteResult:
    """Record trial results and their per-assertion outcomes in one commit."""
    rows: list[Record] = []
    for result in results:
        if not isinstance(result, TrialResult):
            raise ValueError(f"expected TrialResult, got {type(result).__name__}: {result!r}")
        trial, assertions = trial_records(result)
        rows.append(trial)
        rows.extend(assertions)
    return writable_store(store).append(
        {
            "trials": records_table(
                [r for r in rows if r.table.name == "trials"], table_spec("trials")
            ),
            "assertion_results": records_table(
                [r for r in rows if r.table.name == "assertion_results"],
                table_spec("assertion_results"),
            ),
        }
    )


def record_synthesis(
    store: StoreRef,
    *,
    tasks: Iterable[TaskRecord] = (),
    trials: Iterable[TrialResult] = (),
    rows: Iterable[Record] = (),
) -> WriteResult:
    """Record one synthesis step in ONE commit: task rows, trials (with per-assertion rows)
    and `synth_*` rows. A writer killed mid-call leaves all of them or none, which is what
    lets an interrupted synthesis run resume without duplicates or lost candidates."""
    return record_rows(store, synthesis_records(tasks=tasks, trials=trials, rows=rows))


def synthesis_records(
    *,
    tasks: Iterable[TaskRecord] = (),
    trials: Iterable[TrialResult] = (),
    rows: Iterable[Record] = (),
) -> list[Record]:
    """The records `record_synthesis` commits (for a `warehouse.journal.BatchedWriter`)."""
    out: list[Record] = list(tasks)
    for result in trials:
        if not isinstance(result, TrialResult):
            raise ValueError(f"expected TrialResult, got {type(result).__name__}: {result!r}")
        trial, assertions = trial_records(result)
        out.append(trial)
        out.extend(assertions)
    out.extend(rows)
    return out


def record_audits(store: StoreRef, audits: Iterable[AuditRecord]) -> WriteResult:
    return record_rows(store, _only(audits, AuditRecord))


def record_trajectories(store: StoreRef, rows: Iterable[TrajectoryRecord]) -> WriteResult:
    return record_rows(store, _only(rows, TrajectoryRecord))


def record_evaluations(store: StoreRef, rows: Iterable[EvaluationRecord]) -> WriteResult:
    return record_rows(store, _only(rows, EvaluationRecord))


def record_campaign(store: StoreRef, row: CampaignRecord) -> WriteResult:
    """A campaign run's start or end row (see `warehouse.provenance`)."""
    return record_rows(store, _only([row], CampaignRecord))


def _only(records: Iterable[Record], cls: type[Record]) -> list[Record]:
    out = list(records)
    for rec in out:
        if not isinstance(rec, cls):
            raise ValueError(f"expected {cls.__name__}, got {type(rec).__name__}: {rec!r}")
    return out
