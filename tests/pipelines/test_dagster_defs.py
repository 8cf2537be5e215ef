"""Dagster wiring: definitions load; assets materialize in process against a temporary store;
the evaluation sensor reacts to a reported evaluation."""

from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import defs
from pipelines.defs.audit_assets import tmax_pool
from pipelines.defs.evaluation import evaluation_reported, evaluation_summary
from pipelines.defs.resources import ForgeConfig
from pipelines.defs.task_assets import seed_corpus
from pipelines.reporting import report_evaluation
from tasks.corpus import seed_paths
from warehouse import EvaluationRecord, open_snapshot, record_evaluations

pytestmark = pytest.mark.orchestration
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_definitions_load_and_validate():
    d = defs()
    dg.Definitions.validate_loadable(d)
    keys = {k.to_user_string() for k in d.resolve_asset_graph().get_all_asset_keys()}
    assert {"seed_corpus", "tmax_pool", "evaluation_results", "evaluation_summary"} <= keys


def test_seed_corpus_materializes_into_the_store(tmp_path: Path):
    forge = ForgeConfig(store=str(tmp_path / "wh"))
    result = dg.materialize([seed_corpus], resources={"forge": forge})
    assert result.success
    md = result.asset_materializations_for_node("seed_corpus")[0].metadata
    assert md["tasks"].value == len(seed_paths())
    with open_snapshot(forge.store_path) as snap:
        n = snap.sql("SELECT count(*) FROM pool_members WHERE pool = 'seed'").rows[0][0]
    assert n == len(seed_paths())


def test_tmax_pool_keeps_dense_verifiers_dense_and_is_empty_when_unset(tmp_path: Path):
    empty = dg.materialize([tmax_pool], resources={"forge": ForgeConfig(store=str(tmp_path / "a"))})
    assert empty.asset_materializations_for_node("tmax_pool")[0].metadata["tasks"].value == 0
    forge = ForgeConfig(store=str(tmp_path / "b"), tmax_dir=str(FIXTURES / "terminal-bench"))
    result = dg.materialize([tmax_pool], resources={"forge": forge})
    assert result.asset_materializations_for_node("tmax_pool")[0].metadata["tasks"].value == 2
    with open_snapshot(forge.store_path) as snap:
        rows = snap.rows("SELECT binary_verifier, source FROM tasks")
    assert rows and not any(r["binary_verifier"] for r in rows)  # pytest -rA: per assertion
    assert {r["source"] for r in rows} == {str((FIXTURES / "terminal-bench").resolve())}


def test_evaluation_report_triggers_the_sensor_and_summary(tmp_path: Path):
    forge = ForgeConfig(store=str(tmp_path / "wh"))
    record_evaluations(
        forge.store_path,
        [
            EvaluationRecord(
                campaign="c1",
                checkpoint="step-1",
                benchmark="seeds",
                task_hash="a" * 64,
                task_id="ta",
                resolved=True,
                dense_score=3.0,
                category="debugging",
            ),
            EvaluationRecord(
                campaign="c1",
                checkpoint="step-1",
                benchmark="seeds",
                task_hash="b" * 64,
                task_id="tb",
                resolved=False,
                dense_score=1.0,
                category="debugging",
            ),
        ],
    )
    with dg.instance_for_test() as instance:

        def run_requests():
            ctx = dg.build_sensor_context(instance=instance, definitions=defs())
            return [r for r in evaluation_reported(ctx) or [] if isinstance(r, dg.RunRequest)]

        assert run_requests() == []
        report_evaluation({"checkpoint": "step-1", "resolved_rate": 0.5}, instance=instance)
        requests = run_requests()
        assert len(requests) == 1 and requests[0].tags["checkpoint"] == "step-1"
        result = dg.materialize([evaluation_summary], resources={"forge": forge}, instance=instance)
    md = result.asset_materializations_for_node("evaluation_summary")[0].metadata
    assert md["checkpoints"].value == 1
    assert "0.500" in md["summary"].value


def test_reaudit_schedule_evaluates_to_a_run_of_the_audit_assets():
    from pipelines.defs.schedules import reaudit_job, reaudit_schedule

    ctx = dg.build_schedule_context()
    data = reaudit_schedule.evaluate_tick(ctx)
    assert len(data.run_requests) == 1
    selected = {
        k.to_user_string() for k in reaudit_job.selection.resolve(defs().resolve_asset_graph())
    }
    assert selected == {"audit_results", "t1_pool", "pool_reports"}
    assert reaudit_schedule.cron_schedule == "0 3 * * *"
