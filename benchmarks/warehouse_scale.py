"""Warehouse at scale: 1,000,000 task rows with 15-round lineage, then lineage and pool timings.

    python benchmarks/warehouse_scale.py [--tasks 1000000] [--rounds 15] [--keep DIR] [--delta]

What it builds: `--seeds` parentless tasks, then `--rounds` rounds growing geometrically to
`--tasks` rows. A task's first parent comes from the previous round (90%) or any earlier one;
15% of tasks are crossovers with a second parent from any earlier round. Rows are written in
the `tasks` schema through `Store.append` (the writer every stage uses, duplicate check
included) in `--batch`-row commits, then compacted. Synthetic rows carry a small bundle
(~`--bundle-bytes`); the `--pool-size` members of pool `t1` are real `Task`s from the last
round (valid bundles, true content hashes), so loading the pool can rebuild them.

It prints: write time, on-disk size, snapshot open time, one ancestors query before the
lineage index exists, the index build time (once per snapshot; `t1 sql` and the Python
wrappers build it on first use), ancestors-of-task and descendants-of-seed times with the
index (median and max over several tasks), and the time to load the 15,000-task pool.
Figures, not a timed test.

`--delta` also writes the same rows, in the same batches, as Delta Lake tables (`deltalake`,
delta-rs) and runs the same queries over them: DuckDB over the Parquet files the Delta log
names, with the same views and lineage macros. It prints the Delta write (plain appends: Delta
checks no keys, so a duplicate-key check costs a MERGE, timed once on the last batch beside
our own re-append of it), `optimize.compact` + `vacuum`, resolving the current files from the
log, then the same query lines. Delta has no unsigned integers, so `task_key` and
`parent_keys` are stored as the int64 with the same bits and the view turns them back.

`--s3` builds the store on S3 instead (`s3://bench/wh` on moto's S3 server, started here on a
free loopback port; needs moto[server] and s3fs): the same lines, plus the first snapshot of
a second process-like reader whose cache is empty (it downloads every part).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.model import Category, Lineage, Task  # noqa: E402
from warehouse import Snapshot, Store, load_pool, open_snapshot, pool_tasks  # noqa: E402
from warehouse.records import records_table, task_record  # noqa: E402
from warehouse.schema import TASKS, TIMESTAMP  # noqa: E402
from warehouse.views import parquet_list_sql, reader_statements  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=UTC)

OPERATORS = np.array(["mutate", "compose", "harden", "crossover", "translate"])
FAMILIES = np.array(["git", "text", "build", "data", "net", "sys"])
CATEGORIES = np.array([c.value for c in Category])


def round_sizes(total: int, seeds: int, rounds: int) -> list[int]:
    weights = np.array([1.35**r for r in range(1, rounds + 1)])
    sizes = np.floor(weights / weights.sum() * (total - seeds)).astype(int)
    sizes[-1] += total - seeds - sizes.sum()
    return [seeds, *sizes.tolist()]


def build_graph(total: int, seeds: int, rounds: int, rng: np.random.Generator):
    """Parent indices (-1: none), round and root seed index per task."""
    sizes = round_sizes(total, seeds, rounds)
    p1 = np.full(total, -1, dtype=np.int64)
    p2 = np.full(total, -1, dtype=np.int64)
    rnd = np.zeros(total, dtype=np.int32)
    start = seeds
    prev_start = 0
    for r, size in enumerate(sizes[1:], 1):
        idx = np.arange(start, start + size)
        recent = rng.integers(prev_start, start, size)
        anywhere = rng.integers(0, start, size)
        p1[idx] = np.where(rng.random(size) < 0.9, recent, anywhere)
        cross = rng.random(size) < 0.15
        p2[idx[cross]] = rng.integers(0, start, int(cross.sum()))
        rnd[idx] = r
        prev_start, start = start, start + size
    root = np.arange(total)
    for i in range(seeds, total):  # parents precede children, so one pass suffices
        root[i] = root[p1[i]]
    return p1, p2, rnd, root


def synthetic_hashes(n: int) -> list[str]:
    return [hashlib.sha256(f"synthetic-task-{i}".encode()).hexdigest() for i in range(n)]


def real_task(i: int, parents: list[str], rnd: int, op: str, fam: str, root: str) -> Task:
    return Task(
        id=f"t1-{i}",
        name=f"Pool task {i}",
        instruction=f"Synthetic instruction {i}: repair the build and report the result.\n",
        category=Category.DEBUGGING,
        solution={"solve.sh": f"#!/bin/bash\nmake -C /app fix-{i}\n".encode()},
        verifier={"test.sh": f"#!/bin/bash\ntest -f /app/ok-{i}\n".encode()},
        lineage=Lineage(
            parents=parents, root_seed=root, round=rnd, operator=op, family=fam, source_pool="rst"
        ),
    )


def list_array(values: np.ndarray, offsets: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, typ))


def task_batch(
    lo: int, hi: int, hashes: list[str], p1, p2, rnd, root, rng, bundle_bytes: int
) -> pa.Table:
    """Rows lo..hi of the synthetic graph, in the `tasks` schema."""
    n = hi - lo
    idx = np.arange(lo, hi)
    has1, has2 = p1[idx] >= 0, p2[idx] >= 0
    counts = has1.astype(np.int32) + has2.astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    parent_idx = np.empty(int(offsets[-1]), dtype=np.int64)
    first = offsets[:-1][has1]
    parent_idx[first] = p1[idx][has1]
    parent_idx[offsets[:-1][has2] + 1] = p2[idx][has2]
    hash_arr = np.array(hashes, dtype=object)
    parent_hashes = hash_arr[parent_idx] if len(parent_idx) else np.array([], dtype=object)
    keys = np.array([int(h[:16], 16) for h in hashes[lo:hi]], dtype=np.uint64)
    parent_keys = np.array([int(h[:16], 16) for h in parent_hashes], dtype=np.uint64)
    pad = "x" * max(0, bundle_bytes - 120)
    tomls = [f'version = "1.0"\n[t1]\nid = "task-{i}"\n'.encode() for i in idx]
    instrs = [f"Synthetic task {i}. {pad}\n".encode() for i in idx]
    map_keys = pa.array(["task.toml", "instruction.md"] * n)
    map_vals = pa.array([b for pair in zip(tomls, instrs, strict=True) for b in pair], pa.binary())
    bundle = pa.MapArray.from_arrays(
        pa.array(np.arange(0, 2 * n + 1, 2), pa.int32()), map_keys, map_vals
    )
    is_seed = rnd[idx] == 0
    op = np.where(is_seed, None, OPERATORS[rng.integers(0, len(OPERATORS), n)])
    fam = np.where(is_seed, None, FAMILIES[rng.integers(0, len(FAMILIES), n)])
    return pa.table(
        {
            "content_hash": pa.array(hashes[lo:hi]),
            "task_key": pa.array(keys, pa.uint64()),
            "task_id": pa.array([f"task-{i}" for i in idx]),
            "name": pa.array([f"Task {i}" for i in idx]),
            "category": pa.array(CATEGORIES[rng.integers(0, len(CATEGORIES), n)]),
            "difficulty": pa.array(["medium"] * n),
            "tags": list_array(np.array([], dtype=object), np.zeros(n + 1, np.int32), pa.string()),
            "author": pa.nulls(n, pa.string()),
            "instruction_chars": pa.array(rng.integers(200, 4000, n), pa.int32()),
            "solution_steps": pa.array(rng.integers(3, 60, n), pa.int32()),
            "assertion_count": pa.array(rng.integers(2, 20, n), pa.int32()),
            "solution_less": pa.array(np.zeros(n, bool)),
            "binary_verifier": pa.array(np.zeros(n, bool)),
            "parents": list_array(parent_hashes, offsets, pa.string()),
            "parent_keys": list_array(parent_keys, offsets, pa.uint64()),
            "root_seed": pa.array(np.where(is_seed, None, hash_arr[root[idx]])),
            "round": pa.array(rnd[idx], pa.int32()),
            "operator": pa.array(op, pa.string()),
            "family": pa.array(fam, pa.string()),
            "origin_pool": pa.array(np.where(is_seed, "seed", "rst")),
            "bundle": bundle,
            "bundle_bytes": pa.array(
                [len(a) + len(b) for a, b in zip(tomls, instrs, strict=True)], pa.int64()
            ),
            "recorded_at": pa.array([NOW] * n, TIMESTAMP),
            "source": pa.nulls(n, pa.string()),
        }
    )


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    best, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best.append(time.perf_counter() - t)
    return min(best), out


def ms(s: float) -> str:
    return f"{s * 1000:8.1f} ms"


def time_queries(snap: Snapshot, hashes, pool_idx, args, rng) -> None:
    """The lineage and pool timings, printed; the same for every storage layout."""
    probe = hashes[int(pool_idx[0])]
    cold_s, _ = timed(lambda: snap.rows("SELECT * FROM ancestors($h)", {"h": probe}))
    print(f"ancestors before the index (recursion over Parquet views): {ms(cold_s)}")
    index_s, _ = timed(snap.ensure_lineage_index)
    print(f"build the in-memory lineage index (once per snapshot): {ms(index_s)}")

    leaves = rng.choice(pool_idx, args.samples, replace=False)
    anc_t, anc_n, anc_d = [], [], []
    for i in leaves:
        s, out = timed(lambda h=hashes[i]: snap.rows("SELECT * FROM ancestors($h)", {"h": h}), 2)
        anc_t.append(s)
        anc_n.append(len(out))
        anc_d.append(max(r["distance"] for r in out))
    print(
        f"ancestors(round-{args.rounds} task): median {ms(statistics.median(anc_t))}, "
        f"max {ms(max(anc_t))}; {min(anc_n)}-{max(anc_n)} ancestors, "
        f"{min(anc_d)}-{max(anc_d)} generations up"
    )
    seeds = rng.choice(args.seeds, args.samples, replace=False)
    desc_t, desc_n = [], []
    for i in seeds:
        s, out = timed(lambda h=hashes[i]: snap.sql("SELECT * FROM descendants($h)", {"h": h}), 2)
        desc_t.append(s)
        desc_n.append(len(out.rows))
    print(
        f"descendants(seed): median {ms(statistics.median(desc_t))}, max {ms(max(desc_t))}; "
        f"{min(desc_n):,}-{max(desc_n):,} descendants"
    )

    s, table = timed(lambda: load_pool(snap, "t1"), 2)
    print(f"load pool t1 ({table.num_rows:,} tasks, with bundles, Arrow): {ms(s)}")
    s, _ = timed(lambda: load_pool(snap, "t1", bundles=False), 2)
    print(f"load pool t1 (without bundles): {ms(s)}")
    s, tasks = timed(lambda: pool_tasks(table))
    print(f"rebuild {len(tasks):,} Task objects from the bundles (hash-checked): {ms(s)}")
    s, hist = timed(
        lambda: snap.sql(
            "SELECT depth, tasks FROM pool_depth_histogram WHERE pool = 't1' ORDER BY depth"
        )
    )
    print(f"pool_depth_histogram(t1) over the whole graph: {ms(s)} -> {hist.rows}")


UNSIGNED = ("task_key", "parent_keys")  # uint64 columns: Delta Lake has only signed integers


def to_delta(table: pa.Table) -> pa.Table:
    """`table` with its uint64 columns as int64 of the same bits (Delta has no unsigned)."""
    for name in UNSIGNED:
        if name in table.column_names:
            i = table.column_names.index(name)
            col = table.column(name)
            typ = pa.list_(pa.int64()) if pa.types.is_list(col.type) else pa.int64()
            table = table.set_column(i, name, pc.cast(col, typ, safe=False))
    return table


def delta_snapshot(store: Store, root: Path, tables: list[str]) -> Snapshot:
    """A Snapshot whose views read the files the Delta logs under `root` name now."""
    from deltalake import DeltaTable

    files = {t: [Path(u) for u in DeltaTable(str(root / t)).file_uris()] for t in tables}
    statements = reader_statements(files, with_lineage=True)
    mask = "18446744073709551615::HUGEINT"
    unsigned = (
        f"(task_key::HUGEINT & {mask})::UBIGINT AS task_key, "
        f"list_transform(parent_keys, lambda k: (k::HUGEINT & {mask})::UBIGINT) AS parent_keys, "
        'lower("origin_pool") COLLATE NOCASE AS "origin_pool"'
    )
    tasks_view = (
        f"CREATE VIEW tasks AS SELECT * REPLACE ({unsigned}) "
        f"FROM read_parquet({parquet_list_sql(files['tasks'])}, union_by_name = true)"
    )
    statements = [tasks_view if st.startswith("CREATE VIEW tasks ") else st for st in statements]
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(";\n".join(statements))
    return Snapshot(store, store.read_manifest(), con)


def run_delta(store: Store, root_dir: Path, batches, pool_rows, members, hashes, pool_idx, args):
    """The same rows and queries on Delta Lake tables (see the module docstring)."""
    from deltalake import DeltaTable, write_deltalake

    root = root_dir / "delta"
    t = time.perf_counter()
    for batch in batches():
        write_deltalake(str(root / "tasks"), to_delta(batch), mode="append")
    write_deltalake(str(root / "tasks"), to_delta(pool_rows), mode="append")
    write_deltalake(str(root / "pool_members"), members, mode="append")
    write_s = time.perf_counter() - t
    dt = DeltaTable(str(root / "tasks"))
    versions = dt.version() + 1
    t = time.perf_counter()
    dt.optimize.compact()
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    compact_s = time.perf_counter() - t
    print(
        f"[delta] wrote {args.tasks:,} task rows in {write_s:.1f} s ({versions} appends, no key "
        f"check), optimize.compact + vacuum in {compact_s:.1f} s; "
        f"{len(dt.file_uris())} files, {du(root) / 1e6:,.1f} MB"
    )
    last = to_delta(list(batches())[-1])
    t = time.perf_counter()
    merged = (
        DeltaTable(str(root / "tasks"))
        .merge(
            last, predicate="t.content_hash = s.content_hash", source_alias="s", target_alias="t"
        )
        .when_not_matched_insert_all()
        .execute()
    )
    merge_s = time.perf_counter() - t
    print(
        f"[delta] MERGE of the last batch again ({last.num_rows:,} rows, all stored; "
        f"{merged.get('num_target_rows_inserted')} inserted): {ms(merge_s)}"
    )
    open_s, snap = timed(lambda: delta_snapshot(store, root, ["tasks", "pool_members"]), 3)
    print(f"[delta] open snapshot (read the logs, views over their files): {ms(open_s)}")
    time_queries(snap, hashes, pool_idx, args, np.random.default_rng(7))
    snap.close()


@contextlib.contextmanager
def moto_s3(cache: Path):
    """moto's S3 server in a subprocess on a free loopback port, the environment pointed at
    it, bucket `bench` created; yields the store URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    os.environ.update(
        T1_S3_ENDPOINT=url,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        T1_WAREHOUSE_CACHE=str(cache),
    )
    try:
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=url, skip_instance_cache=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                fs.call_s3("create_bucket", Bucket="bench")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield "s3://bench/wh"
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--pool-size", type=int, default=15_000)
    ap.add_argument("--batch", type=int, default=100_000, help="rows per commit")
    ap.add_argument("--bundle-bytes", type=int, default=400, help="synthetic bundle size")
    ap.add_argument("--samples", type=int, default=7, help="tasks/seeds timed per query")
    ap.add_argument("--keep", type=Path, help="build the store here and keep it")
    ap.add_argument("--delta", action="store_true", help="also time the same on Delta Lake")
    ap.add_argument("--s3", action="store_true", help="the store on S3 (moto, loopback)")
    args = ap.parse_args()
    root_dir = args.keep or Path(tempfile.mkdtemp(prefix="t1-warehouse-scale-"))
    with contextlib.ExitStack() as stack:
        if args.s3:
            location: Path | str = stack.enter_context(moto_s3(root_dir / "cache"))
        else:
            location = root_dir / "store"
            if location.exists():
                sys.exit(f"{location} exists; pass a fresh --keep directory")
        run(args, root_dir, location)
    if args.keep is None:
        shutil.rmtree(root_dir)


def run(args, root_dir: Path, store_path: Path | str) -> None:
    """Build the store at `store_path` and time everything (see the module docstring)."""
    print(f"store: {store_path}")

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    p1, p2, rnd, root = build_graph(args.tasks, args.seeds, args.rounds, rng)
    hashes = synthetic_hashes(args.tasks)
    last_round = np.flatnonzero(rnd == args.rounds)
    if len(last_round) < args.pool_size:
        sys.exit(f"last round has {len(last_round)} tasks < pool size {args.pool_size}")
    pool_idx = np.sort(rng.choice(last_round, args.pool_size, replace=False))
    pool_tasks_real = []
    for i in pool_idx:  # last-round tasks have no children: their hashes can change
        parents = [hashes[p1[i]]] + ([hashes[p2[i]]] if p2[i] >= 0 else [])
        task = real_task(int(i), parents, int(rnd[i]), "mutate", "git", hashes[root[i]])
        pool_tasks_real.append(task)
        hashes[i] = task.content_hash
    pool_rows = records_table([task_record(t, pool="rst") for t in pool_tasks_real], TASKS)
    print(f"generated graph + {args.pool_size} real pool tasks in {time.perf_counter() - t0:.1f} s")

    store = Store.open(store_path, create=True)
    in_pool = np.zeros(args.tasks, bool)
    in_pool[pool_idx] = True
    t_gen = time.perf_counter()
    made: list[pa.Table] = []  # every batch made before any write, so writes time only writing
    for lo in range(0, args.tasks, args.batch):
        hi = min(args.tasks, lo + args.batch)
        batch = task_batch(lo, hi, hashes, p1, p2, rnd, root, rng, args.bundle_bytes)
        made.append(batch.filter(pa.array(~in_pool[lo:hi])))
    print(f"made {len(made)} batches of rows in {time.perf_counter() - t_gen:.1f} s")

    def batches():
        """The synthetic batches (the Delta run writes the same rows)."""
        yield from made

    t_write = time.perf_counter()
    for batch in batches():
        store.append({"tasks": batch})
    members = pa.table(
        {
            "pool": ["t1"] * args.pool_size,
            "pool_version": pa.array(np.ones(args.pool_size, np.int32)),
            "task_hash": [t.content_hash for t in pool_tasks_real],
            "rank": pa.array(np.arange(1, args.pool_size + 1, dtype=np.int32)),
            "score": pa.array(rng.random(args.pool_size)),
            "recorded_at": pa.array([NOW] * args.pool_size, TIMESTAMP),
        }
    )
    store.append({"tasks": pool_rows, "pool_members": members})
    write_s = time.perf_counter() - t_write
    parts_before = len(store.read_manifest().parts("tasks"))
    compact_s, _ = timed(lambda: store.compact(retire_grace_s=0))
    store.compact(retire_grace_s=0)  # delete the retired parts
    manifest = store.read_manifest()
    rows = sum(p.rows for p in manifest.parts("tasks"))
    print(
        f"wrote {rows:,} task rows in {write_s:.1f} s ({parts_before} commits), "
        f"compacted to {len(manifest.parts('tasks'))} parts in {compact_s:.1f} s"
    )
    if args.s3:  # retired parts wait an hour (orphan_age_s) on S3: count the named ones
        named = sum(p.bytes for parts in manifest.tables.values() for p in parts)
        print(f"committed parts: {named / 1e6:,.1f} MB")
    else:
        print(f"on-disk size: {du(store.root) / 1e6:,.1f} MB")
    if args.s3:
        from warehouse.objectstore import S3Store

        cold = S3Store(str(store_path), cache_dir=root_dir / "cold-cache")
        s, snap = timed(lambda: open_snapshot(cold))
        snap.close()
        print(f"open snapshot, empty cache (downloads every part): {ms(s)}")

    open_s, snap = timed(lambda: open_snapshot(store_path))
    snap.close()
    open_s, snap = timed(lambda: open_snapshot(store_path), repeat=3)
    print(f"open snapshot (views over {rows:,} tasks, no index yet): {ms(open_s)}")
    if args.delta:
        last = made[-1]
        s, res = timed(lambda: store.append({"tasks": last}))
        print(
            f"append the last batch again ({last.num_rows:,} rows, all stored; "
            f"{res.written['tasks']} written): {ms(s)}"
        )
    time_queries(snap, hashes, pool_idx, args, np.random.default_rng(7))
    snap.close()
    if args.delta:
        run_delta(store, root_dir, batches, pool_rows, members, hashes, pool_idx, args)


if __name__ == "__main__":
    main()
