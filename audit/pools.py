"""The three pools, as versioned rows of the warehouse (`pool_members`, rank 1 best).

- RST: every task synthesis accepted (tasks recorded with origin pool `rst`), round order;
- T1: the audit's final accepted tasks, best composite first, up to a target size (15,000
  at full scale), no category over its quota share (`T1_CATEGORY_QUOTA`): materialized in
  quality-rank order, so training must read it through `warehouse.permutation`;
- TMax: an imported public corpus (Harbor or Terminal-Bench layout), as read by
  `audit.intake`: a verifier that reports per assertion stays dense, one that reports reward
  only is marked `binary_verifier`; malformed tasks are reported as rejects.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from audit.intake import read_corpus, source_label
from audit.selection import FinalRow, final_decisions
from audit.verdict import Verdict
from tasks.corpus import SEED_DIR, Reject, import_dir
from tasks.model import Task
from tasks.pools import Pool
from warehouse.bundles import task_from_bundle
from warehouse.pools import PoolVersion, load_pool, pool_tasks, record_pool, rst_members
from warehouse.recording import StoreRef, record_tasks, writable_store
from warehouse.snapshot import Snapshot

RST, T1, TMAX = Pool.RST, Pool.T1, Pool.TMAX
SYNTHESIS_ORIGIN = Pool.RST.value  # synthesis records accepted tasks with origin pool rst
SEED_ORIGIN = Pool.SEED.value
T1_FULL_SIZE = 15_000
T1_CATEGORY_QUOTA = 0.5
"""The largest share of T1 one task category may hold."""


def recorded_tasks(store: StoreRef, origin_pools: tuple[str, ...]) -> list[Task]:
    """Tasks recorded with one of `origin_pools` as their origin, by round then id."""
    with Snapshot.open(writable_store(store), with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT content_hash, task_id, bundle FROM tasks "
            "WHERE origin_pool IN (SELECT unnest($p)) "
            "ORDER BY round, task_id, content_hash",
            {"p": list(origin_pools)},
        )
    return [
        task_from_bundle(dict(r["bundle"]), expected_hash=r["content_hash"], task_id=r["task_id"])
        for r in rows
    ]


def seed_tasks(store: StoreRef) -> tuple[list[Task], list[Reject]]:
    """The bundled seeds, recorded with origin `seed` (malformed seeds are rejects)."""
    tasks, rejects = import_dir(SEED_DIR)
    record_tasks(writable_store(store), tasks, pool=SEED_ORIGIN)
    return tasks, rejects


def audit_candidates(store: StoreRef, pool: str | None = None) -> tuple[list[Task], str]:
    """What to audit: a recorded pool's members, else synthesis output, else the seeds.

    Returns the tasks and a word naming their source.
    """
    if pool and pool not in (SYNTHESIS_ORIGIN, SEED_ORIGIN):
        return pool_tasks(load_pool(writable_store(store), pool)), f"pool {pool}"
    if pool != SEED_ORIGIN:
        synthesized = recorded_tasks(store, (SYNTHESIS_ORIGIN,))
        if synthesized or pool == SYNTHESIS_ORIGIN:
            return synthesized, "synthesis output (origin rst)"
    return seed_tasks(store)[0], "seeds"


def record_rst(store: StoreRef, tasks: list[Task]) -> PoolVersion | None:
    """RST: all accepted synthesis output, in the order of `warehouse.pools.rst_members`
    (the order synthesis records it in; tasks it does not list go last, by round and id);
    None when there is none."""
    if not tasks:
        return None
    st = writable_store(store)
    order = {h: i for i, h in enumerate(rst_members(st))}
    ordered = sorted(
        tasks,
        key=lambda t: (
            order.get(t.content_hash, len(order)),
            t.lineage.round,
            t.id,
            t.content_hash,
        ),
    )
    return record_pool(st, RST, ordered)


def category_cap(n: int, quota: float = T1_CATEGORY_QUOTA) -> int:
    """How many of a pool of n tasks one category may hold: floor(quota * n), at least one
    (a pool smaller than 1 / quota could not hold any task otherwise)."""
    return max(1, math.floor(quota * n + 1e-9))


def t1_members(
    finals: list[FinalRow], size: int, quota: float = T1_CATEGORY_QUOTA
) -> list[FinalRow]:
    """The T1 selection (pure): accepted tasks, best composite first (ties by hash), the
    largest n <= size for which no category holds more than `category_cap(n, quota)`."""
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size!r}")
    if not 0 < quota <= 1:
        raise ValueError(f"quota must be in (0, 1], got {quota!r}")
    accepted = [f for f in finals if f.verdict == Verdict.ACCEPTED]
    accepted.sort(key=lambda f: (-(f.composite or 0.0), f.task_hash))
    counts = Counter(f.category for f in accepted)
    n = min(size, len(accepted))
    while n > 0 and sum(min(c, category_cap(n, quota)) for c in counts.values()) < n:
        n -= 1
    cap, taken = category_cap(n, quota), Counter[str]()
    out: list[FinalRow] = []
    for f in accepted:
        if len(out) == n:
            break
        if taken[f.category] < cap:
            taken[f.category] += 1
            out.append(f)
    return out


def record_t1(
    store: StoreRef,
    version: str,
    size: int = T1_FULL_SIZE,
    only: set[str] | None = None,
    quota: float = T1_CATEGORY_QUOTA,
) -> tuple[PoolVersion | None, list[FinalRow]]:
    """Record T1 from the final decisions of one audit version (restricted to the task hashes
    in `only`, when given; see `t1_members`); (None, []) when none pass."""
    members = t1_members(final_decisions(store, version, only), size, quota)
    if not members:
        return None, []
    pv = record_pool(
        writable_store(store),
        T1,
        [(m.task_hash, m.composite) for m in members],
        audit_version=version,
    )
    return pv, members


def import_tmax(store: StoreRef, root: Path | str) -> tuple[PoolVersion | None, list[Reject]]:
    """Import a corpus directory as TMax (import order, rejects reported, the source
    directory recorded); dense verifiers stay dense."""
    intake = read_corpus(root)
    if not intake.tasks:
        return None, intake.rejects
    st = writable_store(store)
    record_tasks(st, intake.tasks, pool=TMAX, source=source_label(root))
    pv = record_pool(st, TMAX, intake.tasks, tasks=intake.tasks)
    return pv, intake.rejects
