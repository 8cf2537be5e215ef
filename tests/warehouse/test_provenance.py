"""Training provenance in SQL: `campaigns`, `campaign_runs`, `evaluation_scores` and the
documented queries (docs/orchestration.md, "Provenance in SQL") from an evaluation to its
pool version, its audit and the lineage of its tasks.

The store: the lineage graph of test_lineage.py; t1 v1 = [F, D, C] selected by audit `a-1`,
t1 v2 = [K, G, E] by `a-2`; run `r1` starts on v1, evaluates v0, fails, is resumed on v2 and
evaluates v5 (with one infrastructure failure); run `r2` starts on v2 and has no end row
(killed). Regression: "which T1 version did this checkpoint train on?" had no SQL answer.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from warehouse import (
    CampaignRecord,
    CampaignStatus,
    EvaluationRecord,
    Snapshot,
    TrajectoryRecord,
    record_campaign,
    record_evaluations,
    record_pool,
    record_tasks,
    record_trajectories,
)
from warehouse.provenance import pool_audit_version

DOCS = Path(__file__).resolve().parents[2] / "docs" / "orchestration.md"
T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _start(run_id: str, at: datetime, version: int, audit: str) -> CampaignRecord:
    return CampaignRecord(
        run_id=run_id,
        started_at=at,
        status=CampaignStatus.STARTED,
        pool="t1",
        pool_version=version,
        audit_version=audit,
        preset="tiny-cpu",
        config_hash="cafe",
        steps=4,
        prefect_flow_run_id=f"flow-{run_id}-{version}",
        dagster_run_id=f"dagster-{run_id}",
    )


def _end(start: CampaignRecord, status: CampaignStatus, minutes: int, detail: str | None = None):
    return start.model_copy(
        update={
            "status": status,
            "ended_at": start.started_at + timedelta(minutes=minutes),
            "detail": detail,
        }
    )


def _evals(run_id: str, checkpoint: str, at: datetime, tasks, failures=()) -> list:
    return [
        EvaluationRecord(
            campaign=run_id,
            checkpoint=checkpoint,
            benchmark="heldout",
            task_hash=t.content_hash,
            task_id=t.id,
            resolved=i == 0,
            dense_score=3.0 - i,
            category="other",
            failure_mode="sandbox_error" if t in failures else "none",
            recorded_at=at,
        )
        for i, t in enumerate(tasks)
    ]


@pytest.fixture(scope="module")
def store(graph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    g = graph
    store = tmp_path_factory.mktemp("provenance") / "store"
    record_tasks(store, g.tasks)
    record_pool(store, "t1", [g.F, g.D, g.C], audit_version="a-1")
    record_pool(store, "t1", [g.K, g.G, g.E], audit_version="a-2")
    r1 = _start("r1", T0, 1, "a-1")
    r1b = _start("r1", T0 + timedelta(hours=1), 2, "a-2")
    record_campaign(store, r1)
    record_evaluations(store, _evals("r1", "v0", T0 + timedelta(minutes=5), [g.S1, g.S2]))
    record_trajectories(
        store,
        [
            TrajectoryRecord(
                campaign="r1",
                step=s,
                task_hash=g.F.content_hash,
                weight_version=s,
                reward=float(s),
                assertions_passed=s,
                assertions_total=3,
                turns=1,
                tokens=5,
                recorded_at=T0 + timedelta(minutes=1 + s),
            )
            for s in range(2)
        ],
    )
    record_campaign(store, _end(r1, CampaignStatus.FAILED, 10, "RuntimeError: engine died"))
    record_campaign(store, r1b)
    late = T0 + timedelta(hours=1, minutes=5)
    record_evaluations(store, _evals("r1", "v5", late, [g.S1, g.S2, g.H], failures=[g.H]))
    record_campaign(store, _end(r1b, CampaignStatus.FINISHED, 20))
    record_campaign(store, _start("r2", T0 + timedelta(hours=2), 2, "a-2"))
    return store


@pytest.fixture
def snap(store: Path):
    with Snapshot.open(store) as s:
        yield s


def test_campaign_runs_give_each_start_its_outcome(snap) -> None:
    rows = snap.sql(
        "SELECT run_id, pool_version, status, detail, ended_at IS NULL FROM campaign_runs "
        "ORDER BY started_at"
    ).rows
    assert rows == [
        ("r1", 1, "failed", "RuntimeError: engine died", False),
        ("r1", 2, "finished", None, False),
        ("r2", 2, "started", None, True),  # killed: no end row, still 'started'
    ]


def test_an_evaluation_names_the_pool_version_its_run_was_on_when_it_ran(snap) -> None:
    rows = snap.rows(
        "SELECT run_id, checkpoint, pool, pool_version, audit_version, samples, "
        "infrastructure_failures, resolved_rate, dense_score, prefect_flow_run_id "
        "FROM evaluation_scores ORDER BY recorded_at"
    )
    first, resumed = rows
    assert (first["checkpoint"], first["pool_version"], first["audit_version"]) == ("v0", 1, "a-1")
    assert first["prefect_flow_run_id"] == "flow-r1-1"
    # The resumed start moved to v2; its checkpoint says so, not the run's first start.
    assert (resumed["checkpoint"], resumed["pool_version"]) == ("v5", 2)
    assert resumed["audit_version"] == "a-2" and resumed["prefect_flow_run_id"] == "flow-r1-2"
    # H's sandbox error is no evidence about the policy: out of the rates, counted apart.
    assert (resumed["samples"], resumed["infrastructure_failures"]) == (2, 1)
    assert resumed["resolved_rate"] == 0.5 and resumed["dense_score"] == 2.5


def test_the_pool_version_records_its_audit(snap) -> None:
    assert pool_audit_version(snap, "T1", 1) == "a-1"
    assert pool_audit_version(snap, "t1", 2) == "a-2"
    assert pool_audit_version(snap, "t1", 9) is None


def test_the_documented_provenance_queries_run(snap, graph) -> None:
    """Every ```sql block of docs/orchestration.md, on this store (docs that rot fail)."""
    blocks = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) == 4
    results = []
    for block in blocks:
        (statement,) = snap.con.extract_statements(block)
        results.append(snap.sql(statement.query).rows)
    newest, tasks, ancestors, rollouts = results
    # The newest evaluation: r1's v5, on t1 v2 selected by audit a-2.
    assert newest == [
        ("r1", "v5", "t1", 2, "a-2", "tiny-cpu", "cafe", "flow-r1-2", "dagster-r1", 0.5, 2.5)
    ]
    # v2's tasks best first, with their lineage.
    assert tasks == [
        (1, "k", 3, "compose", "s1", 3),
        (2, "g", 2, "mutate", "s1", 2),
        (3, "e", 2, "crossover", "s1", 2),
    ]
    # K's ancestors: D at 1 (and S1, its direct parent, at its longest path 3), A at 2.
    assert [(r[0], r[1]) for r in ancestors] == [("d", 1), ("a", 2), ("s1", 3)]
    # The rollouts r1 trained before it failed were on v1.
    assert rollouts == [("t1", 1, "a-1", 2, 0.5)]
