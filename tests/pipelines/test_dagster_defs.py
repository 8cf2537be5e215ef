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
    n = sum(1 for d in (FIXTURES / "terminal-bench").iterdir() if d.is_dir())
    assert result.asset_materializations_for_node("tmax_pool")[0].metadata["tasks"].value == n
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
    # Regression: the re-audit refreshed T1 without RST's and validation's blocking checks.
    assert selected == {
        "validation_trials",
        "audit_results",
        "rst_pool",
        "t1_pool",
        "pool_reports",
    }
    graph = defs().resolve_asset_graph()
    assert dg.AssetKey("rst_pool") in graph.get(dg.AssetKey("t1_pool")).parent_keys
    assert reaudit_schedule.cron_schedule == "0 3 * * *"


def test_sensor_defaults_match_the_docs():
    """The evaluation sensor refreshes the summary without being turned on (the docs said it
    did while it was off); starting a campaign on each new T1 version is opt-in."""
    from pipelines.defs.campaign import t1_pool_updated

    assert evaluation_reported.default_status == dg.DefaultSensorStatus.RUNNING
    assert t1_pool_updated.default_status == dg.DefaultSensorStatus.STOPPED


def test_a_new_t1_version_requests_a_campaign_on_that_version():
    """Regression: turning the sensor on started a campaign on the T1 version that already
    existed; it starts from now, and each version recorded after that requests one run."""
    from pipelines.defs.campaign import audit_version_of, t1_pool_updated

    def record(instance, v, audit):
        instance.report_runless_asset_event(
            dg.AssetMaterialization("t1_pool", metadata={"pool_version": v, "audit_version": audit})
        )

    def tick(instance, cursor):
        ctx = dg.build_sensor_context(instance=instance, definitions=defs(), cursor=cursor)
        result = t1_pool_updated(ctx)
        return [r for r in result.run_requests or [] if isinstance(r, dg.RunRequest)], result

    with dg.instance_for_test() as instance:
        for v, audit in ((1, "a-1"), (2, "a-2")):
            record(instance, v, audit)
        first, result = tick(instance, None)
        assert first == [] and "starting from now" in result.skip_reason.skip_message
        quiet, again = tick(instance, result.cursor)
        assert quiet == [] and again.cursor == result.cursor
        record(instance, 3, "a-3")
        record(instance, 4, "a-4")
        requests, later = tick(instance, again.cursor)
        assert tick(instance, later.cursor)[0] == []  # each version requested once
        assert audit_version_of(instance, "T1", 1) == "a-1"
        assert audit_version_of(instance, "t1", 5) == ""
    assert [r.run_key for r in requests] == ["t1-v3", "t1-v4"]
    config = requests[0].run_config["ops"]["campaign_flow_run"]["config"]
    assert config == {"pool_version": 3}


def test_a_sensor_on_a_fresh_instance_trains_the_first_version():
    from pipelines.defs.campaign import new_t1_versions

    with dg.instance_for_test() as instance:
        requests, cursor, skip = new_t1_versions(instance, None)
        assert requests == [] and cursor == "0" and skip
        instance.report_runless_asset_event(
            dg.AssetMaterialization("t1_pool", metadata={"pool_version": 1})
        )
        requests, _, skip = new_t1_versions(instance, cursor)
    assert [r.run_key for r in requests] == ["t1-v1"] and skip is None


def test_synthesis_and_audit_assets_share_one_slot_each(tmp_path, monkeypatch):
    """A second UI launch of synthesis or the audit waits for the first: the assets are in
    concurrency pools and the instance `dagster_home` writes limits each pool to 1."""
    from pipelines.defs.jobs import AUDIT_POOL, SYNTHESIS_POOL
    from pipelines.main_job import dagster_home

    graph = defs().resolve_asset_graph()
    pools = {k.to_user_string(): graph.get(k).pools for k in graph.get_all_asset_keys()}
    assert pools["synthesis_rounds"] == {SYNTHESIS_POOL}
    for name in ("audit_results", "rst_pool", "t1_pool"):
        assert pools[name] == {AUDIT_POOL}, name
    assert not pools["seed_corpus"]

    (tmp_path / "old").mkdir()  # an instance made before the pools is brought forward
    (tmp_path / "old" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for home in (tmp_path / "new", tmp_path / "old"):
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        dagster_home()
        with dg.DagsterInstance.get() as instance:
            assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
            assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert (tmp_path / "old" / "dagster.yaml").read_text().count("concurrency:") == 1


def test_train_campaign_without_a_prefect_server_fails_in_one_line(tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.defs.campaign import train_campaign
    from pipelines.services import free_port
    from tasks.corpus import load_seeds
    from warehouse import record_pool

    seeds = load_seeds()[:2]
    record_pool(tmp_path / "wh", "t1", seeds, tasks=seeds)
    forge = ForgeConfig(store=str(tmp_path / "wh"))

    def failure(config: dict) -> str:
        result = train_campaign.execute_in_process(
            run_config={"ops": {"campaign_flow_run": {"config": config}}},
            resources={"forge": forge},
            raise_on_error=False,
        )
        assert not result.success
        (event,) = [e for e in result.all_events if e.is_step_failure]
        return event.step_failure_data.error.message

    # Settings, not the environment: Prefect reads its environment once per process.
    dead = f"http://127.0.0.1:{free_port()}/api"
    with temporary_settings(updates={PREFECT_API_URL: dead}):
        assert "cannot reach Prefect at" in failure({})
        assert "start `t1 ui`" in failure({})
        assert "pool 't1' has no version 4" in failure({"pool_version": 4})
        assert "unknown pool 'nope'" in failure({"pool": "nope"})


def test_a_launchpad_run_of_train_campaign_is_tagged_with_the_pool_version(tmp_path):
    """Regression: runs launched from the UI carried no pool tags (only the sensor's did)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from pipelines.defs.campaign import train_campaign
    from pipelines.services import free_port
    from tasks.corpus import load_seeds
    from warehouse import record_pool

    seeds = load_seeds()[:2]
    record_pool(tmp_path / "wh", "t1", seeds, tasks=seeds)
    record_pool(tmp_path / "wh", "t1", seeds[:1])
    dead = f"http://127.0.0.1:{free_port()}/api"
    with dg.instance_for_test() as instance, temporary_settings(updates={PREFECT_API_URL: dead}):
        result = train_campaign.execute_in_process(
            resources={"forge": ForgeConfig(store=str(tmp_path / "wh"))},
            instance=instance,
            raise_on_error=False,
        )
        tags = instance.get_run_by_id(result.run_id).tags
    assert not result.success  # no Prefect server; the tags are set before it is asked
    assert (tags["pool"], tags["pool_version"]) == ("t1", "2")


def test_forge_config_has_one_source_per_default(monkeypatch):
    """Regression: the per-round budget was set in five places with three values, and
    `t1 demo` passed it through os.environ. Now a field's default is written once (or taken
    from the stage's config), and the environment overrides single fields."""
    from audit.pools import T1_FULL_SIZE
    from pipelines.defs.resources import LOCAL_ENV, forge_config_from_env
    from synthesis.rounds import SynthConfig

    for var in LOCAL_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("T1_ENV", raising=False)
    default = forge_config_from_env()
    assert default.model_dump() == ForgeConfig().model_dump()
    assert (default.campaign, default.t1_size) == (SynthConfig.campaign, T1_FULL_SIZE)
    monkeypatch.setenv("T1_DEMO_ROUNDS", "2")
    monkeypatch.setenv("T1_WAREHOUSE", "/tmp/elsewhere")
    monkeypatch.setenv("T1_DEMO_AUDIT_MUTANTS", "1")
    env = forge_config_from_env()
    assert (env.rounds, env.per_round, env.store) == (2, default.per_round, "/tmp/elsewhere")
    assert (env.audit_mutants, env.preflight_n) == (1, default.preflight_n)
    monkeypatch.setenv("T1_ENV", "configured")
    assert isinstance(forge_config_from_env().store, dg.EnvVar)
    monkeypatch.setenv("T1_ENV", "cloud")
    with pytest.raises(ValueError, match="T1_ENV must be 'local' or 'configured'"):
        forge_config_from_env()


@pytest.mark.torch  # reads the default campaign preset
def test_held_out_check_follows_lineage(t1_store):
    """Regression: three T1 tasks descended from the preset's held-out evaluation task and the
    check passed, comparing exact hashes only. A relative of a campaign evaluation task is a
    warning (the campaign leaves it out); of a TMax or benchmark task, an error."""
    from pipelines.defs.audit_assets import no_task_in_two_held_out_splits
    from tests.pipelines.campaign_store import child_of
    from warehouse import record_pool

    store, train, child = t1_store
    forge = ForgeConfig(store=str(store))
    warn = no_task_in_two_held_out_splits(forge=forge)
    assert not warn.passed and warn.severity == dg.AssetCheckSeverity.WARN
    assert warn.metadata["related_to_campaign_eval_tasks"].value == 1
    grandchild = child_of(child)  # a benchmark task descended from a t1 task
    record_pool(store, "benchmark", [grandchild], tasks=[grandchild])
    error = no_task_in_two_held_out_splits(forge=forge)
    assert not error.passed and error.severity == dg.AssetCheckSeverity.ERROR
    assert error.metadata["related_to_tmax_or_benchmark"].value == 1
    record_pool(store, "t1", train)  # t1 v2: only the unrelated tasks
    record_pool(store, "benchmark", [train[0]])  # ... but one is itself held out
    assert (
        no_task_in_two_held_out_splits(forge=forge).metadata["related_to_tmax_or_benchmark"].value
        == 1
    )
