"""Automatic compaction on S3 (moto's S3 server on loopback, the `s3_server` fixture).

On local disk a store's commits and its own background compaction take turns under the write
lock. On S3 there was no lock at all, so they raced for the same manifest generation: the
compaction's short swap (read the manifest, put the next version) landed in the middle of a
commit's much longer build (duplicate check, part uploads), and that commit lost and was
rebuilt whole; a swap that lost to a commit threw its merge away and merged again. In the
38k-candidate campaign on moto (`benchmarks/warehouse_campaign.py --s3`) that showed as
commit p95 over 1 s in some windows and tables left past `max_parts`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from warehouse import Store, open_snapshot
from warehouse.objectstore import S3Store
from warehouse.recording import tables_of
from warehouse.records import AssertionRecord, TrialRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Manifest, RetiredPart

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def candidate(i: int) -> dict:
    """One candidate's rows in two tables: a trial and its three assertions."""
    tid = f"trial-{i:05d}"
    return tables_of(
        [
            TrialRecord(trial_id=tid, task_hash=f"h{i}", task_id=f"t{i}", agent="oracle",
                        backend="local", started_at=T0),
            *[AssertionRecord(trial_id=tid, name=f"a{j}", position=j, task_hash=f"h{i}",
                              status="passed", ok=True) for j in range(3)],
        ]
    )  # fmt: skip


def counts(store: S3Store) -> tuple[int, int, int]:
    """(trials, distinct trials, assertion rows) in the newest generation."""
    with open_snapshot(store) as snap:
        t = snap.sql("SELECT count(*), count(DISTINCT trial_id) FROM trials").fetchone()
        a = snap.sql("SELECT count(*) FROM assertion_results").fetchone()
    assert t is not None and a is not None
    return t[0], t[1], a[0]


def _store(url: str, tmp_path, name: str) -> S3Store:
    store = S3Store(url, cache_dir=tmp_path / name, manifest_history=0)
    store.max_parts = None
    return store


def test_a_commit_never_loses_its_race_to_its_own_stores_compaction(s3_store_url, tmp_path):
    """The background compaction finishes its merge while a commit is building; before, its
    swap went in at once and the commit lost the race (rebuilt: attempts 2). Now the swap
    waits for the commit, then goes into the manifest the commit made. And over a run of
    commits that compacts every few of them, no commit is rebuilt and no swap lost."""
    Store.open(s3_store_url, create=True)
    store = _store(s3_store_url, tmp_path, "a")
    for i in range(4):
        store.append(candidate(i))
    merged = threading.Event()
    write_part = store._write_part

    def spy(spec, table, generation):  # the compaction thread's merged parts
        part = write_part(spec, table, generation)
        if threading.current_thread() is not threading.main_thread():
            merged.set()
        return part

    store._write_part = spy  # type: ignore[method-assign]
    store.max_parts = 3
    store.append(candidate(4))  # 5 parts: the compaction thread starts merging

    def build(manifest: Manifest) -> dict:
        assert merged.wait(30), "no background compaction started"
        time.sleep(1.0)  # the compaction's swap is due now: before, it went in here
        return candidate(5)

    result = store.commit(build)
    store.wait_for_compaction(60)
    assert store.compaction_errors == []
    assert result.attempts == 1, "the commit lost its race to its own store's compaction"
    parts = store.read_manifest().parts("trials")
    assert [p.rows for p in parts] == [1, 5], parts  # the commit's part, then the merged one

    attempts = [store.append(candidate(i)).attempts for i in range(6, 30)]
    store.wait_for_compaction(60)
    assert attempts == [1] * 24 and store.compaction_retries == 0
    assert store.compaction_errors == [] and store.auto_compactions >= 6
    assert len(store.read_manifest().parts("trials")) <= 3
    assert counts(store) == (30, 30, 90)


def test_a_compaction_that_loses_its_swap_keeps_its_merge(s3_store_url, tmp_path):
    """Another process commits between the compaction's manifest read and its put: the swap
    loses the race. The merged parts stay valid (a commit only adds parts), so the swap is
    retried on the newer manifest with the same parts: each table merged once (before: the
    merge was discarded and done again), the other writer's rows kept, no upload left over."""
    Store.open(s3_store_url, create=True)
    a = _store(s3_store_url, tmp_path, "a")
    b = _store(s3_store_url, tmp_path, "b")
    for i in range(5):
        a.append(candidate(i))
    written: list[str] = []
    write_part = a._write_part

    def spy(spec, table, generation):
        written.append(spec.name)
        return write_part(spec, table, generation)

    put = a._put_manifest
    raced: list[int] = []

    def racing_put(manifest: Manifest, text: str) -> None:
        if not raced:  # b commits this generation first, once
            raced.append(manifest.generation)
            b.append(candidate(99))
        put(manifest, text)

    a._write_part = spy  # type: ignore[method-assign]
    a._put_manifest = racing_put  # type: ignore[method-assign]
    a.max_parts, a.compact_in_background = 3, False
    result = a.auto_compact()
    assert result is not None and result.merged == {"assertion_results": 5, "trials": 5}
    assert sorted(written) == ["assertion_results", "trials"], written  # merged once each
    assert a.compaction_retries == 1
    manifest = a.read_manifest()
    assert [p.rows for p in manifest.parts("trials")] == [1, 5]  # b's commit, then the merge
    for table in ("trials", "assertion_results"):
        stored = sorted(o["Key"].rpartition("/")[2] for o in a._list(f"{table}/"))
        named = {p.file for p in manifest.parts(table)}
        named |= {r.file for r in manifest.retired if r.table == table}
        assert stored == sorted(named)  # nothing uploaded that no manifest names
    assert counts(a) == (6, 6, 18)


def test_expiring_retired_parts_is_one_pass(tmp_path, monkeypatch):
    """Retired parts past their grace leave the manifest in one pass. It was a pydantic
    comparison per (retired, expired) pair: ~1 s of CPU for 75 expired among 10,000 retired,
    paid by every automatic compaction (the GIL, and on S3 the writer lock, held) once a
    campaign's first retirements passed the 15-minute grace: in the S3 campaign, whose runs
    take over 15 minutes, the windows from 32k candidates on went over 1 s p95."""
    store = Store.open(tmp_path / "wh", create=True)
    store.max_parts, store.compact_in_background = None, False
    for i in range(3):
        store.append(candidate(i))
    manifest = store.read_manifest()
    old = datetime(2026, 1, 1, tzinfo=UTC)
    manifest.retired = [
        RetiredPart(table="trials", file=f"part-gone-{i:04d}.parquet", retired_at=old)
        for i in range(300)
    ]
    manifest.generation += 1
    store._write_manifest(manifest)
    compared: list[int] = []
    monkeypatch.setattr(RetiredPart, "__eq__", lambda a, b: compared.append(1) or a is b)
    store.max_parts = 2
    result = store.auto_compact()
    assert result is not None and len(result.deleted_files) == 300
    assert compared == []
    retired = store.read_manifest().retired
    assert sorted(r.table for r in retired) == ["assertion_results"] * 3 + ["trials"] * 3
    assert store.compact(retire_grace_s=0).deleted_files and compared == []
    assert store.read_manifest().retired == [] and counts_local(tmp_path / "wh") == (3, 3, 9)


def counts_local(path) -> tuple[int, int, int]:
    with Snapshot.open(path, with_lineage=False) as snap:
        t = snap.sql("SELECT count(*), count(DISTINCT trial_id) FROM trials").fetchone()
        a = snap.sql("SELECT count(*) FROM assertion_results").fetchone()
    assert t is not None and a is not None
    return t[0], t[1], a[0]
