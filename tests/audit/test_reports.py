"""Reports and pre-flight: pure counting, rendered files, and a small sandbox pre-flight."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from audit.preflight import PreflightReport, PreflightRow, record_usability, run_preflight, sample
from audit.reports import (
    composition,
    funnel_counts,
    write_composition,
    write_funnel,
    write_preflight,
)
from audit.selection import STAGE_JUDGE, Stage
from tasks.model import Category
from tasks.results import (
    AssertionResult,
    AssertionStatus,
    ReportSource,
    TrialResult,
    VerifierReport,
)
from tests.audit.planted import base_task, hidden_requirement_task, leakage_task
from warehouse.records import AuditRecord

H = "a" * 64


def test_funnel_counts_per_stage():
    agg = STAGE_JUDGE[Stage.AGGREGATE]
    rows = [
        AuditRecord(task_hash=H, judge=agg, audit_version="v", verdict="pass"),
        AuditRecord(task_hash="b" * 64, judge=STAGE_JUDGE[Stage.AGGREGATE], audit_version="v",
                    verdict="rejected"),
        AuditRecord(task_hash=H, judge=STAGE_JUDGE[Stage.SEMANTIC], audit_version="v",
                    verdict="borderline"),
    ]  # fmt: skip
    f = {r.stage: r for r in funnel_counts(rows)}
    assert f[Stage.AGGREGATE].entered == 2 and f[Stage.AGGREGATE].outcomes == {
        "pass": 1,
        "rejected": 1,
    }
    assert f[Stage.SEMANTIC].outcomes == {"borderline": 1} and f[Stage.REAUDIT].entered == 0


def test_composition_shares_and_chart(tmp_path):
    comp = composition(["debugging", "scripting-automation", "scripting-automation", "debugging",
                        "scripting-automation", "performance"])  # fmt: skip
    assert comp[0] == ("scripting-automation", 3, 0.5)
    assert [c for c, _, _ in comp] == ["scripting-automation", "debugging", "performance"]
    files = write_composition(comp, tmp_path, "test")
    assert (tmp_path / "composition.png").read_bytes()[:4] == b"\x89PNG"
    assert "50.0%" in (tmp_path / "composition.md").read_text()
    assert len(files) == 3
    write_funnel(funnel_counts([]), tmp_path, selected=0)
    assert json.loads((tmp_path / "funnel.json").read_text())["selected"] == 0


def _trial(source: ReportSource, names: int, **kw) -> TrialResult:
    report = VerifierReport(
        source=source,
        assertions=[
            AssertionResult(name=f"t{i}", status=AssertionStatus.PASSED) for i in range(names)
        ],
        **kw,
    )
    return TrialResult(trial_id="t", task_id="x", task_hash=H, agent="oracle", backend="local",
                       report=report)  # fmt: skip


def test_record_usability():
    assert record_usability(_trial(ReportSource.CTRF, 3)) == "usable"
    assert record_usability(_trial(ReportSource.REWARD, 1, reward=1.0)) == "binary"
    assert record_usability(_trial(ReportSource.CTRF, 0)) == "no_assertions"
    assert record_usability(_trial(ReportSource.CTRF, 0, parse_error="junk")) == "parse_error"


def test_sample_is_seeded_without_replacement():
    tasks = [base_task(f"t{i}") for i in range(5)]
    a, b = sample(tasks, 3, seed=1), sample(tasks, 3, seed=1)
    assert [t.id for t in a] == [t.id for t in b] and len({t.id for t in a}) == 3
    assert len(sample(tasks, 10)) == 5


def test_preflight_figure(tmp_path):
    rows = [PreflightRow(task_hash=H, task_id="a", usable=True, reason="usable"),
            PreflightRow(task_hash=H, task_id="b", usable=False, reason="binary")]  # fmt: skip
    report = PreflightReport(pool="T1", sampled=2, usable=1, rows=rows)
    write_preflight(report, tmp_path)
    doc = json.loads((tmp_path / "preflight.json").read_text())
    assert doc["share"] == 0.5 and (tmp_path / "preflight.png").stat().st_size > 1000


@pytest.mark.sandbox
def test_preflight_on_real_trials(tmp_path):
    binary = base_task("audit-binary").model_copy(
        update={
            "verifier": {
                "test.sh": b"#!/bin/bash\nmkdir -p /logs/verifier\n"
                b"echo 1 > /logs/verifier/reward.txt\n"
            }
        }
    )
    report = run_preflight([base_task(), binary], 2, pool="T", store=tmp_path / "store")
    assert report.sampled == 2 and report.usable == 1
    assert {r.task_id: r.reason for r in report.rows} == {
        "audit-clean": "usable",
        "audit-binary": "binary",
    }


@pytest.mark.sandbox
def test_run_all_command_end_to_end(tmp_path, monkeypatch):
    """The documented one command, on a small planted set recorded as synthesis output."""
    from pipelines.cli import _register, app
    from warehouse.recording import record_tasks

    monkeypatch.delenv("T1_LLM_BASE_URL", raising=False)
    store = tmp_path / "store"
    # three categories, so that T1's quota (one category at most half) can hold two tasks
    hidden = hidden_requirement_task().model_copy(update={"category": Category.DEBUGGING})
    leak = leakage_task().model_copy(update={"category": Category.DATA_SCIENCE})
    record_tasks(store, [base_task(), hidden, leak], pool="rst")
    _register()
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["audit", "run-all", "--store", str(store), "--out", str(out),
                                   "--size", "5", "--preflight-n", "2", "--reruns", "0",
                                   "--mutants", "2"])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"].startswith("synthesis") and summary["candidates"] == 3
    assert summary["t1_size"] == 2 and summary["rst_version"] == 1
    assert summary["preflight_share"] == 1.0
    for name in ("funnel.png", "composition.png", "t1_pool.parquet", "preflight.png", "scores.csv"):
        assert (out / name).is_file(), name
