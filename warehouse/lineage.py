"""Lineage in SQL: the views and table macros every snapshot installs, and Python wrappers.

Lineage is a DAG over content hashes (a task names its parents' hashes inside its own bundle,
so there are no cycles). The walks run on `task_edges(child_key, parent_key)`, an in-memory
table of integer keys (`warehouse.schema.task_key`) built when a snapshot opens, because a
recursive CTE that re-scans Parquet on every step is several times slower at a million tasks.
Every walk uses `USING KEY`, so a task reached along several paths is kept once and the walk
never enumerates paths.

SQL objects (worked examples in docs/warehouse.md):
- `hash_key(h)`: the integer key of a content hash.
- `ancestors(h)`: every recorded ancestor of task `h` up to its seeds, with `distance` (the
  longest path down to `h`, in generations).
- `descendants(h)`: every recorded descendant of task `h`, with `distance` (longest path).
- `lineage_depth`: per task, the longest chain of recorded parents up to a parentless task;
  NULL when no such chain exists (a parent was never recorded).
- `pool_depth_histogram`: (pool, pool_version, depth, tasks).
- `round_producers(r, in_pool := NULL)`: operator, family and task count for the tasks of
  round `r`; with `in_pool`, only the members of that pool's latest version.
- `seed_fanout`: per parentless task: descendants, direct children, max round, and the
  longest path down (`max_distance`).
- `pools`, `latest_pool_members`, `missing_parents`, `task_key_collisions`: helpers/checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import duckdb
from pydantic import BaseModel

from warehouse.schema import task_key

if TYPE_CHECKING:
    from warehouse.snapshot import Snapshot

# The lineage index: two relations every walk reads. Until `build_index` runs they are views
# over the Parquet parts (correct, but each recursion step re-scans Parquet); `build_index`
# replaces them with in-memory tables (about 0.3 s and 150 MB at a million tasks).
INDEX_RELATIONS: dict[str, str] = {
    "task_edges": """SELECT task_key AS child_key, unnest(parent_keys) AS parent_key,
                            unnest(range(len(parent_keys))) AS parent_pos
                     FROM tasks""",
    "lineage_nodes": """SELECT task_key, content_hash, task_id, round, operator, family,
                               origin_pool, len(parents) = 0 AS is_seed
                        FROM tasks""",
}

# Names whose use in a query makes `t1 sql` build the index first.
LINEAGE_NAMES = re.compile(
    r"\b(ancestors|descendants|lineage_depth|pool_depth_histogram|round_producers|seed_fanout"
    r"|task_edges|lineage_nodes)\b",
    re.IGNORECASE,
)

_NODE_COLUMNS = "n.content_hash, n.task_id, n.round, n.operator, n.family, n.origin_pool"

LINEAGE_SQL: tuple[str, ...] = (
    *(f"CREATE VIEW {name} AS {sql}" for name, sql in INDEX_RELATIONS.items()),
    "CREATE MACRO hash_key(h) AS ('0x' || substr(h, 1, 16))::UBIGINT",
    f"""CREATE MACRO ancestors(h) AS TABLE
       WITH RECURSIVE walk(task_key, distance) USING KEY (task_key) AS (
           SELECT hash_key(h), 0
           UNION ALL
           SELECT e.parent_key, w.distance + 1
           FROM walk w JOIN task_edges e ON e.child_key = w.task_key
       )
       SELECT {_NODE_COLUMNS}, w.distance
       FROM walk w JOIN lineage_nodes n ON n.task_key = w.task_key
       WHERE w.distance > 0
       ORDER BY w.distance, n.content_hash""",
    f"""CREATE MACRO descendants(h) AS TABLE
       WITH RECURSIVE walk(task_key, distance) USING KEY (task_key) AS (
           SELECT hash_key(h), 0
           UNION ALL
           SELECT e.child_key, w.distance + 1
           FROM walk w JOIN task_edges e ON e.parent_key = w.task_key
       )
       SELECT {_NODE_COLUMNS}, w.distance
       FROM walk w JOIN lineage_nodes n ON n.task_key = w.task_key
       WHERE w.distance > 0
       ORDER BY w.distance, n.content_hash""",
    """CREATE VIEW lineage_depth AS
       WITH RECURSIVE walk(task_key, depth) USING KEY (task_key) AS (
           SELECT task_key, 0 FROM lineage_nodes WHERE is_seed
           UNION ALL
           SELECT e.child_key, w.depth + 1
           FROM walk w JOIN task_edges e ON e.parent_key = w.task_key
       )
       SELECT n.content_hash, n.task_id, n.round, w.depth
       FROM lineage_nodes n LEFT JOIN walk w ON w.task_key = n.task_key""",
    """CREATE VIEW pools AS
       SELECT pool, pool_version, count(*) AS tasks, min(recorded_at) AS recorded_at
       FROM pool_members GROUP BY pool, pool_version""",
    """CREATE VIEW latest_pool_members AS
       SELECT m.* FROM pool_members m
       JOIN (SELECT pool, max(pool_version) AS pool_version FROM pool_members GROUP BY pool) l
         ON m.pool = l.pool AND m.pool_version = l.pool_version""",
    """CREATE VIEW pool_depth_histogram AS
       SELECT m.pool, m.pool_version, d.depth, count(*) AS tasks
       FROM pool_members m JOIN lineage_depth d ON d.content_hash = m.task_hash
       GROUP BY m.pool, m.pool_version, d.depth""",
    """CREATE MACRO round_producers(r, in_pool := NULL) AS TABLE
       SELECT n.operator, n.family, count(*) AS tasks
       FROM lineage_nodes n
       WHERE n.round = r
         AND (in_pool IS NULL OR n.content_hash IN
              (SELECT task_hash FROM latest_pool_members WHERE pool = in_pool))
       GROUP BY n.operator, n.family
       ORDER BY tasks DESC, n.operator NULLS FIRST, n.family NULLS FIRST""",
    """CREATE VIEW seed_fanout AS
       WITH RECURSIVE reach(seed_key, task_key, distance) USING KEY (seed_key, task_key) AS (
           SELECT task_key, task_key, 0 FROM lineage_nodes WHERE is_seed
           UNION ALL
           SELECT r.seed_key, e.child_key, r.distance + 1
           FROM reach r JOIN task_edges e ON e.parent_key = r.task_key
       )
       , children AS (SELECT parent_key, count(*) AS n FROM task_edges GROUP BY parent_key)
       SELECT s.content_hash AS seed_hash, s.task_id AS seed_id,
              count(*) FILTER (WHERE r.distance > 0) AS descendants,
              coalesce(any_value(c.n), 0) AS children,
              coalesce(max(t.round) FILTER (WHERE r.distance > 0), 0) AS max_round,
              max(r.distance) AS max_distance
       FROM reach r
       JOIN lineage_nodes s ON s.task_key = r.seed_key
       JOIN lineage_nodes t ON t.task_key = r.task_key
       LEFT JOIN children c ON c.parent_key = r.seed_key
       GROUP BY s.content_hash, s.task_id""",
    """CREATE VIEW missing_parents AS
       SELECT t.content_hash, t.task_id, p.parent AS missing_parent
       FROM tasks t, unnest(t.parents) AS p(parent)
       WHERE p.parent NOT IN (SELECT content_hash FROM tasks)""",
    """CREATE VIEW task_key_collisions AS
       SELECT task_key, list(content_hash ORDER BY content_hash) AS hashes
       FROM tasks GROUP BY task_key HAVING count(*) > 1""",
)


def build_index(con: duckdb.DuckDBPyConnection) -> None:
    """Replace the index views with in-memory tables (macros bind them at call time)."""
    for name, sql in INDEX_RELATIONS.items():
        con.execute(f"DROP VIEW IF EXISTS {name}")
        con.execute(f"CREATE TEMP TABLE {name} AS {sql}")


class LineageNode(BaseModel):
    """One task in a lineage walk; `distance` counts generations from the starting task."""

    content_hash: str
    task_id: str
    round: int
    operator: str | None
    family: str | None
    origin_pool: str
    distance: int


class TaskNotFoundError(ValueError):
    """No recorded task matches a reference, or more than one does."""


def resolve_task(snap: Snapshot, ref: str) -> str:
    """The content hash a task reference names: a full hash, a hash prefix (>= 4 hex digits),
    or a task id. TaskNotFoundError (listing candidates) when none or several match."""
    ref = ref.strip()
    if not ref:
        raise TaskNotFoundError(f"empty task reference {ref!r}")
    lowered = ref.lower()
    is_hex = len(lowered) >= 4 and all(c in "0123456789abcdef" for c in lowered)
    rows = snap.rows(
        """SELECT content_hash, task_id FROM lineage_nodes
           WHERE task_id = $ref OR ($hex AND starts_with(content_hash, $prefix))
           ORDER BY content_hash LIMIT 20""",
        {"ref": ref, "hex": is_hex, "prefix": lowered},
    )
    if not rows:
        raise TaskNotFoundError(f"no recorded task has id or hash prefix {ref!r}")
    if len(rows) > 1:
        listed = ", ".join(f"{r['task_id']}@{r['content_hash'][:12]}" for r in rows)
        raise TaskNotFoundError(f"task reference {ref!r} is ambiguous: {listed}")
    return rows[0]["content_hash"]


def _nodes(snap: Snapshot, macro: str, content_hash: str) -> list[LineageNode]:
    snap.ensure_lineage_index()
    rows = snap.rows(f"SELECT * FROM {macro}($h)", {"h": content_hash})
    return [LineageNode.model_validate(r) for r in rows]


def ancestors(snap: Snapshot, content_hash: str) -> list[LineageNode]:
    """Every recorded ancestor of the task, nearest first (see the `ancestors` macro)."""
    return _nodes(snap, "ancestors", content_hash)


def descendants(snap: Snapshot, content_hash: str) -> list[LineageNode]:
    """Every recorded descendant of the task, nearest first (see the `descendants` macro)."""
    return _nodes(snap, "descendants", content_hash)


def relatives(snap: Snapshot, hashes: Iterable[str]) -> set[str]:
    """`hashes` with every recorded ancestor and descendant of each: the tasks a held-out
    split must keep out of training (a child of a held-out task shares its solution path,
    an ancestor its environment and checks)."""
    out: set[str] = set()
    for h in hashes:
        out.add(h)
        out.update(n.content_hash for n in ancestors(snap, h))
        out.update(n.content_hash for n in descendants(snap, h))
    return out


def task_node(snap: Snapshot, content_hash: str) -> LineageNode:
    rows = snap.rows(
        f"SELECT {_NODE_COLUMNS}, 0 AS distance FROM lineage_nodes n WHERE n.content_hash = $h",
        {"h": content_hash},
    )
    if not rows:
        raise TaskNotFoundError(f"no recorded task has hash {content_hash!r}")
    return LineageNode.model_validate(rows[0])


def _parents(snap: Snapshot, keys: list[int]) -> dict[int, list[tuple[int, str | None]]]:
    """child key -> [(parent key, parent hash or None if unrecorded)] in declared order."""
    rows = snap.sql(
        """SELECT e.child_key, e.parent_key, n.content_hash
           FROM task_edges e LEFT JOIN lineage_nodes n ON n.task_key = e.parent_key
           WHERE e.child_key IN (SELECT unnest($keys::UBIGINT[]))
           ORDER BY e.child_key, e.parent_pos""",
        {"keys": keys},
    ).fetchall()
    out: dict[int, list[tuple[int, str | None]]] = {}
    for child, parent, h in rows:
        out.setdefault(child, []).append((parent, h))
    return out


def ancestry_lines(snap: Snapshot, content_hash: str) -> list[str]:
    """The ancestry of a task as an indented text tree, the task first, seeds at the leaves.

    A task reached again along another path is printed once and then referred to by
    "(shown above)"; a parent with no recorded row is printed by its key as "(not recorded)".
    """
    start = task_node(snap, content_hash)
    known = {n.content_hash: n for n in ancestors(snap, content_hash)}
    known[start.content_hash] = start
    parents = _parents(snap, [task_key(h) for h in known])
    lines: list[str] = []
    shown: set[str] = set()

    def label(node: LineageNode, is_seed: bool) -> str:
        how = f" via {node.operator}" if node.operator else ""
        fam = f" [{node.family}]" if node.family else ""
        kind = "seed" if is_seed else f"round {node.round}{how}{fam}"
        return f"{node.task_id} {node.content_hash[:12]} ({kind}, pool {node.origin_pool})"

    def visit(h: str, prefix: str, branch: str, last: bool) -> None:
        node = known[h]
        if h in shown:
            lines.append(f"{prefix}{branch}{node.task_id} {h[:12]} (shown above)")
            return
        shown.add(h)
        mine = parents.get(task_key(h), [])
        lines.append(f"{prefix}{branch}{label(node, not mine)}")
        child_prefix = prefix + ("" if not branch else ("    " if last else "│   "))
        for i, (key, parent_hash) in enumerate(mine):
            is_last = i == len(mine) - 1
            twig = "└── " if is_last else "├── "
            if parent_hash is None or parent_hash not in known:
                lines.append(f"{child_prefix}{twig}{key:016x}… (not recorded)")
            else:
                visit(parent_hash, child_prefix, twig, is_last)

    visit(start.content_hash, "", "", True)
    return lines
