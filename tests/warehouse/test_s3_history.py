"""Manifest history on S3 (`S3Store.collect_manifests`): old versions are deleted, keeping
the newest `manifest_history`, without ever letting a generation number be created twice.

Before: every manifest version was kept for ever (one object per commit: 2,400+ for a 38k
campaign, listed by every fresh reader). Deleting them naively breaks the commit protocol: a
writer holding a stale manifest N puts N + 1 "only if absent", and a deleted N + 1 is absent,
so its commit would succeed invisibly (the newest version is higher) and its rows be lost.
"""

from __future__ import annotations

from warehouse import Store, open_snapshot, record_tasks
from warehouse.objectstore import FLOOR_KEY, S3Store
from warehouse.recording import tables_of
from warehouse.records import task_record


def _store(url: str, tmp_path, name: str, history: int) -> S3Store:
    store = S3Store(url, cache_dir=tmp_path / name, manifest_history=history)
    store.max_parts = None
    return store


def test_commits_keep_the_newest_versions_and_readers_see_everything(
    s3_store_url, task_factory, tmp_path
):
    Store.open(s3_store_url, create=True)
    store = _store(s3_store_url, tmp_path, "a", history=4)
    for i in range(10):
        record_tasks(store, [task_factory(f"h{i}")])
    versions = store.manifest_versions()
    assert versions[-1] == 10 and 4 <= len(versions) <= 5, versions
    assert store.manifest_floor() == versions[0]
    fresh = _store(s3_store_url, tmp_path, "b", history=4)  # an empty cache: lists from 0
    with open_snapshot(fresh) as snap:
        assert snap.generation == 10
        assert snap.sql("SELECT count(*) FROM tasks").fetchone() == (10,)
    assert store.collect_manifests(keep=0) == []  # 0: keep every version


def test_a_stale_writer_cannot_recreate_a_deleted_generation(s3_store_url, task_factory, tmp_path):
    """Writer A builds its commit on generation N; meanwhile B commits 6 times and the
    history keeps 3, deleting N + 1. A's put of N + 1 then succeeds (the key is absent) but
    sits under the floor: A withdraws it, rebuilds on the newest version and commits there."""
    Store.open(s3_store_url, create=True)
    a = _store(s3_store_url, tmp_path, "a", history=0)
    b = _store(s3_store_url, tmp_path, "b", history=0)
    start = a.read_manifest().generation
    calls: list[int] = []

    def build(manifest):
        calls.append(manifest.generation)
        if len(calls) == 1:  # B races ahead while A is building on `start`
            for i in range(6):
                record_tasks(b, [task_factory(f"b{i}")])
            assert b.collect_manifests(keep=3) == list(range(start, start + 4))
        return tables_of([task_record(task_factory("a0"))])

    result = a.commit(build)
    assert calls == [start, start + 6] and result.attempts == 2
    assert result.generation == start + 7
    versions = a.manifest_versions()
    assert start + 1 not in versions and versions == [start + 4, start + 5, start + 6, start + 7]
    with open_snapshot(_store(s3_store_url, tmp_path, "c", history=0)) as snap:
        ids = {r[0] for r in snap.sql("SELECT task_id FROM tasks").fetchall()}
    assert ids == {"a0", *(f"b{i}" for i in range(6))}
    assert a._stored(FLOOR_KEY) is not None
