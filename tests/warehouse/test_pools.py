"""Pools: immutable ranked versions, loading, and export to Parquet + Harbor directories."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.harbor import load_harbor
from warehouse import export_pool, load_pool, pool_tasks, record_pool, record_tasks

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
    with pytest.raises(ValueError, match="no pool named 'nope'"):
        load_pool(store_path, "nope")
    with pytest.raises(ValueError, match="more than once"):
        record_pool(store_path, "t1", [a, a])


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
