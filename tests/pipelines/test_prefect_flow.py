"""The Prefect `ppo_campaign` flow: one real step under a throwaway Prefect server, its
evaluation recorded in the warehouse and reported to Dagster's `evaluation_results` asset."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")
pytest.importorskip("torch")
dg = pytest.importorskip("dagster")

pytestmark = [pytest.mark.orchestration, pytest.mark.torch, pytest.mark.slow, pytest.mark.sandbox]


def test_ppo_campaign_flow_reports_its_evaluation(tmp_path, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    from pipelines.flows import ppo_campaign
    from training.warm_start import warm_started_policy
    from warehouse import open_snapshot

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    policy = warm_started_policy(reuse_stale=True)
    with prefect_test_harness(server_startup_timeout=120):
        history = ppo_campaign(
            preset="tiny-cpu",
            steps=1,
            run_dir=str(tmp_path / "run"),
            store=str(tmp_path / "wh"),
            policy_path=str(policy),
        )
    assert len(history) == 1 and history[0]["weights/version"] == 1.0
    assert history[0]["losses/value"] == history[0]["losses/value"]  # not NaN
    with open_snapshot(tmp_path / "wh") as snap:
        evals = snap.rows("SELECT campaign, checkpoint, dense_score FROM evaluations")
        trajectories = snap.rows("SELECT step FROM trajectories")
    # rows carry the run id (unique per run), which starts with the campaign name
    assert [(e["campaign"].startswith("tiny-cpu-"), e["checkpoint"]) for e in evals] == [
        (True, "v1")
    ]
    assert len(trajectories) == 2
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("evaluation_results"))
    assert event is not None, "the flow did not report its evaluation to Dagster"
    meta = event.asset_materialization.metadata
    assert meta["checkpoint"].value == "v1"
    assert meta["validate/dense_score"].value == evals[0]["dense_score"]
