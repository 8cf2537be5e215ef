"""Every lineage view and macro on a small hand-built DAG with known answers.

    S1 ──> A ──> D ──> F <── E <── C <── S2
    │      └────────────────> E
    ├────> B ──> G               D ──> K <── S1   (K: longest path to S1 is 3, shortest 1)
    H: parent ffff... was never recorded

Rounds: A, B, C = 1; D, E, G = 2; F, K = 3. Pools: t1 v1 = [F, D, C], t1 v2 = [F, K, G, E],
rst v1 = every non-seed task.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from warehouse import Snapshot, lineage, record_pool, record_tasks


@pytest.fixture(scope="module")
def store(graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("lineage") / "store"
    # Two batches, children before parents in the second, to show order does not matter.
    record_tasks(store, [graph.S1, graph.S2, graph.A])
    record_tasks(store, [graph.F, graph.K, graph.H, graph.E, graph.D, graph.G, graph.C, graph.B])
    g = graph
    record_pool(store, "t1", [g.F, g.D, g.C])
    record_pool(store, "t1", [g.F, g.K, g.G, g.E])
    record_pool(store, "rst", [t for t in g.tasks if t.lineage.parents])
    return store


@pytest.fixture(scope="module", params=["parquet views", "in-memory index"])
def snap(store: Path, request: pytest.FixtureRequest):
    """Every query runs twice: on the index views over Parquet and on the in-memory index."""
    with Snapshot.open(store, lineage_index=request.param == "in-memory index") as s:
        yield s


def _ids(graph, rows: list[dict], col: str = "content_hash") -> dict[str, int]:
    return {graph.id_of(r[col]): r["distance"] for r in rows}


def test_ancestors_walk_up_to_the_seeds_through_a_diamond(snap, graph) -> None:
    rows = snap.rows("SELECT * FROM ancestors($h)", {"h": graph.F.content_hash})
    assert _ids(graph, rows) == {"d": 1, "e": 1, "a": 2, "c": 2, "s1": 3, "s2": 3}
    assert len(rows) == 6  # A is reached along two paths and listed once


def test_ancestor_distance_is_the_longest_path(snap, graph) -> None:
    rows = snap.rows("SELECT * FROM ancestors($h)", {"h": graph.K.content_hash})
    assert _ids(graph, rows) == {"d": 1, "a": 2, "s1": 3}


def test_ancestors_of_a_seed_and_of_an_unknown_hash_are_empty(snap, graph) -> None:
    assert snap.rows("SELECT * FROM ancestors($h)", {"h": graph.S1.content_hash}) == []
    assert snap.rows("SELECT * FROM ancestors($h)", {"h": "0" * 64}) == []


def test_descendants_of_each_seed(snap, graph) -> None:
    s1 = snap.rows("SELECT * FROM descendants($h)", {"h": graph.S1.content_hash})
    assert _ids(graph, s1) == {"a": 1, "b": 1, "k": 3, "d": 2, "e": 2, "g": 2, "f": 3}
    s2 = snap.rows("SELECT * FROM descendants($h)", {"h": graph.S2.content_hash})
    assert _ids(graph, s2) == {"c": 1, "e": 2, "f": 3}
    mid = snap.rows("SELECT * FROM descendants($h)", {"h": graph.A.content_hash})
    assert _ids(graph, mid) == {"d": 1, "e": 1, "f": 2, "k": 2}


def test_relatives_are_the_task_its_ancestors_and_its_descendants(snap, graph) -> None:
    """What a held-out split keeps out of training: E's parents' lines and its child F."""
    g = graph
    names = {t.content_hash: t.id for t in g.tasks}
    assert sorted(names[h] for h in lineage.relatives(snap, [g.E.content_hash])) == [
        "a",
        "c",
        "e",
        "f",
        "s1",
        "s2",
    ]
    got = lineage.relatives(snap, [g.G.content_hash, g.C.content_hash])
    assert sorted(names[h] for h in got) == ["b", "c", "e", "f", "g", "s1", "s2"]
    assert lineage.relatives(snap, []) == set()


def test_lineage_depth(snap, graph) -> None:
    rows = snap.rows("SELECT content_hash, depth FROM lineage_depth")
    depth = {graph.id_of(r["content_hash"]): r["depth"] for r in rows}
    assert depth == {
        "s1": 0,
        "s2": 0,
        "a": 1,
        "b": 1,
        "c": 1,
        "d": 2,
        "e": 2,
        "g": 2,
        "f": 3,
        "k": 3,
        "h": None,  # its only parent was never recorded
    }


def test_pool_depth_histogram(snap) -> None:
    rows = snap.sql(
        "SELECT pool, pool_version, depth, tasks FROM pool_depth_histogram ORDER BY ALL"
    ).fetchall()
    assert rows == [
        ("rst", 1, 1, 3),
        ("rst", 1, 2, 3),
        ("rst", 1, 3, 2),
        ("rst", 1, None, 1),
        ("t1", 1, 1, 1),
        ("t1", 1, 2, 1),
        ("t1", 1, 3, 1),
        ("t1", 2, 2, 2),
        ("t1", 2, 3, 2),
    ]


def test_round_producers(snap) -> None:
    r1 = snap.sql("SELECT * FROM round_producers(1)").fetchall()
    assert r1[0] == ("mutate", "text", 2)  # most tasks first
    assert sorted(r1) == [("harden", "git", 1), ("mutate", "git", 1), ("mutate", "text", 2)]
    r2 = snap.sql("SELECT * FROM round_producers(2)").fetchall()
    assert sorted(r2) == [("compose", "git", 1), ("crossover", "mixed", 1), ("mutate", "git", 1)]
    # Only the latest version of t1 counts: E and G are its round-2 members, D is not.
    r2_t1 = snap.sql("SELECT * FROM round_producers(2, in_pool := 't1')").fetchall()
    assert sorted(r2_t1) == [("crossover", "mixed", 1), ("mutate", "git", 1)]
    assert snap.sql("SELECT * FROM round_producers(9)").fetchall() == []


def test_seed_fanout(snap, graph) -> None:
    rows = snap.rows("SELECT * FROM seed_fanout ORDER BY seed_id")
    got = {
        r["seed_id"]: (r["descendants"], r["children"], r["max_round"], r["max_distance"])
        for r in rows
    }
    assert got == {"s1": (7, 3, 3, 3), "s2": (3, 1, 3, 3)}


def test_integrity_views(snap, graph) -> None:
    missing = snap.rows("SELECT task_id, missing_parent FROM missing_parents")
    assert missing == [{"task_id": "h", "missing_parent": graph.missing}]
    assert snap.rows("SELECT * FROM task_key_collisions") == []


def test_python_wrappers_and_resolution(snap, graph) -> None:
    nodes = lineage.ancestors(snap, graph.E.content_hash)
    assert [(n.task_id, n.distance) for n in nodes] == sorted(
        [("a", 1), ("c", 1), ("s1", 2), ("s2", 2)],
        key=lambda p: (p[1], next(t.content_hash for t in graph.tasks if t.id == p[0])),
    )
    assert {n.task_id for n in lineage.descendants(snap, graph.C.content_hash)} == {"e", "f"}
    assert lineage.resolve_task(snap, "f") == graph.F.content_hash
    assert lineage.resolve_task(snap, graph.F.content_hash[:10]) == graph.F.content_hash
    with pytest.raises(lineage.TaskNotFoundError, match="no recorded task"):
        lineage.resolve_task(snap, "nope")


def test_ancestry_tree_text(snap, graph) -> None:
    lines = lineage.ancestry_lines(snap, graph.F.content_hash)
    assert lines[0].startswith("f ")
    text = "\n".join(lines)
    assert text.count("(shown above)") == 1  # A, reached again through E
    assert sum(1 for line in lines if " s1 " in f" {line.split('── ')[-1]}") >= 1
    assert len(lines) == 8  # f, d, a, s1, e, a (again), c, s2
    h_lines = lineage.ancestry_lines(snap, graph.H.content_hash)
    assert h_lines[1].endswith("(not recorded)")


DOCS = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"


def test_docs_examples_run(snap) -> None:
    """Every ```sql block of docs/warehouse.md runs on this graph (docs that rot fail here)."""
    blocks = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) >= 8
    results = []
    for block in blocks:
        for statement in snap.con.extract_statements(block):
            results.append(snap.sql(statement.query).rows)
    assert results[1] == [(1, 2, ["a", "b"]), (2, 3, ["d", "e", "g"]), (3, 2, ["f", "k"])]
    assert results[2][-1] == ("f", 3, ["mutate", "crossover", "crossover"])
    assert results[5] == [("s1", 7, 3, 3, 3), ("s2", 3, 1, 3, 3)]
