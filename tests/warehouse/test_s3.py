"""The warehouse on S3 (moto's S3 server on loopback, started by the `s3_server` fixture).

The store is opened by URL as every command opens it; commits are optimistic (a conditional
put of the next manifest version), so the tests race writers for real: a forced lost race in
one process, then two writer processes with separate caches and a reader process in a loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from warehouse import Store, open_snapshot, record_pool, record_tasks
from warehouse.objectstore import S3Store, manifest_key, parse_manifest_key
from warehouse.store import Manifest, StoreNotFoundError, WarehouseError

K = 4  # tasks per commit in the multi-process test
BATCHES = 20  # commits per writer process


def _tasks(prefix: str, n: int, factory) -> list:
    return [factory(f"{prefix}-{j}", payload=f"{prefix}/{j}".encode()) for j in range(n)]


def _keys(store: S3Store, under: str) -> list[str]:
    return sorted(o["Key"].rpartition("/")[2] for o in store._list(under))


def _versions(store: S3Store) -> list[int]:
    found = [parse_manifest_key(k) for k in _keys(store, "_manifest/")]
    return sorted(v for v in found if v is not None)


def test_url_spellings_and_round_trip(s3_store_url, task_factory, tmp_path, monkeypatch):
    """`s3://b/p` given as a string, as a Path (one slash) or through $T1_WAREHOUSE opens the
    same store; rows written are read back through a cache that starts empty."""
    with pytest.raises(StoreNotFoundError, match="no warehouse at 's3://"):
        Store.open(s3_store_url)
    store = Store.open(Path(s3_store_url), create=True)
    assert isinstance(store, S3Store) and store.location == s3_store_url
    tasks = _tasks("rt", 5, task_factory)
    record_pool(store, "rst", tasks, tasks=tasks)
    assert _versions(store) == [0, 1]
    assert len(_keys(store, "tasks/")) == 1 and len(_keys(store, "pool_members/")) == 1

    monkeypatch.setenv("T1_WAREHOUSE", s3_store_url)
    monkeypatch.setenv("T1_WAREHOUSE_CACHE", str(tmp_path / "other-cache"))
    fresh = Store.open()
    assert isinstance(fresh, S3Store) and fresh.root != store.root
    with open_snapshot(fresh) as snap:
        assert snap.generation == 1
        assert snap.sql("SELECT count(*) FROM tasks").scalar() == 5
        got = snap.sql("SELECT task_id FROM tasks ORDER BY task_id").fetchall()
        assert [r[0] for r in got] == sorted(t.id for t in tasks)
        assert snap.sql("SELECT count(*) FROM pool_members WHERE pool = 'rst'").scalar() == 5
    # the second reader downloaded both parts into its own cache
    assert len(list((fresh.root / "tasks").glob("part-*.parquet"))) == 1

    # re-recording the same rows is a no-op, as on local disk: no new generation
    result = record_tasks(fresh, tasks)
    assert result.written == {"tasks": 0} and _versions(store) == [0, 1]


def test_lost_race_rebuilds_and_commits(s3_store_url, task_factory, tmp_path):
    """Writer A builds against generation 1, writer B (another cache) commits generation 2
    meanwhile: A's put of generation 2 fails, A rebuilds on B's manifest and commits 3;
    nothing is lost, A's first upload is deleted, and a duplicate across the two is kept once."""
    a = S3Store(s3_store_url, cache_dir=tmp_path / "a")
    b = S3Store(s3_store_url, cache_dir=tmp_path / "b")
    Store.open(s3_store_url, create=True)
    record_tasks(a, _tasks("base", 2, task_factory))
    shared = task_factory("shared", payload=b"both")
    b_rows = _tasks("b", 3, task_factory) + [shared]
    a_rows = _tasks("a", 3, task_factory) + [shared]
    from warehouse.records import records_table, task_record
    from warehouse.schema import TASKS

    seen: list[int] = []

    def build(manifest: Manifest) -> dict[str, pa.Table]:
        seen.append(manifest.generation)
        if len(seen) == 1:  # B wins the race while A is building
            record_tasks(b, b_rows)
        return {"tasks": records_table([task_record(t) for t in a_rows], TASKS)}

    result = a.commit(build)
    assert seen == [1, 2]
    assert result.generation == 3 and result.written == {"tasks": 3}  # `shared` was B's
    assert _versions(a) == [0, 1, 2, 3]
    manifest = a.read_manifest()
    named = sorted(p.file for p in manifest.parts("tasks"))
    assert _keys(a, "tasks/") == named  # the losing attempt's upload is gone
    with open_snapshot(S3Store(s3_store_url, cache_dir=tmp_path / "c")) as snap:
        assert snap.sql("SELECT count(*) FROM tasks").scalar() == 2 + 4 + 3
        assert snap.sql("SELECT count(DISTINCT content_hash) FROM tasks").scalar() == 9


def test_compaction_and_old_snapshots(s3_store_url, task_factory, tmp_path):
    """Compaction on S3 merges parts in one new version; a snapshot opened before it keeps
    reading; retired parts outlive the grace period only until the next compaction."""
    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    for i in range(4):
        record_tasks(store, _tasks(f"c{i}", 3, task_factory))
    old = open_snapshot(store)
    before = _keys(store, "tasks/")
    assert len(before) == 4
    result = store.compact(["tasks"], retire_grace_s=3600)
    assert result.merged == {"tasks": 4} and result.deleted_files == []
    assert len(store.read_manifest().parts("tasks")) == 1
    assert len(_keys(store, "tasks/")) == 5  # four retired kept for open readers
    with open_snapshot(S3Store(s3_store_url, cache_dir=tmp_path / "r")) as snap:
        assert snap.sql("SELECT count(*) FROM tasks").scalar() == 12
    assert old.sql("SELECT count(*) FROM tasks").scalar() == 12
    old.close()
    store.orphan_age_s = 0.0
    cleaned = store.compact(["tasks"], retire_grace_s=0)
    assert sorted(f.rpartition("/")[2] for f in cleaned.deleted_files) == before
    assert _keys(store, "tasks/") == [p.file for p in store.read_manifest().parts("tasks")]


def test_young_unnamed_part_survives_compaction(s3_store_url, task_factory):
    """A part no manifest names yet may be another writer's upload about to commit: it is
    deleted only once older than `orphan_age_s`."""
    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    record_tasks(store, _tasks("y", 2, task_factory))
    store.fs.pipe_file(store._path("tasks/part-9999999999-inflight.parquet"), b"PAR1")
    assert store.compact(retire_grace_s=0).deleted_files == []
    store.orphan_age_s = 0.0
    assert store.compact(retire_grace_s=0).deleted_files == [
        "tasks/part-9999999999-inflight.parquet"
    ]


def test_catalog_for_external_duckdb(s3_store_url, task_factory):
    """`write_catalog` on an S3 store writes a local catalog over the cached parts, refreshed
    by this process's later commits."""
    store = Store.open(s3_store_url, create=True)
    record_tasks(store, _tasks("k", 3, task_factory))
    path = store.write_catalog()
    assert path.parent == store.root
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tasks").fetchall() == [(3,)]
    record_tasks(store, _tasks("k2", 2, task_factory))
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tasks").fetchall() == [(5,)]


def test_bad_locations(s3_server, s3_store_url, tmp_path):
    """A missing bucket, a URL without one, and a non-manifest object are one-line errors."""
    with pytest.raises(WarehouseError, match="bucket 'no-such-bucket' does not exist"):
        Store.open("s3://no-such-bucket/wh", create=True)
    with pytest.raises(WarehouseError, match="names no bucket"):
        Store.open("s3://")
    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    store.fs.pipe_file(store._path(manifest_key(1)), b'{"format": "something-else"}')
    with pytest.raises(WarehouseError, match=r"_manifest/0+1\.json' is not a T1 Forge"):
        S3Store(s3_store_url, cache_dir=tmp_path / "x").read_manifest()


WRITER = textwrap.dedent(
    """
    import os, sys, time
    from tasks.model import Task
    from warehouse import Store, record_pool
    url, pool, go = sys.argv[1], sys.argv[2], sys.argv[5]
    batches, k = int(sys.argv[3]), int(sys.argv[4])
    store = Store.open(url)
    while not os.path.exists(go):  # both writers start committing at once
        time.sleep(0.01)
    retries = 0
    commit = store.commit
    def counted(build):
        global retries
        result = commit(build)
        retries += result.attempts - 1
        return result
    store.commit = counted
    for i in range(batches):
        tasks = [Task(id=f"{pool}-{i}-{j}", name="n", instruction=f"{pool} batch {i} task {j}",
                      verifier={"test.sh": b"exit 0"}) for j in range(k)]
        record_pool(store, pool, tasks, version=i + 1, tasks=tasks)
    print(retries)
    """
)

READER = textwrap.dedent(
    """
    import json, os, sys, time
    from warehouse import Store, open_snapshot
    url, stop, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = Store.open(url)
    deadline = time.monotonic() + 300
    while not os.path.exists(stop) and time.monotonic() < deadline:
        with open_snapshot(store) as snap:
            named = sum(p.rows for p in snap.manifest.parts("tasks"))
            row = snap.sql(f'''
                WITH m AS (SELECT pool, pool_version FROM pool_members),
                per AS (SELECT pool, count(DISTINCT pool_version) AS versions,
                               coalesce(max(pool_version), 0) AS top,
                               count(*) AS members FROM m GROUP BY pool)
                SELECT (SELECT count(*) FROM tasks),
                       (SELECT count(*) FROM pool_members p ANTI JOIN tasks t
                          ON t.content_hash = p.task_hash),
                       (SELECT coalesce(sum(versions), 0) FROM per),
                       (SELECT count(*) FROM per WHERE top <> versions OR members <> {k} * versions)
            ''').fetchone()
            tasks, orphans, versions, torn = row
            print(json.dumps({"gen": snap.generation, "tasks": tasks, "named": named,
                              "orphans": orphans, "versions": versions, "torn": torn}),
                  flush=True)
    """
)


def _spawn(script: str, args: list[str], cache: Path) -> subprocess.Popen:
    # No automatic compaction: the test reads each manifest version as its parent's parts
    # plus one commit's (a compaction version is another kind, tested in test_journal.py).
    env = dict(os.environ, T1_WAREHOUSE_CACHE=str(cache), T1_WAREHOUSE_MAX_PARTS="0")
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_writer_processes_and_a_reader(s3_store_url, tmp_path):
    """Two writer processes (separate caches) commit BATCHES pool versions each, every commit
    spanning `tasks` and `pool_members`; a third process reads in a loop meanwhile.

    No commit is lost (every version of both pools, with all its tasks, is stored; the
    manifest versions run 0..2*BATCHES without a gap, each naming its parent's parts plus one
    commit's), and no reader ever saw a commit in part (tasks without their members, a pool
    version short of members, rows beyond or short of what the manifest names, a generation
    going backwards)."""
    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    stop = tmp_path / "stop"
    reader = _spawn(READER, [s3_store_url, str(stop), str(K)], tmp_path / "cache-reader")
    go = tmp_path / "go"
    writers = [
        _spawn(
            WRITER, [s3_store_url, pool, str(BATCHES), str(K), str(go)], tmp_path / f"cache-{pool}"
        )
        for pool in ("rst", "t1")
    ]
    time.sleep(1.0)
    go.touch()
    started = time.monotonic()
    retries = 0
    try:
        for w in writers:
            wout, err = w.communicate(timeout=600)
            assert w.returncode == 0, err[-3000:]
            retries += int(wout.split()[-1])
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=120)
    elapsed = time.monotonic() - started
    assert reader.returncode == 0, err[-3000:]

    observations = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(observations) >= 3, f"the reader saw only {len(observations)} snapshots"
    gens = [o["gen"] for o in observations]
    assert gens == sorted(gens), "a reader saw the generation go backwards"
    for o in observations:
        assert o["orphans"] == 0 and o["torn"] == 0, o
        assert o["tasks"] == o["named"] == K * o["versions"], o
    assert len(set(gens)) > 1, "the reader never saw a commit land while it read"

    versions = _versions(store)
    assert versions == list(range(2 * BATCHES + 1))
    previous: set[tuple[str, str]] = set()
    for v in versions:
        raw = json.loads(store.fs.cat_file(store._path(manifest_key(v))))
        assert raw["generation"] == v
        parts = {(t, p["file"]) for t, ps in raw["tables"].items() for p in ps}
        assert previous <= parts and len(parts - previous) == (2 if v else 0), v
        previous = parts
    assert retries > 0, "the writers never raced for a generation"

    with open_snapshot(S3Store(s3_store_url, cache_dir=tmp_path / "cache-check")) as snap:
        assert snap.sql("SELECT count(*) FROM tasks").scalar() == 2 * BATCHES * K
        per_pool = snap.sql(
            "SELECT pool, count(DISTINCT pool_version), max(pool_version) FROM pool_members "
            "GROUP BY pool ORDER BY pool"
        ).fetchall()
        assert per_pool == [("rst", BATCHES, BATCHES), ("t1", BATCHES, BATCHES)]
    print(
        f"{2 * BATCHES} commits by two writers ({retries} lost races retried), "
        f"{len(observations)} reads, {elapsed:.1f} s"
    )


def test_migration_commits_a_new_version(s3_store_url, task_factory, tmp_path):
    """An S3 store at an older schema version is refused by readers, and `migrate` brings it
    forward by the same conditional commit (a new manifest version, the old one kept)."""
    from warehouse import schema
    from warehouse.migrations import migrate
    from warehouse.store import SchemaVersionError

    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    record_tasks(store, _tasks("m", 2, task_factory))
    old = store.read_manifest()
    old.generation += 1
    old.schema_version = schema.SCHEMA_VERSION - 1
    store._write_manifest(old)  # as an older t1-forge would have left it
    with pytest.raises(SchemaVersionError, match="older than this t1-forge"):
        Store.open(s3_store_url)
    assert migrate(Store.at(s3_store_url)) == (schema.SCHEMA_VERSION - 1, schema.SCHEMA_VERSION)
    assert _versions(store) == [0, 1, 2, 3]
    with open_snapshot(S3Store(s3_store_url, cache_dir=tmp_path / "m")) as snap:
        assert snap.generation == 3 and snap.sql("SELECT count(*) FROM tasks").scalar() == 2


def test_a_retried_put_that_had_succeeded_is_not_a_lost_race(
    s3_store_url, task_factory, monkeypatch
):
    """The client retries a put whose answer it lost; S3 refuses the retry (the object exists,
    it is ours). Taking that refusal for a lost race would delete the parts just committed."""
    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    real = store.fs.pipe_file

    def put_then_retry(path, data, **kwargs):
        real(path, data, **kwargs)  # the first try lands, its answer is "lost" ...
        return real(path, data, **kwargs)  # ... so the client retries: 412

    monkeypatch.setattr(store.fs, "pipe_file", put_then_retry)
    result = record_tasks(store, _tasks("r", 3, task_factory))
    monkeypatch.setattr(store.fs, "pipe_file", real)
    assert result.attempts == 1 and result.generation == 1
    assert _versions(store) == [0, 1]
    assert _keys(store, "tasks/") == [p.file for p in store.read_manifest().parts("tasks")]
    with open_snapshot(store) as snap:
        assert snap.sql("SELECT count(*) FROM tasks").scalar() == 3


def test_a_409_is_a_lost_race_and_retrying_gives_up_cleanly(
    s3_store_url, task_factory, monkeypatch
):
    """S3 answers 409 ConditionalRequestConflict while another conditional put of the key is
    in flight: retried like a 412. A commit that loses every attempt raises
    CommitConflictError having committed nothing and left none of its parts behind."""
    from botocore.exceptions import ClientError

    import warehouse.store as store_mod
    from warehouse.store import CommitConflictError

    store = Store.open(s3_store_url, create=True)
    assert isinstance(store, S3Store)
    real = store.fs.pipe_file
    refusals = {"left": 1}

    def busy(path, data, **kwargs):
        if refusals["left"]:
            refusals["left"] -= 1
            error = ClientError(
                {"Error": {"Code": "ConditionalRequestConflict", "Message": "busy"}}, "PutObject"
            )
            raise OSError(5, "conflict") from error
        return real(path, data, **kwargs)

    monkeypatch.setattr(store.fs, "pipe_file", busy)
    result = record_tasks(store, _tasks("c", 2, task_factory))
    assert result.attempts == 2 and result.generation == 1

    refusals["left"] = 10**6
    monkeypatch.setattr(store_mod, "COMMIT_ATTEMPTS", 3)
    with pytest.raises(CommitConflictError, match="lost to other writers 3 times"):
        record_tasks(store, _tasks("d", 2, task_factory))
    monkeypatch.setattr(store.fs, "pipe_file", real)
    assert _versions(store) == [0, 1]
    assert _keys(store, "tasks/") == [p.file for p in store.read_manifest().parts("tasks")]
