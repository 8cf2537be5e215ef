"""The loop headless, as `t1 demo` ends: a real Prefect server and the served deployment in
subprocesses, Dagster's `train_campaign` job in process; the campaign's evaluation comes back
into `evaluation_results` with the pool version and the audit version the pool asset
recorded, attached to the Dagster run, and `evaluation_summary` is refreshed."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")
pytest.importorskip("torch")
dg = pytest.importorskip("dagster")

pytestmark = [pytest.mark.orchestration, pytest.mark.torch, pytest.mark.slow, pytest.mark.sandbox]


def test_campaign_on_t1_reports_back_with_its_pool_version(
    t1_store, tmp_path, monkeypatch, warm_policy
):
    # warm_policy: the warm start, built once outside the flow run's subprocess
    from pipelines.campaign_loop import run_campaign_loop
    from pipelines.defs.resources import ForgeConfig

    store, _, _ = t1_store
    monkeypatch.chdir(tmp_path)  # the served flow writes runs/ under its working directory
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("T1_DAGSTER_URL", raising=False)
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.get() as instance:
        # An earlier report: the loop must tell the new evaluation from it.
        instance.report_runless_asset_event(
            dg.AssetMaterialization("evaluation_results", metadata={"checkpoint": "earlier"})
        )
        instance.report_runless_asset_event(
            dg.AssetMaterialization("t1_pool", metadata={"pool_version": 1, "audit_version": "a-7"})
        )
        out = run_campaign_loop(
            ForgeConfig(store=str(store)),
            instance,
            prefect_home=tmp_path / "prefect",
            log_path=tmp_path / "servers.log",
            steps=1,
        )
        summary = instance.get_latest_materialization_event(dg.AssetKey("evaluation_summary"))
        (latest,) = instance.fetch_materializations(
            dg.AssetKey("evaluation_results"), limit=1
        ).records
    log = (tmp_path / "servers.log").read_text(errors="replace")[-3000:]
    assert out.success, f"{out.error}\n{log}"
    e = out.evaluation
    assert (e["pool"], e["pool_version"], e["audit_version"]) == ("t1", 1, "a-7")
    assert e["dagster_run_id"] == out.dagster_run_id
    assert e["checkpoint"] == "v1" and e["campaign_run_id"].startswith("tiny-cpu-")
    assert summary is not None
    # Reported by the Dagster run that started and followed the campaign, attached to it
    # (it was runless), the Prefect link a URL value (it was text over HTTP).
    assert latest.run_id == out.dagster_run_id
    link = latest.asset_materialization.metadata["prefect_flow_run_url"]
    assert isinstance(link, dg.UrlMetadataValue) and link.value.startswith("http://127.0.0.1:")
    assert summary.asset_materialization.metadata["checkpoints"].value == 1
