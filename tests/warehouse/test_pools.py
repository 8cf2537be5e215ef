"""Pools: immutable ranked versions, loading, and export to Parquet + Harbor directories."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.harbor import load_harbor
from tasks.pools import Pool
from warehouse import (
    PoolMemberRecord,
    export_pool,
    load_pool,
    open_snapshot,
    pool_tasks,
    record_pool,
    record_rows,
    record_tasks,
)

SEEDS = Path(__file__).resolve().parents[2] / "tasks" / "seeds"


def test_versions_are_numbered_immutable_and_need_recorded_tasks(store_path, task_factory) -> None:
    a, b, c = (task_factory(x) for x in "abc")
    record_tasks(store_path, [a, b])
    with pytest.raises(ValueError, match="not recorded tasks"):
        record_pool(store_path, "t1", [a.content_hash, c.content_hash])
    v1 = record_pool(store_path, "t1", [(b.content_hash, 0.9), (a.content_hash, 0.5)])
    assert (v1.version, v1.tasks, v1.written) == (1, 2, 2)
    # Same members again under the same version: idempotent.
    assert record_pool(store_path, "t1", [b, a], version=1).written == 0
    # The same ranking with no version given is a re-run of v1, not a v2.
    again = record_pool(store_path, "t1", [(b.content_hash, 0.9), (a.content_hash, 0.5)])
    assert (again.version, again.written) == (1, 0)
    with pytest.raises(ValueError, match="immutable"):
        record_pool(store_path, "t1", [a, b], version=1)
    # Tasks given alongside are recorded in the same commit.
    v2 = record_pool(store_path, "t1", [c, a], tasks=[c])
    assert v2.version == 2
    table = load_pool(store_path, "t1")
    assert table.column("task_id").to_pylist() == ["c", "a"]
    assert table.column("rank").to_pylist() == [1, 2]
    old = load_pool(store_path, "t1", version=1, bundles=False)
    assert old.column("task_id").to_pylist() == ["b", "a"] and "bundle" not in old.column_names
    assert old.column("score").to_pylist() == [0.9, 0.5]
    with pytest.raises(ValueError, match="unknown pool 'nope'; pools are: seed, rst, t1"):
        load_pool(store_path, "nope")
    with pytest.raises(ValueError, match="pool 'rst' has no recorded version"):
        load_pool(store_path, "rst")
    with pytest.raises(ValueError, match="more than once"):
        record_pool(store_path, "t1", [a, a])


def test_pool_names_are_one_lowercase_vocabulary_in_python_and_sql(store_path, task_factory):
    """Pools were once written as T1/RST/TMax while the docs said t1: `WHERE pool = 't1'`
    returned 0 rows with exit 0. Names are stored lowercase, and SQL compares them case-blind
    (rows an older t1-forge wrote as 'T1' included)."""
    a, b = task_factory("a"), task_factory("b")
    pv = record_pool(store_path, "T1", [a], tasks=[a, b])
    assert pv.pool is Pool.T1 and pv.version == 1
    record_rows(
        store_path, [PoolMemberRecord(pool="T1", pool_version=2, task_hash=b.content_hash, rank=1)]
    )
    with open_snapshot(store_path) as snap:
        for literal in ("t1", "T1"):
            rows = snap.sql(
                f"SELECT pool, pool_version FROM pool_members WHERE pool = '{literal}' ORDER BY 2"
            ).rows
            assert rows == [("t1", 1), ("t1", 2)], literal
        assert snap.sql("SELECT pool, tasks FROM pools ORDER BY pool_version").rows == [
            ("t1", 1),
            ("t1", 1),
        ]
        assert snap.sql("SELECT count(*) FROM tasks WHERE origin_pool = 'T1'").rows == [(2,)]
    assert load_pool(store_path, Pool.T1).column("task_id").to_pylist() == ["b"]
    assert record_pool(store_path, "t1", [a]).version == 3  # numbering continues across case
    with pytest.raises(ValueError, match="unknown pool 'T2'"):
        record_pool(store_path, "T2", [a])


def test_export_round_trips_to_harbor_directories(store_path, task_factory, tmp_path) -> None:
    seeds = [load_harbor(d) for d in sorted(SEEDS.iterdir())[:3] if (d / "task.toml").exists()]
    child = task_factory(
        "child", parents=(seeds[0],), round=1, operator="mutate", root_seed=seeds[0].content_hash
    )
    same_id = task_factory("child", parents=(seeds[1],), round=1)  # two members share an id
    members = [child, *seeds, same_id]
    record_pool(store_path, "t1", members, tasks=members)

    dest = tmp_path / "export" / "t1"
    result = export_pool(store_path, "t1", dest)
    assert result.tasks == len(members) and result.version == 1

    table = pq.read_table(dest / "pool.parquet")
    assert table.column("content_hash").to_pylist() == [t.content_hash for t in members]
    dirs = table.column("harbor_dir").to_pylist()
    assert len(set(dirs)) == len(dirs) and f"tasks/{seeds[0].id}" in dirs
    for row_dir, task in zip(dirs, members, strict=True):
        loaded = load_harbor(dest / row_dir)
        assert loaded.content_hash == task.content_hash  # byte-for-byte the same bundle
        assert os.access(dest / row_dir / "tests" / "test.sh", os.X_OK)
    # The exported parquet alone rebuilds the tasks, too.
    assert [t.content_hash for t in pool_tasks(table)] == [t.content_hash for t in members]
    with pytest.raises(ValueError, match="refusing to overwrite"):
        export_pool(store_path, "t1", dest)
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # no temp left


def test_the_reference_verdict_a_campaign_pays_against_is_the_latest_audit_that_recorded_one(
    store_path, task_factory
) -> None:
    """An audit's reference verdict round-trips through the audits table; a later audit
    without one (its oracle failed on a flaky run, an LLM judge's row) does not erase it,
    and a later one with another replaces it."""
    from datetime import UTC, datetime, timedelta

    from tasks.results import AssertionStatus, ReferenceOutcome
    from warehouse import AuditRecord, record_audits, reference_verdicts

    a, b, c = (task_factory(x) for x in "abc")
    record_tasks(store_path, [a, b, c])
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def audit(task, when, names, judge="exec"):
        ref = [ReferenceOutcome(name=n, status=AssertionStatus(s)) for n, s in names]
        return AuditRecord(
            task_hash=task.content_hash, judge=judge, audit_version=f"v{when}", verdict="pass",
            audited_at=t0 + timedelta(days=when), reference=ref if names else None,
        )  # fmt: skip

    record_audits(
        store_path,
        [
            audit(a, 1, [("t1", "passed"), ("t2", "skipped")]),
            audit(a, 2, [], judge="llm:alignment"),
            audit(b, 1, [("old", "passed")]),
            audit(b, 3, [("new", "passed"), ("new", "passed")]),
            audit(c, 1, []),
        ],
    )
    got = reference_verdicts(store_path, [a.content_hash, b.content_hash, c.content_hash, "f" * 64])
    assert set(got) == {a.content_hash, b.content_hash}
    assert [(o.name, o.status) for o in got[a.content_hash].outcomes] == [
        ("t1", AssertionStatus.PASSED), ("t2", AssertionStatus.SKIPPED)
    ]  # fmt: skip
    assert [o.name for o in got[b.content_hash].outcomes] == ["new", "new"]
    assert reference_verdicts(store_path, []) == {}
