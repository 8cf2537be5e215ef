"""The LLM judge against a local OpenAI-compatible HTTP server started by the test (the
`llm` fixture in conftest.py), including malformed and out-of-range scores."""

from __future__ import annotations

import pytest

from audit.judge_llm import (
    PROMPT_VERSION,
    DirCache,
    LlmConfig,
    LlmResponseError,
    WarehouseCache,
    judge_dimension,
    judge_task,
    parse_score,
    repair_instruction_llm,
)
from audit.rubric import Dimension
from tests.audit.planted import base_task


def test_parse_score_validates_the_schema():
    assert parse_score('{"score": 0.25, "rationale": "x"}').score == 0.25
    assert parse_score('```json\n{"score": 1, "rationale": "fine"}\n```').score == 1.0
    for bad in ("not json", '{"score": 7, "rationale": "x"}', '{"score": -0.1, "rationale": "x"}',
                '{"score": 0.5}', '{"score": 0.5, "rationale": ""}', "[1, 2]", ""):  # fmt: skip
        with pytest.raises(LlmResponseError):
            parse_score(bad)


def test_valid_scores_for_every_dimension(llm):
    fake, cfg = llm
    out = judge_task(base_task(), cfg)
    assert {d: j.score for d, j in out.items()} == {d: 0.9 for d in Dimension}
    assert len(fake.requests) == 6
    assert fake.requests[0]["model"] == "judge-test"
    assert "Instruction-verifier alignment" in fake.requests[0]["messages"][1]["content"]


def test_out_of_range_and_malformed_are_rejected_then_retried(llm):
    fake, cfg = llm
    fake.script = ['{"score": 7, "rationale": "too high"}', "I think it is fine",
                   '{"score": 0.4, "rationale": "a hidden path"}']  # fmt: skip
    j = judge_dimension(base_task(), Dimension.ALIGNMENT, cfg)
    assert (j.score, j.status, j.attempts) == (0.4, "ok", 3)
    assert "score" in j.errors[0] and "not JSON" in j.errors[1]


def test_persistently_bad_responses_become_a_failure_row(llm):
    fake, cfg = llm
    fake.script = ['{"score": 1.5, "rationale": "x"}']
    j = judge_dimension(base_task(), Dimension.FAIRNESS, cfg)
    assert j.score is None and j.status == "invalid" and j.attempts == 3
    assert len(fake.requests) == 3


def test_http_errors_are_retried_then_a_failure_row(llm):
    fake, cfg = llm
    fake.status = 500
    j = judge_dimension(base_task(), Dimension.COVERAGE, cfg)
    assert j.score is None and j.status == "error" and len(j.errors) == 3


def test_cache_by_task_hash_prompt_version_and_model(llm, tmp_path):
    fake, cfg = llm
    cache = DirCache(tmp_path / "llm-cache")
    task = base_task()
    first = judge_dimension(task, Dimension.ALIGNMENT, cfg, cache=cache)
    again = judge_dimension(task, Dimension.ALIGNMENT, cfg, cache=cache)
    assert first.score == again.score == 0.9 and len(fake.requests) == 1
    other_model = cfg.model_copy(update={"model": "another"})
    judge_dimension(task, Dimension.ALIGNMENT, other_model, cache=cache)
    changed = task.model_copy(update={"instruction": task.instruction + "\nAlso be quick.\n"})
    judge_dimension(changed, Dimension.ALIGNMENT, cfg, cache=cache)
    assert len(fake.requests) == 3


def test_failures_are_not_cached(llm, tmp_path):
    fake, cfg = llm
    cache = DirCache(tmp_path / "c")
    fake.script = ["nope"]
    assert judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=cache).score is None
    fake.script = ['{"score": 0.6, "rationale": "fine now"}']
    assert judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=cache).score == 0.6


def test_warehouse_cache_survives_a_new_process_view(llm, tmp_path):
    fake, cfg = llm
    store = tmp_path / "store"
    judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=WarehouseCache(store))
    hit = judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=WarehouseCache(store))
    assert hit.status == "cached" and hit.score == 0.9 and len(fake.requests) == 1


def test_llm_repair_returns_the_rewritten_instruction(llm):
    fake, cfg = llm
    fake.script = ["Do the thing. Also write /app/report/summary.txt."]
    text = repair_instruction_llm(base_task(), ["path /app/report/summary.txt"], cfg)
    assert text is not None and "/app/report/summary.txt" in text


def test_unconfigured_judge_is_off(monkeypatch):
    monkeypatch.delenv("T1_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("T1_LLM_MODEL", "m")
    assert LlmConfig.from_env() is None
    monkeypatch.setenv("T1_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert LlmConfig.from_env() is not None


def test_selection_blends_llm_scores_and_versions_by_model(llm, tmp_path):
    """Stage 3 with the LLM judge configured, on stored executable evidence (no sandbox)."""
    from audit.judge_exec import ExecEvidence
    from audit.rubric import load_rubric
    from audit.selection import SelectionConfig, Stage, run_selection
    from warehouse.recording import record_audits

    fake, cfg = llm
    fake.script = ['{"score": 0.2, "rationale": "the summary file is never mentioned"}']
    task = base_task()
    measures = {"alignment_share": 1.0, "oracle_pass_share": 1.0, "assertions": 3.0,
                "nop_pass_share": 0.3, "effect_coverage": 1.0, "mutation_kill_rate": 1.0,
                "solution_steps": 3.0, "rerun_stable": 1.0}  # fmt: skip
    store = tmp_path / "store"
    record_audits(store, [ExecEvidence(task_hash=task.content_hash, measures=measures).to_record()])
    sel = SelectionConfig(rubric=load_rubric("t1"), llm=cfg, until=Stage.SEMANTIC)
    result = run_selection(store, [task], sel)
    assert result.measured == [] and result.version.endswith(f"+llm-{PROMPT_VERSION}@judge-test")
    row = result.by_stage(Stage.SEMANTIC)[0]
    assert row.scores["llm/alignment"] == 0.2 and row.scores["exec/alignment"] == 1.0
    # 0.2 is under alignment's 0.5 minimum: the blend (0.6) may not lift it over
    assert row.scores["alignment"] == pytest.approx(0.2)
    assert row.scores["training_value"] == pytest.approx(
        0.5 * 0.2 + 0.5 * row.scores["exec/training_value"]
    )
    assert row.verdict == "rejected"
    # the LLM's 0.2 is held to the LLM minimums; the executable scores (1.0) pass theirs
    assert any(r.startswith("llm/correctness 0.20 < LLM critical minimum") for r in row.reasons)
    assert not any(r.startswith("correctness ") for r in row.reasons)
    rationale = [f for f in row.findings if f.code == "llm_score" and f.item == "alignment"]
    assert rationale and "never mentioned" in rationale[0].evidence
    assert len(fake.requests) == 6
    run_selection(store, [task], sel)
    assert len(fake.requests) == 6  # cached by (task hash, prompt version, model)


MEASURES = {"alignment_share": 1.0, "oracle_pass_share": 1.0, "assertions": 6.0,
            "nop_pass_share": 0.0, "effect_coverage": 1.0, "mutation_kill_rate": 1.0,
            "solution_steps": 6.0, "rerun_stable": 1.0}  # fmt: skip


def _stored_evidence(store, task):
    from audit.judge_exec import ExecEvidence
    from warehouse.recording import record_audits

    record_audits(store, [ExecEvidence(task_hash=task.content_hash, measures=MEASURES).to_record()])


def _semantic(store, task, cfg):
    from audit.rubric import load_rubric
    from audit.selection import SelectionConfig, Stage, run_selection

    sel = SelectionConfig(rubric=load_rubric("t1"), llm=cfg, until=Stage.SEMANTIC)
    return run_selection(store, [task], sel).by_stage(Stage.SEMANTIC)[0]


def test_llm_zero_on_a_critical_dimension_rejects_whatever_the_blend(llm, tmp_path):
    """Regression: alignment 0 from the LLM blended with 1.0 at weight 0.5 gave exactly the
    0.5 minimum, and the strict `<` accepted the task."""
    fake, cfg = llm
    fake.script = ['{"score": 0.0, "rationale": "hidden output path"}'] + [
        '{"score": 1.0, "rationale": "fine"}'
    ]
    store = tmp_path / "store"
    task = base_task()
    _stored_evidence(store, task)
    row = _semantic(store, task, cfg)
    assert row.scores["exec/alignment"] == 1.0 and row.scores["alignment"] == 0.0
    assert row.verdict == "rejected"


def test_llm_hard_reject_with_a_quoted_span(llm, tmp_path):
    """A hard reject counts when a check of its class confirms the quote: here solve.sh
    writes the ERROR count as a literal to the checked file (the static shortcut check's
    evidence). Regression (issue 33): any span of solve.sh "proved" a shortcut, the honest
    `grep -c` line included."""
    from tests.audit.planted import error_count, shortcut_task

    fake, cfg = llm
    honest = "grep -c '^ERROR ' /app/app.log"  # a span of the clean task's solve.sh
    hardcoded = f"echo {error_count()} > /app/report/errors.txt"
    script = [
        '{"score": 0.9, "rationale": "x", "hard_reject": {"code": "test_leakage", '
        '"quote": "never appears anywhere"}}',
        '{"score": 0.9, "rationale": "the answer is given", "hard_reject": {"code": '
        '"solution_shortcut", "quote": "%s"}}',
        '{"score": 1.0, "rationale": "fine"}',
    ]
    store = tmp_path / "store"
    clean, cheat = base_task(), shortcut_task()
    _stored_evidence(store, clean)
    _stored_evidence(store, cheat)
    fake.script = [script[0], script[1] % honest, script[2]]
    row = _semantic(store, clean, cfg)
    assert row.verdict == "accepted", row.reasons  # neither quote is evidence
    refused = [f for f in row.findings if f.code == "llm_quote_refused"]
    assert [f.evidence.split(" ", 1)[0] for f in refused] == ["test_leakage", "solution_shortcut"]
    assert "not confirmed" in refused[1].evidence
    assert len(fake.requests) == 6  # a refused quote keeps its score; nothing is asked again
    fake.script = [script[2], script[1] % hardcoded, script[2]]
    row = _semantic(store, cheat, cfg)
    hard = [f for f in row.findings if f.source == "llm" and f.code == "solution_shortcut"]
    assert row.verdict == "rejected" and hard and hardcoded in hard[0].evidence
    assert "hard reject: solution_shortcut" in row.reasons


def test_the_schema_rejects_an_unknown_hard_reject_code():
    ok = '{"score": 0, "rationale": "r", "hard_reject": {"code": "hidden_requirement", ' + (
        '"quote": "status:   ok"}}'
    )
    hard = parse_score(ok).hard_reject
    assert hard is not None and hard.quote == "status:   ok"
    unknown = ok.replace("hidden_requirement", "low_coverage")
    with pytest.raises(LlmResponseError, match="not a hard-reject code"):
        parse_score(unknown)


def test_the_judge_sees_bounded_environment_contents(llm):
    from audit.judge_llm import MAX_ENV_CHARS, task_prompt

    task = base_task()
    files = dict(task.environment.files) | {"app/big.txt": b"x" * 50_000, "app/b.bin": b"\0\1"}
    task = task.model_copy(
        update={"environment": task.environment.model_copy(update={"files": files})}
    )
    text = task_prompt(task, Dimension.ALIGNMENT)[1]["content"]
    assert "ERROR disk" in text or "INFO disk" in text  # the log's contents, not only its name
    assert " environment/app/b.bin>>>\n(binary, 2 bytes)\n<<<END TASK-DATA " in text
    assert text.count("x" * 100) <= MAX_ENV_CHARS // 100


def test_endpoint_failure_is_recorded_not_versioned_and_retried(llm, tmp_path):
    from audit.selection import final_decisions
    from warehouse.snapshot import Snapshot

    fake, cfg = llm
    fake.status = 500
    store = tmp_path / "store"
    task = base_task()
    _stored_evidence(store, task)
    row = _semantic(store, task, cfg)
    assert row.verdict == "error" and any(f.code == "llm_error" for f in row.findings)
    with Snapshot.open(store, with_lineage=False) as snap:
        versions = [
            r[0]
            for r in snap.sql(
                "SELECT audit_version FROM audits WHERE judge LIKE 'stage3%'"
            ).fetchall()
        ]
        llm_rows = snap.sql("SELECT verdict FROM audits WHERE judge LIKE 'llm/%'").fetchall()
    assert versions and all("#error@" in v for v in versions)  # recorded, never as scored
    assert llm_rows and {v for (v,) in llm_rows} == {"error"}
    version = versions[0].split("#error@")[0]
    assert final_decisions(store, version) == []
    fake.status = 200
    again = _semantic(store, task, cfg)  # the next re-audit retries it
    assert again.verdict in ("accepted", "borderline", "rejected")
    assert [f.task_hash for f in final_decisions(store, version)] == [task.content_hash]
