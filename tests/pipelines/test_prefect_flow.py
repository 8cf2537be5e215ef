"""The Prefect `ppo_campaign` flow on a pool version, under a throwaway Prefect server:
training stays off tasks related to the held-out ones by lineage; each run gets its own
campaign id; evaluations reach Dagster's `evaluation_results` with the pool version; the run
is named and tagged from its parameters, with one artifact per evaluation; and a Dagster that
cannot be reached costs a warning, never the campaign."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("prefect")
pytest.importorskip("torch")
dg = pytest.importorskip("dagster")

from pipelines.campaign_plan import campaign_config, split_campaign_tasks  # noqa: E402
from pipelines.services import free_port  # noqa: E402
from tasks.pools import Pool  # noqa: E402
from warehouse import open_snapshot  # noqa: E402

pytestmark = [pytest.mark.orchestration, pytest.mark.torch]
from tests.pipelines.campaign_store import HELD_OUT, TRAIN  # noqa: E402


def test_tasks_related_to_held_out_ones_never_train(t1_store):
    """Regression: three t1 tasks descended from the preset's held-out task and trained,
    because the split compared exact hashes, not lineage."""
    store, train, child = t1_store
    cfg = campaign_config(
        "tiny-cpu",
        steps=None,
        eval_every=None,
        pool="t1",
        store=str(store),
        policy_path=None,
        runs_dir=None,
    )
    split = split_campaign_tasks(cfg, "T1", None)
    assert (split.pool, split.pool_version) == ("t1", 1)
    assert sorted(t.id for t in split.train) == sorted(TRAIN)
    assert split.excluded == [child.id]
    assert [t.id for t in split.held_out] == [HELD_OUT]
    assert cfg.run_id.startswith("tiny-cpu-") and cfg.pool == "t1"  # a fresh id per launch
    with pytest.raises(ValueError, match="pool 't1' has no version 7"):
        split_campaign_tasks(cfg, "t1", 7)


@pytest.mark.slow
@pytest.mark.sandbox
def test_flow_trains_on_t1_and_reports_with_the_pool_version(
    t1_store, tmp_path, monkeypatch, prefect_harness, warm_policy
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    import pipelines.flows as flows

    store, train, child = t1_store
    # the audit's reference verdicts of the training tasks: the campaign pays against them
    from sandbox import run_trial
    from tasks.results import ReferenceVerdict
    from warehouse import AuditRecord, record_audits

    refs = [ReferenceVerdict.of(run_trial(t, "oracle")) for t in train]
    assert all(refs)
    record_audits(
        store,
        [
            AuditRecord(
                task_hash=t.content_hash,
                judge="exec",
                audit_version="test",
                verdict="pass",
                reference=list(r.outcomes),
            )  # fmt: skip
            for t, r in zip(train, refs, strict=True)
            if r is not None
        ],
    )
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    policy = str(warm_policy)
    common = {"pool": Pool.T1, "steps": 1, "store": str(store), "policy_path": policy}
    state = flows.ppo_campaign(**common, runs_dir=str(tmp_path / "runs"), return_state=True)
    assert state.is_completed(), state.message
    flow_run_id = state.state_details.flow_run_id
    # Dagster down: the report is retried, then logged; the campaign still completes.
    monkeypatch.setattr(
        flows, "evaluation_report", flows.evaluation_report.with_options(retry_delay_seconds=0)
    )
    dead = f"http://127.0.0.1:{free_port()}"
    state2 = flows.ppo_campaign(
        **common, runs_dir=str(tmp_path / "runs"), dagster_url=dead, return_state=True
    )
    assert state2.is_completed(), state2.message
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        artifacts = client.read_artifacts()
        only_run2 = LogFilter(
            flow_run_id=LogFilterFlowRunId(any_=[state2.state_details.flow_run_id])
        )
        for _ in range(20):  # logs reach the server in batches
            logs = [log.message for log in client.read_logs(only_run2)]
            if any("not reported to Dagster" in m for m in logs):
                break
            time.sleep(0.5)
    # Started for "the latest": renamed after the version it resolved (was `...-vlatest`).
    assert run.name == "tiny-cpu-t1-v1-1steps"
    campaign_tag = [t for t in run.tags if t.startswith("campaign:")]
    assert {"pool:t1", "pool_version:1"} <= set(run.tags) and len(campaign_tag) == 1
    run_id = campaign_tag[0].removeprefix("campaign:")
    kinds = sorted(a.type for a in artifacts if a.flow_run_id == flow_run_id)
    assert kinds == ["markdown", "progress", "table"]  # steps, one evaluation, steps table
    assert any("not reported to Dagster" in m for m in logs)

    with open_snapshot(store) as snap:
        trained = {r[0] for r in snap.sql("SELECT DISTINCT task_hash FROM trajectories").rows}
        campaigns = snap.sql("SELECT DISTINCT campaign FROM evaluations ORDER BY 1").rows
        runs = snap.sql(
            "SELECT run_id, status, pool, pool_version, prefect_flow_run_id FROM campaign_runs "
            "ORDER BY started_at"
        ).rows
    assert trained == {t.content_hash for t in train}  # never the held-out task's child
    metrics = [
        json.loads(line)
        for line in (tmp_path / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
    ]
    shares = [m["rollout/reference_share"] for m in metrics if "rollout/reference_share" in m]
    assert shares and all(x == 1.0 for x in shares), shares  # every trial paid against one
    assert len(campaigns) == 2  # a re-run is a new run id: its evaluations are kept
    assert len(list((tmp_path / "runs").iterdir())) == 2  # and its own directory
    # Each run is in `campaigns`, finished, with its pool version and flow run id.
    assert runs[0] == (run_id, "finished", "t1", 1, str(flow_run_id))
    assert [r[1:4] for r in runs[1:]] == [("finished", "t1", 1)]

    with dg.DagsterInstance.get() as instance:
        events = instance.fetch_materializations(dg.AssetKey("evaluation_results"), limit=10)
    assert len(events.records) == 1, "only the first run could report"
    meta = events.records[0].asset_materialization.metadata
    assert meta["pool"].value == "t1" and meta["pool_version"].value == 1
    assert meta["campaign_run_id"].value == run_id
    assert meta["prefect_flow_run_url"].value.endswith(f"/runs/flow-run/{flow_run_id}")
    assert isinstance(meta["prefect_flow_run_url"], dg.UrlMetadataValue)


def test_the_seed_pool_falls_back_to_the_bundled_corpus(tmp_path):
    """`t1 train --pool seed` on a fresh store trains on the preset's seed tasks."""
    cfg = campaign_config(
        "tiny-cpu",
        steps=None,
        eval_every=None,
        pool="seed",
        store=str(tmp_path / "fresh"),
        policy_path=None,
        runs_dir=None,
    )
    split = split_campaign_tasks(cfg, "seed", None)
    assert (split.pool_version, sorted(t.id for t in split.train)) == (0, sorted(TRAIN))
    with pytest.raises(ValueError, match="no warehouse"):
        split_campaign_tasks(cfg, "seed", 2)
