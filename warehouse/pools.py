"""Pools: record an immutable, ranked version of a pool; load it; export it for Harbor.

A pool version is rows of `pool_members` (rank 1 is best). Versions are immutable: recording
the same members again is a no-op, recording different members under an existing version is
refused. Exports need only the warehouse: the bundles are stored in `tasks.bundle`. Pools are
named by `tasks.pools.Pool` (lowercase; any case is accepted and stored lowercase).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from tasks.harbor import write_harbor
from tasks.model import Task
from tasks.pools import Pool
from tasks.results import ReferenceOutcome, ReferenceVerdict
from warehouse.bundles import task_from_bundle
from warehouse.recording import StoreRef, writable_store
from warehouse.records import PoolMemberRecord, check_hash, records_table, task_record
from warehouse.schema import POOL_MEMBERS, TASKS
from warehouse.snapshot import Snapshot
from warehouse.store import Manifest

Member = str | tuple[str, float | None] | Task


class PoolVersion(BaseModel):
    pool: Pool
    version: int
    tasks: int
    written: int  # member rows added by this call (0 when the version was already recorded)


def _member(m: Member) -> tuple[str, float | None]:
    if isinstance(m, Task):
        return m.content_hash, None
    if isinstance(m, str):
        return check_hash(m), None
    if isinstance(m, tuple) and len(m) == 2:
        return check_hash(m[0]), (None if m[1] is None else float(m[1]))
    raise ValueError(f"pool member must be a hash, (hash, score) or Task, got {m!r}")


def record_pool(
    store: StoreRef,
    pool: Pool | str,
    members: Sequence[Member],
    *,
    version: int | None = None,
    tasks: Iterable[Task] = (),
    audit_version: str | None = None,
) -> PoolVersion:
    """Record `members` (best first; rank = position + 1) as a version of `pool`.

    `audit_version` names the audit whose decisions selected the members (T1), so a
    training run on this version can say which audit it trained on.

    `version=None` takes the next version number (chosen under the write lock), unless the
    latest version has exactly these members and scores, which is then returned unchanged (so
    re-running a stage does not mint versions). `tasks` are
    recorded in the same commit, so a reader never sees the pool without its tasks. Every
    member must be a recorded task or among `tasks` (ValueError listing the missing ones).
    """
    pool = Pool.parse(pool).value
    if version is not None and version < 1:
        raise ValueError(f"pool version must be >= 1, got {version!r}")
    pairs = [_member(m) for m in members]
    hashes = [h for h, _ in pairs]
    if len(set(hashes)) != len(hashes):
        dup = sorted({h for h in hashes if hashes.count(h) > 1})
        raise ValueError(f"pool '{pool}' lists tasks more than once: {dup!r}")
    task_rows = [task_record(t, pool=pool) for t in tasks]
    given = {r.content_hash for r in task_rows}
    st = writable_store(store)
    chosen: dict[str, int] = {}

    def build(manifest: Manifest) -> dict[str, pa.Table]:
        with Snapshot.open(st, manifest=manifest, with_lineage=False) as snap:
            known = {
                r[0]
                for r in snap.sql(
                    "SELECT content_hash FROM tasks WHERE content_hash IN (SELECT unnest($h))",
                    {"h": hashes},
                ).fetchall()
            }
            missing = [h for h in hashes if h not in known and h not in given]
            if missing:
                raise ValueError(f"pool '{pool}' members are not recorded tasks: {missing!r}")
            latest = snap.sql(
                "SELECT max(pool_version) FROM pool_members WHERE pool = $p", {"p": pool}
            ).scalar()

            def members_of(v: int) -> list[tuple]:
                return snap.sql(
                    """SELECT task_hash, score FROM pool_members
                       WHERE pool = $p AND pool_version = $v ORDER BY rank""",
                    {"p": pool, "v": v},
                ).fetchall()

            if version is not None:
                v = version
            elif latest is not None and members_of(latest) == pairs:
                v = latest  # the same ranking again: a re-run, not a new version
            else:
                v = (latest or 0) + 1
            existing = members_of(v)
        if existing and [h for h, _ in existing] != hashes:
            raise ValueError(
                f"pool '{pool}' version {v} already exists with different members "
                f"({len(existing)} tasks); pool versions are immutable, record a new version"
            )
        chosen["version"] = v
        rows = [
            PoolMemberRecord(
                pool=pool,
                pool_version=v,
                task_hash=h,
                rank=i + 1,
                score=s,
                audit_version=audit_version,
            )
            for i, (h, s) in enumerate(pairs)
        ]
        return {
            TASKS.name: records_table(task_rows, TASKS),
            POOL_MEMBERS.name: records_table(rows, POOL_MEMBERS),
        }

    result = st.commit(build)
    return PoolVersion(
        pool=pool,
        version=chosen["version"],
        tasks=len(pairs),
        written=result.written.get(POOL_MEMBERS.name, 0),
    )


def pool_version(source: Snapshot | StoreRef, pool: Pool | str, version: int | None = None) -> int:
    """`version` if the pool has it, else the pool's latest version; ValueError naming what
    is recorded otherwise."""
    snap = source if isinstance(source, Snapshot) else Snapshot.open(source, with_lineage=False)
    try:
        return _resolve_version(snap, Pool.parse(pool).value, version)
    finally:
        if snap is not source:
            snap.close()


def _resolve_version(snap: Snapshot, pool: str, version: int | None) -> int:
    if version is not None:
        found = snap.sql(
            "SELECT count(*) FROM pool_members WHERE pool = $p AND pool_version = $v",
            {"p": pool, "v": version},
        ).scalar()
        if not found:
            raise ValueError(f"pool '{pool}' has no version {version!r}")
        return version
    latest = snap.sql(
        "SELECT max(pool_version) FROM pool_members WHERE pool = $p", {"p": pool}
    ).scalar()
    if latest is None:
        known = [r[0] for r in snap.sql("SELECT DISTINCT pool FROM pool_members").fetchall()]
        raise ValueError(
            f"pool '{pool}' has no recorded version; recorded pools: {sorted(known)!r}"
        )
    return int(latest)


POOL_QUERY = """
    SELECT m.pool, m.pool_version, m.rank, m.score, t.*
    FROM pool_members m JOIN tasks t ON t.content_hash = m.task_hash
    WHERE m.pool = $p AND m.pool_version = $v
    ORDER BY m.rank
"""


def load_pool(
    source: Snapshot | StoreRef,
    pool: Pool | str,
    version: int | None = None,
    *,
    bundles: bool = True,
) -> pa.Table:
    """The members of a pool version (latest by default) joined with their task rows, by rank.

    `bundles=False` leaves out the bundle column (much less to read for large pools).
    """
    pool = Pool.parse(pool).value
    snap = source if isinstance(source, Snapshot) else Snapshot.open(source, with_lineage=False)
    try:
        v = _resolve_version(snap, pool, version)
        query = POOL_QUERY if bundles else POOL_QUERY.replace("t.*", "t.* EXCLUDE (bundle)")
        return snap.arrow(query, {"p": pool, "v": v})
    finally:
        if snap is not source:
            snap.close()


RST_MEMBERS_QUERY = """
    SELECT candidate_hash FROM synth_candidates WHERE status = 'accepted'
    ORDER BY round, campaign, slot, candidate_hash
"""


def rst_members(source: Snapshot | StoreRef) -> list[str]:
    """The RST pool's membership rule, in one place: every candidate any synthesis campaign
    accepted, in (round, campaign, slot) order. Synthesis and the pools stage both record
    `Pool.RST` from it, so neither mints a version the other would undo."""
    snap = source if isinstance(source, Snapshot) else Snapshot.open(source, with_lineage=False)
    try:
        return [r[0] for r in snap.sql(RST_MEMBERS_QUERY).rows]
    finally:
        if snap is not source:
            snap.close()


def pool_tasks(table: pa.Table) -> list[Task]:
    """Rebuild the `Task`s of a `load_pool` table (checks each content hash; each keeps its
    recorded id)."""
    return [
        task_from_bundle(
            dict(row["bundle"]), expected_hash=row["content_hash"], task_id=row["task_id"]
        )
        for row in table.select(["content_hash", "task_id", "bundle"]).to_pylist()
    ]


REFERENCE_QUERY = """
    SELECT task_hash, arg_max(reference, audited_at) AS reference FROM audits
    WHERE reference IS NOT NULL AND len(reference) > 0
      AND task_hash IN (SELECT unnest($h))
    GROUP BY task_hash
"""


def reference_verdicts(
    source: Snapshot | StoreRef, task_hashes: Iterable[str]
) -> dict[str, ReferenceVerdict]:
    """The reference verdict of each task that has one (the latest audit that recorded one):
    what a trial of the task is paid against (`tasks.results.pay`). Tasks never audited, or
    whose reference solution did not resolve them, are absent."""
    hashes = sorted(set(task_hashes))
    if not hashes:
        return {}
    snap = source if isinstance(source, Snapshot) else Snapshot.open(source, with_lineage=False)
    try:
        rows = snap.sql(REFERENCE_QUERY, {"h": hashes}).rows
    finally:
        if snap is not source:
            snap.close()
    return {
        h: ReferenceVerdict(outcomes=tuple(ReferenceOutcome.model_validate(o) for o in ref))
        for h, ref in rows
    }


class PoolExport(BaseModel):
    pool: Pool
    version: int
    tasks: int
    parquet: Path
    harbor_dir: Path


def export_pool(
    source: Snapshot | StoreRef, pool: Pool | str, dest: Path | str, version: int | None = None
) -> PoolExport:
    """Write a pool version as `dest/pool.parquet` plus `dest/tasks/<task dir>/` in Harbor layout.

    The parquet has one row per member (rank order) with every task column and `harbor_dir`,
    the member's directory under `dest`. Task directories are named by task id, suffixed with
    the hash prefix where two members share an id. `dest` must not exist; the export is built
    beside it and renamed into place, so an interrupted export leaves no partial `dest`.
    """
    pool = Pool.parse(pool).value
    dest = Path(dest)
    if dest.exists():
        raise ValueError(f"export destination exists, refusing to overwrite: {str(dest)!r}")
    table = load_pool(source, pool, version)
    v = int(table.column("pool_version")[0].as_py()) if table.num_rows else (version or 0)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        ids = table.column("task_id").to_pylist()
        hashes = table.column("content_hash").to_pylist()
        uses = Counter(ids)
        dirs = [i if uses[i] == 1 else f"{i}-{h[:12]}" for i, h in zip(ids, hashes, strict=True)]
        for task, d in zip(pool_tasks(table), dirs, strict=True):
            write_harbor(task, tmp / "tasks" / d)
        table = table.append_column("harbor_dir", pa.array([f"tasks/{d}" for d in dirs]))
        (tmp / "tasks").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp / "pool.parquet", compression="zstd")
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return PoolExport(
        pool=pool,
        version=v,
        tasks=table.num_rows,
        parquet=dest / "pool.parquet",
        harbor_dir=dest / "tasks",
    )
