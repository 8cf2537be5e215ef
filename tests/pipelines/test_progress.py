"""No silent stretch over half a minute: progress lines from long assets and flow steps, and a
server start that waits as long as the machine's load asks.

Regressions (issue 36): the audit asset logged nothing between STEP_START and its output
(215 s in the UI, 1,925 s in a loaded `make demo`); a campaign started from a UI on a fresh
checkout built the warm start in the flow run without a line; `t1 train` on a busy machine
ended in a 100-line traceback, "Timed out while attempting to connect to ephemeral Prefect API
server" (Prefect's own server gives up after 20 s; one took 26 s at load 11 on 2 cores)."""

from __future__ import annotations

import time

import dagster as dg
import pytest

from pipelines.progress import Heartbeat
from pipelines.services import START_TIMEOUT_ENV, ServiceError, fitted_timeout


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_per_phase_and_at_most_one_per_interval():
    lines: list[str] = []
    clock = Clock()
    beat = Heartbeat(lines.append, "audit", every_s=10, quiet_s=25, clock=clock)
    for done in range(1, 6):  # five trials within 8 s: the first and the last are said
        clock.now += 2
        beat.update("executable", done, 5)
    clock.now += 1
    beat.update("semantic", 1, 3)  # a new phase is said at once
    assert lines == [
        "audit: executable 1/5 (2 s)",
        "audit: executable 5/5 (10 s)",
        "audit: semantic 1/3 (11 s)",
    ]
    assert beat.due(clock.now + 24) is None
    assert beat.due(clock.now + 25) == "audit: still semantic 1/3 (36 s)"
    beat.heard("round 2: 1/6")  # a line the caller logged itself restarts the quiet time
    assert beat.due(clock.now + 24) is None


def test_the_heartbeat_thread_speaks_when_nothing_else_does():
    lines: list[str] = []
    with Heartbeat(lines.append, "warm start", quiet_s=0.2) as beat:
        beat.note("building")
        time.sleep(0.7)
    assert lines[0] == "warm start: building"
    assert any(line.startswith("warm start: still building (") for line in lines[1:]), lines


def test_the_audit_asset_logs_its_stages_and_trials(tmp_path, monkeypatch):
    """The asset hands the audit a progress callback and a log: its lines reach the run's
    log (the UI, and `t1 demo` through `user_log_lines`)."""
    from audit.selection import SelectionResult
    from pipelines.defs import audit_assets
    from pipelines.defs.resources import ForgeConfig

    def fake_selection(store, tasks, cfg, *, progress=None, log=None, **kw):
        assert progress is not None and log is not None, "the asset passed no progress"
        log("building base image debian:bookworm")
        for i in range(1, 4):
            progress("executable", i, 3)
        return SelectionResult(version="v-test")

    monkeypatch.setattr(audit_assets, "run_selection", fake_selection)
    monkeypatch.setattr(audit_assets, "audit_candidates", lambda store, pool: ([], "seeds"))
    seen: list[str] = []
    forge = ForgeConfig(store=str(tmp_path / "wh"))
    with dg.instance_for_test() as instance:
        res = dg.materialize(
            [audit_assets.audit_results],
            resources={"forge": forge},
            instance=instance,
            selection=[audit_assets.audit_results],
        )
        assert res.success
        seen = [e.user_message for e in instance.all_logs(res.run_id) if not e.dagster_event]
    assert any(m.startswith("auditing ") for m in seen), seen
    assert "audit: building base image debian:bookworm" in seen
    assert any(m.startswith("audit: executable 1/3") for m in seen)
    assert any(m.startswith("audit: executable 3/3") for m in seen)


def test_the_warm_start_inside_a_run_says_what_it_does(monkeypatch, tmp_path):
    from pipelines import campaign_plan
    from training import warm_start
    from training.campaign_config import load_campaign_config

    def fake_build(*, reuse_stale: bool, log: bool) -> object:
        print("sft step   50 loss 3.292 (513s)")  # what the real build prints per 50 steps
        return tmp_path / "policy"

    monkeypatch.setattr(warm_start, "warm_started_policy", fake_build)
    lines: list[str] = []
    cfg = load_campaign_config("tiny-cpu")
    campaign_plan.ensure_policy(cfg, lines.append)
    assert lines[0].startswith("the tiny policy's warm start: read from ")
    assert lines[1:] == ["sft step   50 loss 3.292 (513s)", f"warm start ready: {tmp_path}/policy"]
    lines.clear()
    campaign_plan.ensure_policy(cfg.model_copy(update={"policy_path": tmp_path}), lines.append)
    assert lines == []  # a given checkpoint: nothing to build


def test_a_server_start_waits_as_long_as_the_load_asks(monkeypatch):
    monkeypatch.delenv(START_TIMEOUT_ENV, raising=False)
    assert fitted_timeout(60, load=0.5, cores=2) == 60  # idle: the base
    assert fitted_timeout(60, load=11, cores=2) == 330  # the measured busy machine
    assert fitted_timeout(60, load=400, cores=2) == 900  # capped
    monkeypatch.setenv(START_TIMEOUT_ENV, "12.5")
    assert fitted_timeout(60, load=11, cores=2) == 12.5
    monkeypatch.setenv(START_TIMEOUT_ENV, "soon")
    with pytest.raises(ServiceError, match="T1_SERVER_START_TIMEOUT_S='soon' is not a number"):
        fitted_timeout()


@pytest.mark.orchestration
def test_a_prefect_server_too_slow_for_its_wait_is_one_line_naming_the_setting(
    tmp_path, monkeypatch
):
    """`t1 train`'s own server (pipelines.services.temporary_prefect_server): a wait made too
    short for it fails in one line that names the setting (`t1 train` prints it, exit 2), and
    the half-started server is stopped."""
    from pipelines.services import temporary_prefect_server

    monkeypatch.setenv(START_TIMEOUT_ENV, "0.5")
    log = tmp_path / "server.log"
    with pytest.raises(ServiceError) as e, temporary_prefect_server(tmp_path / "home", log):
        pass
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("prefect server did not answer http://127.0.0.1:")
    assert message.endswith("set T1_SERVER_START_TIMEOUT_S to wait longer")
    # the database lock is released with the server: a second start is not refused
    with pytest.raises(ServiceError), temporary_prefect_server(tmp_path / "home", log):
        pass


def test_t1_demo_shows_the_assets_lines_as_they_come():
    """`t1 demo` runs the graph headless with Dagster's console at WARNING: the assets'
    progress reached only the UI. `user_log_lines` passes each line an asset logs (not
    Dagster's own events) on while the run goes on."""
    from dagster._core.utils import make_new_run_id

    from pipelines.main_job import user_log_lines

    @dg.asset
    def slow_thing(context) -> None:  # unannotated: Dagster reads a string annotation as wrong
        for i in (1, 2):
            context.log.info(f"round {i}: 1/1")
            time.sleep(0.3)

    heard: list[str] = []
    with dg.instance_for_test() as instance:
        run_id = make_new_run_id()
        with user_log_lines(instance, run_id, heard.append, poll_s=0.1):
            job = dg.Definitions(
                assets=[slow_thing], jobs=[dg.define_asset_job("j")]
            ).resolve_job_def("j")
            assert job.execute_in_process(instance=instance, run_id=run_id).success
            during = list(heard)
    assert heard == ["slow_thing: round 1: 1/1", "slow_thing: round 2: 1/1"]
    assert during, "nothing was heard while the run went on"
