"""A campaign run's provenance: the `campaigns` rows the flow and `t1 train --no-flow` write
around `run_campaign`, and the evaluations a following Dagster run reports from them
(attached to itself, the Prefect link a URL value)."""

from __future__ import annotations

import pytest

from pipelines.campaign_plan import CampaignTasks, campaign_config
from pipelines.campaign_provenance import config_hash, recorded_campaign, start_record
from warehouse import EvaluationRecord, Snapshot, record_evaluations

dg = pytest.importorskip("dagster")


def _cfg(store, steps: int = 2):
    return campaign_config(
        "tiny-cpu",
        steps=steps,
        eval_every=None,
        pool="t1",
        store=str(store),
        policy_path=None,
        runs_dir=None,
    )


def _split(version: int = 3) -> CampaignTasks:
    return CampaignTasks("t1", version, train=[], held_out=[], audit_version="a-9")


def _runs(store) -> list[tuple]:
    with Snapshot.open(store, with_lineage=False) as snap:
        return snap.sql(
            "SELECT run_id, status, pool_version, audit_version, prefect_flow_run_id, detail "
            "FROM campaign_runs ORDER BY started_at"
        ).rows


def test_a_run_is_recorded_when_it_starts_and_when_it_ends(tmp_path) -> None:
    cfg = _cfg(tmp_path / "wh")
    start = start_record(cfg, _split(), preset="tiny-cpu", prefect_flow_run_id="f-1")
    with recorded_campaign(cfg, start):
        # While it runs, SQL sees it started.
        assert _runs(cfg.store) == [(cfg.run_id, "started", 3, "a-9", "f-1", None)]
    assert _runs(cfg.store) == [(cfg.run_id, "finished", 3, "a-9", "f-1", None)]


def test_a_failed_or_cancelled_run_is_recorded_failed_and_the_error_goes_on(tmp_path) -> None:
    for error in (RuntimeError("engine died\nmore"), KeyboardInterrupt()):
        cfg = _cfg(tmp_path / "wh")
        with (
            pytest.raises(type(error)),
            recorded_campaign(cfg, start_record(cfg, _split(), preset="p")),
        ):
            raise error
    rows = _runs(tmp_path / "wh")
    assert [r[1] for r in rows] == ["failed", "failed"]
    assert [r[5] for r in rows] == ["RuntimeError: engine died", "KeyboardInterrupt: "]


def test_the_config_hash_is_the_settings_not_the_run(tmp_path) -> None:
    a, b = _cfg(tmp_path / "a"), _cfg(tmp_path / "b")
    assert a.run_id != b.run_id
    assert config_hash(a) == config_hash(b)  # same settings, other run id and store
    assert config_hash(a) != config_hash(_cfg(tmp_path / "a", steps=3))


def test_the_following_dagster_run_reports_each_checkpoint_once_with_a_link(tmp_path) -> None:
    """Regression: evaluations came back runless, the Prefect URL as plain text."""
    from pipelines.defs.campaign import evaluation_events
    from pipelines.defs.resources import ForgeConfig

    forge = ForgeConfig(store=str(tmp_path / "wh"))
    cfg = _cfg(forge.store_path)
    start = start_record(
        cfg, _split(), preset="tiny-cpu", prefect_flow_run_id="f-1", dagster_run_id="d-1"
    )

    def evaluate(checkpoint: str) -> None:
        record_evaluations(
            cfg.store,
            [
                EvaluationRecord(
                    campaign=str(cfg.run_id),
                    checkpoint=checkpoint,
                    benchmark="heldout",
                    task_hash=str(i) * 64,
                    task_id=f"t{i}",
                    resolved=i == 1,
                    dense_score=float(i),
                    category="other",
                )
                for i in (1, 2)
            ],
        )

    reported: set[str] = set()
    link = "http://127.0.0.1:4200/runs/flow-run/f-1"
    with recorded_campaign(cfg, start):
        assert list(evaluation_events(forge, "f-1", link, reported)) == []
        evaluate("v1")
        (first,) = evaluation_events(forge, "f-1", link, reported)
        evaluate("v2")
        (second,) = evaluation_events(forge, "f-1", link, reported)
    assert list(evaluation_events(forge, "f-1", link, reported)) == []
    assert list(evaluation_events(forge, "another-flow-run", link, set())) == []
    md = first.metadata
    assert isinstance(md["prefect_flow_run_url"], dg.UrlMetadataValue)
    assert md["prefect_flow_run_url"].value == link
    assert (md["pool"].value, md["pool_version"].value, md["audit_version"].value) == (
        "t1",
        3,
        "a-9",
    )
    assert md["campaign_run_id"].value == cfg.run_id and md["dagster_run_id"].value == "d-1"
    assert md["validate/pass_rate"].value == 0.5 and md["checkpoint"].value == "v1"
    assert second.metadata["checkpoint"].value == "v2"


def test_no_flow_run_url_without_a_prefect_ui() -> None:
    """Regression: under `t1 train`'s temporary server the evaluation carried a relative
    link (`/runs/flow-run/<id>`) to a server gone when the command ended."""
    pytest.importorskip("prefect")
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

    from pipelines.campaign_deployment import flow_run_url

    with temporary_settings(updates={PREFECT_API_URL: None, PREFECT_UI_URL: None}):
        assert flow_run_url("abc") is None
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        assert flow_run_url("abc") == "http://127.0.0.1:4200/runs/flow-run/abc"


def test_a_prefect_started_run_names_the_audit_its_pool_version_recorded(tmp_path) -> None:
    """Regression: a run started from Prefect's form (no `audit_version` parameter) reported
    `audit_version: unknown`. The flow's resolution, without the campaign: the latest
    version's audit comes from `pool_members`, a given one never overrides it, and it is the
    fallback only where the warehouse recorded none."""
    from pipelines.campaign_plan import split_campaign_tasks, with_audit_version
    from tasks.corpus import load_seeds
    from tasks.pools import Pool
    from tests.pipelines.campaign_store import TRAIN
    from warehouse.pools import record_pool

    store = tmp_path / "wh"
    seeds = {t.id: t for t in load_seeds()}
    first, second = (seeds[i] for i in TRAIN)
    record_pool(store, Pool.T1, [first], tasks=[first], audit_version="audit-a")
    record_pool(store, Pool.T1, [first, second], tasks=[second], audit_version="audit-b")
    record_pool(store, Pool.RST, [second], tasks=[second])  # no audit selects rst
    cfg = _cfg(store)

    latest = with_audit_version(split_campaign_tasks(cfg, "t1", None), "")  # Prefect's form
    assert (latest.pool_version, latest.audit_version) == (2, "audit-b")
    given = with_audit_version(split_campaign_tasks(cfg, "t1", None), "from-dagster")
    assert given.audit_version == "audit-b"
    older = with_audit_version(split_campaign_tasks(cfg, "t1", 1), "")
    assert (older.pool_version, older.audit_version) == (1, "audit-a")
    rst = split_campaign_tasks(cfg.model_copy(update={"pool": "rst"}), "rst", None)
    assert with_audit_version(rst, "").audit_version is None
    assert with_audit_version(rst, "from-dagster").audit_version == "from-dagster"
