"""The five-stage selection funnel on a small planted set, re-audit by (hash, version), pools."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest

from audit.judge_exec import ExecConfig
from audit.pools import T1, import_tmax, record_t1, t1_members
from audit.repair import SECTION, repair_instruction
from audit.rubric import load_rubric
from audit.selection import (
    SelectionConfig,
    Stage,
    audit_version,
    final_decisions,
    run_selection,
)
from audit.static_checks import static_findings
from audit.verdict import Code, Verdict
from tests.audit.planted import base_task, hidden_requirement_task, leakage_task, weak_verifier_task
from warehouse import load_pool
from warehouse.recording import writable_store

FAST = ExecConfig(reruns=1, max_mutants=4, workers=2)


def test_programmatic_repair_states_the_hidden_requirement():
    task = hidden_requirement_task()
    findings = static_findings(task).findings
    new = repair_instruction(task, findings)
    assert new is not None and SECTION in new.instruction
    assert "/app/report/summary.txt" in new.instruction and "status: complete" in new.instruction
    assert [f for f in static_findings(new).findings if f.defect] == []
    assert new.lineage.parents == [task.content_hash]
    assert new.verifier == task.verifier and new.solution == task.solution
    assert repair_instruction(base_task(), []) is None


@pytest.fixture(scope="module")
def funnel(tmp_path_factory):
    store = writable_store(tmp_path_factory.mktemp("sel") / "store")
    no_solution = base_task("audit-nosolution", solution=None)
    tasks = [base_task(), hidden_requirement_task(), leakage_task(), weak_verifier_task(),
             no_solution]  # fmt: skip
    cfg = SelectionConfig(rubric=load_rubric("t1"), exec=FAST, task_workers=2)
    result = run_selection(store, tasks, cfg)
    measured, repaired = list(result.measured), dict(result.repaired)
    for _ in range(2):
        # Evidence the judge could not gather (a sandbox lost under load: a loaded run of the
        # suite saw one oracle trial of audit-hidden end as infrastructure) is an `error`,
        # retried by the next run as designed; the funnel's decisions are what is tested here.
        lost = [(o.task_id, o.reasons) for o in result.outcomes if o.verdict == Verdict.ERROR]
        if not lost:
            break
        warnings.warn(f"selection retried after infrastructure errors: {lost}", stacklevel=1)
        result = run_selection(store, tasks, cfg)
        measured += result.measured
        repaired |= result.repaired
    return store, tasks, cfg, result.model_copy(update={"measured": measured, "repaired": repaired})


def _verdicts(result, stage):
    return {o.task_id: o.verdict for o in result.by_stage(stage)}


@pytest.mark.sandbox
def test_each_stage_decides_and_stores_its_reason(funnel):
    store, tasks, cfg, result = funnel
    assert set(_verdicts(result, Stage.AGGREGATE).values()) == {"pass"}
    lost = [(o.task_id, o.stage, o.reasons) for o in result.outcomes if o.verdict == "error"]
    assert not lost, lost  # what the judge could not measure, named
    assert _verdicts(result, Stage.PRECHECK) == {
        "audit-clean": "pass", "audit-hidden": "pass", "audit-leakage": "pass",
        "audit-weak": "pass", "audit-nosolution": "rejected",
    }  # fmt: skip
    nosol = next(o for o in result.by_stage(Stage.PRECHECK) if o.task_id == "audit-nosolution")
    assert Code.NO_SOLUTION in nosol.hard_codes()
    assert _verdicts(result, Stage.SEMANTIC) == {
        "audit-clean": "accepted", "audit-hidden": "rejected",
        "audit-leakage": "rejected", "audit-weak": "rejected",
    }  # fmt: skip
    assert _verdicts(result, Stage.REPAIR) == {"audit-hidden": Verdict.REPAIRED}
    assert _verdicts(result, Stage.REAUDIT) == {"audit-hidden": "accepted"}
    leak = next(o for o in result.by_stage(Stage.SEMANTIC) if o.task_id == "audit-leakage")
    assert Code.TEST_LEAKAGE in leak.hard_codes()
    assert any(r.startswith("hard reject: test_leakage") for r in leak.reasons)
    finals = {f.task_id: f for f in final_decisions(store, result.version)}
    assert finals["audit-hidden"].stage == Stage.REAUDIT
    assert finals["audit-hidden"].task_hash == result.repaired[tasks[1].content_hash]
    assert sorted(k for k, f in finals.items() if f.verdict == "accepted") == [
        "audit-clean", "audit-hidden",
    ]  # fmt: skip


@pytest.mark.sandbox
def test_reaudit_rescores_only_new_hash_version_pairs(funnel):
    store, tasks, cfg, first = funnel
    assert len(set(first.measured)) == 5  # each measured (once more where it was lost)
    again = run_selection(store, tasks, cfg)
    assert again.measured == [] and again.scored == []
    assert _verdicts(again, Stage.SEMANTIC) == _verdicts(first, Stage.SEMANTIC)
    new_rubric = cfg.rubric.model_copy(update={"version": cfg.rubric.version + ".1"})
    v2 = run_selection(store, tasks, cfg.model_copy(update={"rubric": new_rubric}))
    assert v2.version != first.version
    assert v2.measured == []  # executable evidence is reused across rubric versions
    assert len(v2.scored) == 5  # 4 semantic + 1 re-audit, all new (hash, version) pairs
    extra = base_task("audit-extra", instruction=base_task().instruction + "\nBe careful.\n")
    more = run_selection(store, [*tasks, extra], cfg)
    assert more.measured == [extra.content_hash] and more.scored == [extra.content_hash]


@pytest.mark.sandbox
def test_t1_pool_is_quality_ranked_and_capped(funnel):
    store, tasks, cfg, result = funnel
    pv, members = record_t1(store, result.version, size=1)
    assert pv is not None and pv.tasks == 1
    table = load_pool(store, T1, bundles=False)
    assert table.column("content_hash").to_pylist() == [members[0].task_hash]
    finals = final_decisions(store, result.version)
    ranked = t1_members(finals, 10)
    assert [m.composite for m in ranked] == sorted((m.composite for m in ranked), reverse=True)


@pytest.mark.sandbox
def test_a_repaired_version_is_decided_once(funnel):
    """Regression: the repair records its new version with the original's origin, so the
    t1_pool asset's selection over the store's candidates audited it again as a task of its
    own, and T1 listed it twice ("pool 't1' lists tasks more than once"). Listed with its
    original it is decided through it (stage 5); audited alone, its own stage-3 decision is
    its one decision."""
    store, tasks, cfg, first = funnel
    original = tasks[1]  # audit-hidden, repaired
    new = repair_instruction(original, static_findings(original).findings)
    assert new is not None and first.repaired[original.content_hash] == new.content_hash
    again = run_selection(store, [*tasks, new], cfg)
    assert again.measured == [] and again.scored == []
    assert new.content_hash not in {o.task_hash for o in again.by_stage(Stage.SEMANTIC)}
    assert again.repaired[original.content_hash] == new.content_hash
    alone = run_selection(store, [new], cfg)  # decided as a task of its own (stage 3)
    assert alone.scored == [new.content_hash]
    finals = final_decisions(store, first.version)
    assert Counter(f.task_hash for f in finals)[new.content_hash] == 1
    mine = next(f for f in finals if f.task_hash == new.content_hash)
    assert mine.stage == Stage.SEMANTIC
    pv, members = record_t1(store, first.version, size=10)
    assert pv is not None and len({m.task_hash for m in members}) == len(members) == pv.tasks


def test_audit_version_names_rubric_and_judges():
    r = load_rubric("t1")
    assert audit_version(r) == "t1-4+exec-26"
    later = r.model_copy(update={"version": str(int(r.version) + 1)})
    assert audit_version(later) != audit_version(r)


def test_tmax_import_keeps_dense_verifiers_dense(tmp_path):
    """Regression: TMax import marked every task `binary_verifier`, so stage 1 rejected all
    of a corpus whose pytest verifiers report every assertion (`-rA`)."""
    from pathlib import Path

    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "terminal-bench"
    pv, rejects = import_tmax(tmp_path / "store", corpus)
    assert pv is not None and pv.tasks >= 1
    table = load_pool(tmp_path / "store", "TMax", bundles=False)
    assert not any(table.column("binary_verifier").to_pylist())
    assert set(table.column("source").to_pylist()) == {str(corpus.resolve())}


def test_t1_keeps_every_category_within_its_quota():
    """Regression: T1 took the best composites whatever their category (two of three tasks
    from one category) and its own quota check failed."""
    from audit.selection import FinalRow, Stage

    def row(i: int, cat: str, composite: float, verdict: Verdict = Verdict.ACCEPTED) -> FinalRow:
        return FinalRow(task_hash=f"{i:064x}", task_id=f"t{i}", category=cat, verdict=verdict,
                        composite=composite, stage=Stage.SEMANTIC)  # fmt: skip

    finals = [row(0, "vc", 0.99), row(1, "vc", 0.98), row(2, "ds", 0.97), row(3, "vc", 0.5),
              row(4, "ds", 0.99, Verdict.REJECTED)]  # fmt: skip
    assert [m.task_id for m in t1_members(finals, 10)] == ["t0", "t2"]  # vc <= 1 of 2
    assert [m.task_id for m in t1_members(finals, 10, quota=1.0)] == ["t0", "t1", "t2", "t3"]
    assert [m.task_id for m in t1_members(finals, 10, quota=0.75)] == ["t0", "t1", "t2", "t3"]
    one = t1_members([row(0, "vc", 0.9), row(1, "vc", 0.8)], 10)  # one category: one task
    assert [m.task_id for m in one] == ["t0"]
    many = [row(i, "abc"[i % 3], 1 - i / 100) for i in range(30)]
    chosen = t1_members(many, 9, quota=0.4)
    assert len(chosen) == 9 and max(Counter(m.category for m in chosen).values()) <= 3
    assert [m.task_id for m in chosen] == [f"t{i}" for i in range(9)]  # best first, balanced
