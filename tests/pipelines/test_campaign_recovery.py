"""After a kill, Prefect, Dagster and the warehouse agree on a campaign run; the deployment's
form shows the user's parameters; waiting runs are named after theirs.

Regressions (issue 36): after the Prefect server was killed and restarted, the dead flow run
stayed `Running` and held the deployment's only concurrency slot (new runs waited with no
reason shown) while Dagster said Failure and the warehouse said failed (or started, after a
SIGKILL); queued runs showed a random name and no pool or steps; the Prefect form listed 14
parameters, 8 of them plumbing."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from uuid import uuid4

import pytest

from pipelines.campaign_recovery import (
    FLOW_RUN_TAG,
    orphaned,
    process_label,
    resume_command,
    run_process_alive,
)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_runs_process_is_told_alive_gone_or_unknown():
    now = datetime.now(UTC)
    assert run_process_alive(process_label(), now) is True
    assert run_process_alive(f"{process_label().rpartition(':')[0]}:{dead_pid()}", now) is False
    # a pid that now belongs to a process started after the run: not the run's
    assert run_process_alive(process_label(), now - timedelta(days=3650)) is False
    assert run_process_alive(f"elsewhere:{os.getpid()}", now) is None
    assert run_process_alive(None, now) is None


def flow_run(state: str, pid: str | None, deployment: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        state=SimpleNamespace(
            type=SimpleNamespace(value=state), timestamp=datetime.now(UTC) - timedelta(seconds=1)
        ),
        start_time=datetime.now(UTC), created=datetime.now(UTC), infrastructure_pid=pid,
        deployment_id=uuid4() if deployment else None,
    )  # fmt: skip


def test_the_resume_command_adds_only_what_the_run_directory_cannot_tell(monkeypatch):
    """`--resume RUN_DIR` reads the run's settings from its config.json (preset settings,
    steps, pool and version, store, cluster): the command needs only the store a run left to
    its process's default. History (the walk of issue 36): the command was `--resume RUN_DIR`
    alone while `--resume` took the rest from the command line's defaults (a run checkpointed
    past step 2 then 'completed' with no step run); then it spelled out every launch option."""
    params = {"pool": "t1", "pool_version": 1, "preset": "/tmp/my preset.toml", "steps": 12}
    params |= {"eval_every": None, "store": "/w/wh", "dagster_url": "http://x", "runs_dir": None}
    assert resume_command("runs/p-1", params) == "t1 train --resume runs/p-1"
    assert resume_command("runs/x y", {**params, "store": None}, "/srv/wh") == (
        "t1 train --resume 'runs/x y' --store /srv/wh"
    )
    monkeypatch.setenv("T1_WAREHOUSE", "/env/wh")  # the process's default store
    assert resume_command("runs/tiny-cpu-x", {"preset": "tiny-cpu"}) == (
        "t1 train --resume runs/tiny-cpu-x --store /env/wh"
    )


def test_which_runs_are_orphaned():
    host = process_label().rpartition(":")[0]
    gone = f"{host}:{dead_pid()}"
    now = datetime.now(UTC)
    assert orphaned(flow_run("RUNNING", gone), runner_started=None) == (
        f"its process ({gone}) is gone"
    )
    assert orphaned(flow_run("RUNNING", process_label()), runner_started=now) is None
    assert orphaned(flow_run("COMPLETED", gone), runner_started=now) is None
    # never labelled (it died starting): only a restarted runner knows it cannot be running,
    # and only for a run older than itself (one it just picked up has no pid yet either)
    assert orphaned(flow_run("PENDING", None), runner_started=None) is None
    assert "runner stopped" in (orphaned(flow_run("PENDING", None), runner_started=now) or "")
    young = now - timedelta(seconds=5)
    assert orphaned(flow_run("PENDING", None), runner_started=young) is None
    assert orphaned(flow_run("RUNNING", None, deployment=False), runner_started=now) is None


def test_the_prefect_form_shows_the_users_parameters_only():
    from prefect.utilities.schema_tools import validate

    from pipelines.campaign_deployment import CampaignRequest
    from pipelines.serve_campaign import campaign_deployment, plumbing_parameters

    deployment = campaign_deployment("http://127.0.0.1:3000")
    schema = deployment._parameter_openapi_schema.model_dump(exclude_none=True)
    assert sorted(schema["properties"]) == sorted(CampaignRequest.model_fields)
    assert len(plumbing_parameters()) == 8 and "store" in plumbing_parameters()
    # what Dagster passes besides the user's choices is still accepted by the server
    validate(
        {"steps": 2, "store": "/wh", "dagster_run_id": "abc", "report_evaluations": False},
        schema,
        raise_on_error=True,
    )
    assert deployment.concurrency_limit == 1
    assert deployment.parameters == {"dagster_url": "http://127.0.0.1:3000"}


@pytest.mark.orchestration
@pytest.mark.slow
def test_a_run_left_running_by_a_kill_is_crashed_its_slot_freed_and_all_three_agree(
    tmp_path, prefect_harness
):
    """A flow run of the deployment holds its one slot and its process is gone (a SIGKILL
    left the warehouse row `started`, the Dagster follower STARTED): the keeper crashes it,
    the slot is free, the warehouse row ends failed, and `t1 ui` fails the follower. A run
    waiting for the slot is named after its parameters and the preset's steps."""
    import dagster as dg
    from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentCreate
    from prefect.states import Pending, Running, Scheduled

    from pipelines.campaign_deployment import name_queued_runs
    from pipelines.campaign_recovery import fail_orphaned_followers, reconcile_campaign_runs
    from pipelines.flows import ppo_campaign
    from warehouse import CampaignRecord, CampaignStatus, record_campaign
    from warehouse.snapshot import Snapshot

    store = tmp_path / "wh"
    host = process_label().rpartition(":")[0]
    said: list[str] = []
    with get_client(sync_client=True) as c:
        flow_id = c.create_flow(ppo_campaign)
        deployment_id = c.create_deployment(
            **DeploymentCreate(flow_id=flow_id, name="t1", concurrency_limit=1).model_dump(
                exclude_unset=True
            )
        )
        limit_id = c.read_deployment(deployment_id).global_concurrency_limit.id
        run = c.create_flow_run_from_deployment(deployment_id, parameters={"store": str(store)})
        c.set_flow_run_state(run.id, Pending())  # takes the deployment's one slot
        c.set_flow_run_state(run.id, Running())
        c.update_flow_run(
            run.id, tags=["campaign:tiny-cpu-x"], infrastructure_pid=f"{host}:{dead_pid()}"
        )
        waiting = c.create_flow_run_from_deployment(
            deployment_id, parameters={"preset": "tiny-cpu", "pool": "rst"}, state=Scheduled()
        )
        assert (
            c.read_global_concurrency_limit_by_name(f"deployment:{deployment_id}").active_slots == 1
        )
        started = datetime.now(UTC)
        record_campaign(store, CampaignRecord(
            run_id="tiny-cpu-x", started_at=started, status=CampaignStatus.STARTED, pool="t1",
            pool_version=1, preset="tiny-cpu", config_hash="h", steps=2,
            prefect_flow_run_id=str(run.id),
        ))  # fmt: skip

        crashed = reconcile_campaign_runs(c, runner_started=None, say=said.append)
        assert crashed == [str(run.id)]
        after = c.read_flow_run(run.id)
        assert after.state.name == "Crashed" and "is gone" in after.state.message
        assert "t1 train --resume runs/tiny-cpu-x" in after.state.message
        assert (
            c.read_global_concurrency_limit_by_name(f"deployment:{deployment_id}").active_slots == 0
        ), "the slot is free again"
        assert reconcile_campaign_runs(c, runner_started=None, say=said.append) == []

        assert name_queued_runs(c, lambda preset: 2) == ["tiny-cpu-rst-vlatest-2steps"]
        assert c.read_flow_run(waiting.id).name == "tiny-cpu-rst-vlatest-2steps"

        def final_state(flow_run_id: str) -> str | None:
            state = c.read_flow_run(flow_run_id).state
            return state.name if state.is_final() else None

        with dg.instance_for_test() as instance:
            follower = DagsterRun(job_name="train_campaign", run_id=str(uuid4()),
                                  status=DagsterRunStatus.STARTED,
                                  tags={FLOW_RUN_TAG: str(run.id)})  # fmt: skip
            instance.add_run(follower)
            assert fail_orphaned_followers(instance, final_state, say=said.append) == [
                follower.run_id
            ]
            assert instance.get_run_by_id(follower.run_id).status == DagsterRunStatus.FAILURE
        del limit_id
    with Snapshot.open(store) as snap:
        status, detail = snap.sql(
            "SELECT status, detail FROM campaign_runs WHERE run_id = 'tiny-cpu-x'"
        ).rows[0]
    assert status == "failed" and detail == after.state.message
    assert any("marked Crashed" in line and "ended as failed" in line for line in said), said


def test_t1_ui_restarts_a_prefect_server_that_died_and_nothing_else():
    """Regression (issue 36): killing the Prefect server killed `t1 ui`, the webserver, the
    daemon and the flow run in flight. `t1 ui` starts the Prefect server (and the
    deployment's runner) again, within a budget; another server that stops still stops
    everything, named. (That a flow run in flight survives the restart: docs/orchestration.md,
    "After a kill", measured with the settings `prefect_env` gives every server.)"""
    import signal

    from pipelines.services import Service, ServiceError, Services

    said: list[str] = []
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with Services({}) as servers:
        for name in ("prefect server", "dagster webserver"):
            servers.start(Service(name, sleeper))
        first = servers.procs["prefect server"].pid
        os.kill(first, signal.SIGKILL)
        servers.procs["prefect server"].wait()
        servers.supervise(("prefect server",), 1, said.append)
        assert servers.procs["prefect server"].pid != first
        assert servers.procs["prefect server"].poll() is None
        assert said == [
            "prefect server stopped (exit code -9); restarting it (1 of 1); a campaign in "
            "flight retries its calls meanwhile"
        ]
        os.kill(servers.procs["prefect server"].pid, signal.SIGKILL)
        servers.procs["prefect server"].wait()
        with pytest.raises(ServiceError, match="prefect server stopped"):  # past the budget
            servers.supervise(("prefect server",), 1, said.append)
        os.kill(servers.procs["dagster webserver"].pid, signal.SIGKILL)
        servers.procs["dagster webserver"].wait()
        with pytest.raises(ServiceError, match="dagster webserver stopped"):
            servers.supervise(("prefect server",), 5, said.append)


def test_every_server_t1_starts_keeps_leases_on_disk_and_retries_long_enough():
    from pathlib import Path

    from pipelines.services import prefect_env

    env = prefect_env("127.0.0.1", 4200, Path("/tmp/home"))
    assert env["PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE"].endswith("lease_storage.filesystem")
    waits = [2**n for n in range(1, int(env["PREFECT_CLIENT_MAX_RETRIES"]) + 1)]
    assert sum(waits) > 300  # the restart measured at load 33 took 102 s; Prefect's default: 62
