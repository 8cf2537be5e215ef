"""The main job materializes the whole graph (tiny budget) with every check passing."""

from pathlib import Path

import dagster as dg
import pytest

from pipelines.defs.resources import ForgeConfig
from pipelines.main_job import run_main_job
from warehouse import open_snapshot

pytestmark = [pytest.mark.orchestration, pytest.mark.sandbox, pytest.mark.slow]


def test_main_job_end_to_end(tmp_path):
    forge = ForgeConfig(
        store=str(tmp_path / "wh"),
        rounds=2,
        per_round=2,
        seed_ids="git-bisect-regression,sa-log-rotate-script,ds-sensor-summary-stats",
        reports_dir=str(tmp_path / "reports"),
        preflight_n=2,
        audit_mutants=2,
        benchmark_dir=str(Path(__file__).resolve().parents[1] / "fixtures" / "terminal-bench"),
    )
    with dg.instance_for_test() as instance:
        steps = run_main_job(forge, instance)
    assert [s.success for s in steps] == [True] * 3, [(s.step, s.success) for s in steps]
    checks = {k: v for s in steps for k, v in s.checks.items()}
    post = steps[-1].metadata
    assert post["rst_pool"]["tasks"] >= 1
    assert checks == {
        "accepted_tasks_have_a_passing_oracle": "pass",
        "rst_disjoint_from_benchmark": "pass",
        "no_task_in_two_held_out_splits": "pass",
        "t1_preflight": "pass",
        "t1_size_and_quotas": "pass",
    }
    with open_snapshot(forge.store_path) as snap:
        pools = dict(snap.sql("SELECT pool, count(*) FROM pool_members GROUP BY pool").rows)
    assert pools["seed"] >= 40 and pools["rst"] >= 1 and pools["t1"] >= 1
    assert (tmp_path / "reports" / "t1_pool.parquet").is_file()
    assert any(p.suffix == ".png" for p in (tmp_path / "reports").iterdir())
