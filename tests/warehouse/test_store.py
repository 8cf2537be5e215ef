"""The store's contracts: schema-true records, idempotent commits, compaction, cleanup."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from tasks.results import (
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    TrialResult,
    VerifierReport,
)
from warehouse import (
    AuditRecord,
    EvaluationRecord,
    Store,
    StoreNotFoundError,
    TrajectoryRecord,
    open_snapshot,
    record_audits,
    record_evaluations,
    record_tasks,
    record_trajectories,
    record_trials,
    resolve_store_path,
)
from warehouse.records import RECORD_TYPES, TaskRecord, records_table
from warehouse.schema import SCHEMA_VERSION, TABLES


def test_every_table_has_a_record_type_with_the_same_fields() -> None:
    assert set(RECORD_TYPES) == set(TABLES)
    for name, cls in RECORD_TYPES.items():
        assert list(cls.model_fields) == TABLES[name].schema.names, name


def test_store_location_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("T1_WAREHOUSE", raising=False)
    assert resolve_store_path() == Path("data/warehouse")  # not ./warehouse: the package
    monkeypatch.setenv("T1_WAREHOUSE", str(tmp_path / "env-store"))
    assert resolve_store_path() == tmp_path / "env-store"
    assert resolve_store_path(tmp_path / "given") == tmp_path / "given"


def test_readers_never_create_a_store(store_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="no warehouse"):
        open_snapshot(store_path)
    assert not store_path.exists()


def test_task_rows_round_trip_and_rewrites_are_idempotent(store_path: Path, task_factory) -> None:
    a = task_factory("alpha", payload=b"x" * 100)
    b = task_factory(
        "beta",
        parents=(a,),
        round=1,
        operator="mutate",
        family="f",
        root_seed=a.content_hash,
        solution=False,
    )
    first = record_tasks(store_path, [a, b, a], pool="rst", assertion_counts={a.content_hash: 4})
    assert first.written == {"tasks": 2}  # the repeated `a` in the batch is dropped
    again = record_tasks(store_path, [b, a], pool="other")
    assert again.written == {"tasks": 0} and again.generation == first.generation
    with open_snapshot(store_path) as snap:
        rows = {r["task_id"]: r for r in snap.rows("SELECT * FROM tasks")}
    assert set(rows) == {"alpha", "beta"}
    assert rows["alpha"]["origin_pool"] == "rst"  # first write wins
    assert rows["alpha"]["assertion_count"] == 4 and rows["beta"]["assertion_count"] is None
    assert rows["alpha"]["solution_steps"] == 3 and rows["beta"]["solution_steps"] is None
    assert rows["beta"]["solution_less"] and rows["beta"]["parents"] == [a.content_hash]
    rec = TaskRecord.from_row(rows["beta"])
    assert rec.bundle["tests/data.bin"] == b"" and rec.round == 1 and rec.operator == "mutate"


def test_trials_and_assertions(store_path: Path) -> None:
    h = "a" * 64
    result = TrialResult(
        trial_id="t-1",
        task_id="alpha",
        task_hash=h,
        agent="oracle",
        backend="local",
        agent_s=1.5,
        failure_mode=FailureMode.NONE,
        report=VerifierReport(
            source=ReportSource.CTRF,
            assertions=[
                AssertionResult(name="x", status=AssertionStatus.PASSED),
                AssertionResult(name="y", status=AssertionStatus.FAILED, message="boom"),
            ],
        ),
    )
    timeout = result.model_copy(
        update={"trial_id": "t-2", "failure_mode": FailureMode.AGENT_TIMEOUT}
    )
    w = record_trials(store_path, [result, timeout, result])
    assert w.written == {"trials": 2, "assertion_results": 4}
    with open_snapshot(store_path) as snap:
        trials = snap.rows(
            "SELECT trial_id, assertions_passed, assertions_total, resolved, "
            "failure_mode FROM trials ORDER BY trial_id"
        )
        per = snap.sql(
            "SELECT trial_id, name, ok, position FROM assertion_results ORDER BY trial_id, position"
        ).fetchall()
    assert trials == [
        {
            "trial_id": "t-1",
            "assertions_passed": 1,
            "assertions_total": 2,
            "resolved": False,
            "failure_mode": "none",
        },
        {
            "trial_id": "t-2",
            "assertions_passed": 1,
            "assertions_total": 2,
            "resolved": False,
            "failure_mode": "agent_timeout",
        },
    ]
    assert per[:2] == [("t-1", "x", True, 0), ("t-1", "y", False, 1)]


def test_audits_trajectories_evaluations(store_path: Path) -> None:
    h = "b" * 64
    at = datetime(2025, 1, 1, tzinfo=UTC)
    record_audits(
        store_path,
        [
            AuditRecord(
                task_hash=h,
                judge="j",
                audit_version="v1",
                scores={"clarity": 0.5, "solvable": 1.0},
                verdict="accept",
                reasons=["ok"],
                audited_at=at,
            )
        ],
    )
    record_trajectories(
        store_path,
        [
            TrajectoryRecord(
                campaign="c",
                step=s,
                task_hash=h,
                sample=i,
                weight_version=s,
                reward=0.5,
                assertions_passed=1,
                assertions_total=2,
                turns=3,
                tokens=100,
            )
            for s in range(2)
            for i in range(3)
        ],
    )
    record_evaluations(
        store_path,
        [
            EvaluationRecord(
                campaign="c",
                checkpoint="step-1",
                benchmark="tb2",
                task_hash=h,
                task_id="alpha",
                resolved=True,
                dense_score=1.0,
                category="debugging",
            )
        ],
    )
    with open_snapshot(store_path) as snap:
        audit = AuditRecord.from_row(snap.rows("SELECT * FROM audits")[0])
        assert audit.scores == {"clarity": 0.5, "solvable": 1.0} and audit.audited_at == at
        assert snap.sql("SELECT count(*), sum(reward) FROM trajectories").fetchone() == (6, 3.0)
        assert snap.sql("SELECT resolved FROM evaluations").fetchall() == [(True,)]
    with pytest.raises(ValueError, match="expected AuditRecord"):
        record_audits(
            store_path,
            [
                TrajectoryRecord(
                    campaign="c",
                    step=0,
                    task_hash=h,
                    weight_version=0,
                    reward=0,
                    turns=0,
                    tokens=0,
                    assertions_passed=0,
                    assertions_total=0,
                )
            ],
        )


def test_rows_that_do_not_fit_the_schema_are_refused(store_path: Path) -> None:
    store = Store.open(store_path, create=True)
    spec = TABLES["pool_members"]
    good = records_table([], spec)
    with pytest.raises(ValueError, match="missing \\['score'\\]"):
        store.append({"pool_members": good.drop_columns(["score"])})
    nulls = pa.table({n: pa.nulls(1, good.schema.field(n).type) for n in good.schema.names})
    with pytest.raises(ValueError, match="not nullable"):
        store.append({"pool_members": nulls})
    with pytest.raises(ValueError, match="unknown warehouse table 'nope'"):
        store.append({"nope": good})


def _traj(step: int, n: int) -> pa.Table:
    recs = [
        TrajectoryRecord(
            campaign="c",
            step=step,
            task_hash="c" * 64,
            sample=i,
            weight_version=step,
            reward=float(i),
            assertions_passed=0,
            assertions_total=1,
            turns=1,
            tokens=1,
        )
        for i in range(n)
    ]
    return records_table(recs, TABLES["trajectories"])


def test_compaction_merges_parts_and_old_snapshots_keep_working(store_path: Path) -> None:
    store = Store.open(store_path, create=True)
    for step in range(5):
        store.append({"trajectories": _traj(step, 10)})
    assert len(store.read_manifest().parts("trajectories")) == 5
    old = open_snapshot(store)
    result = store.compact()
    assert result.merged == {"trajectories": 5}
    manifest = store.read_manifest()
    assert len(manifest.parts("trajectories")) == 1 and len(manifest.retired) == 5
    with open_snapshot(store) as new:
        assert new.sql("SELECT count(*), sum(reward) FROM trajectories").fetchone() == (50, 225.0)
    # The snapshot opened before the compaction still reads its (retired) parts.
    assert old.sql("SELECT count(*) FROM trajectories").fetchone() == (50,)
    old.close()
    # After the grace period the retired parts are deleted.
    cleaned = store.compact(retire_grace_s=0)
    assert len(cleaned.deleted_files) == 5 and store.read_manifest().retired == []
    assert len(list((store_path / "trajectories").glob("*.parquet"))) == 1
    # Writing duplicates after compaction is still a no-op.
    assert store.append({"trajectories": _traj(0, 10)}).written == {"trajectories": 0}


def test_orphans_of_killed_writers_are_ignored_then_cleaned(store_path: Path) -> None:
    store = Store.open(store_path, create=True)
    store.append({"trajectories": _traj(0, 3)})
    tdir = store_path / "trajectories"
    (tdir / ".tmp-999999-deadbeef.parquet").write_bytes(b"PAR1 half a file")
    (tdir / "part-0000000009-orphan.parquet").write_bytes(b"renamed but never committed")
    (store_path / ".tmp-999999-x.json").write_text("{")
    with open_snapshot(store) as snap:
        assert snap.sql("SELECT count(*) FROM trajectories").fetchone() == (3,)
    deleted = store.compact().deleted_files
    assert deleted == sorted(
        [
            ".tmp-999999-x.json",
            "trajectories/.tmp-999999-deadbeef.parquet",
            "trajectories/part-0000000009-orphan.parquet",
        ]
    )
    meta = json.loads((store_path / "_meta.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION and len(meta["tables"]["trajectories"]) == 1
