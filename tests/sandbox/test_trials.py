"""Trial phases and failure modes in the local sandbox, on real tasks."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import CommandAgent, run_trial
from tasks.corpus import load_task
from tasks.model import EnvironmentSpec, Limits
from tasks.results import FailureMode, ReportSource
from tests.factories import make_task

pytestmark = pytest.mark.sandbox
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_oracle_and_nop_on_a_junit_task():
    task = load_task(FIXTURES / "harbor" / "csv-report")
    oracle = run_trial(task, "oracle")
    assert oracle.failure_mode == FailureMode.NONE, oracle.failure_detail
    assert oracle.report.source == ReportSource.JUNIT and not oracle.report.authenticated
    assert (oracle.passed, oracle.total) == (3, 3)
    nop = run_trial(task, "nop")
    assert nop.total == 3 and nop.passed == 0 and not nop.resolved


def test_missing_required_tool_is_an_environment_error():
    task = make_task(environment=EnvironmentSpec(requires=["bash", "no-such-tool-xyz"]))
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR
    assert "no-such-tool-xyz" in r.failure_detail
    assert r.total == 0  # no assertion was run, so none "failed"


def test_failing_setup_step_is_an_environment_error():
    task = make_task("broken-setup", environment=EnvironmentSpec(setup=["echo oops >&2; exit 3"]))
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR
    assert "exited 3" in r.failure_detail and "oops" in r.failure_detail


def test_environment_is_built_once_and_shared():
    from sandbox.build import build_image
    from sandbox.local import LocalStepRunner

    env = EnvironmentSpec(
        setup=["cat /proc/sys/kernel/random/uuid > /app/build-id"],
        files={"app/data.txt": b"hello\n"},
    )
    expect = ("/app/build-id", "/app/data.txt", "/app/no-setup-dir")
    task = make_task("layered", environment=env, expect=expect)
    first = build_image(task, LocalStepRunner())
    again = build_image(task, LocalStepRunner())
    assert first.layers == again.layers  # the second build reused every layer
    ids = [p / "app/build-id" for p in first.layers if (p / "app/build-id").is_file()]
    assert len(ids) == 1
    build_id = ids[0].read_text()
    agent = CommandAgent("test -e /setup || touch /app/no-setup-dir; echo x >> /app/build-id")
    assert run_trial(task, agent).resolved and run_trial(task, agent).resolved
    assert ids[0].read_text() == build_id  # trials write above the layer, never into it


def test_writes_do_not_leak_between_trials():
    task = make_task("isolated", expect=("/app/mark",))
    first = run_trial(task, CommandAgent("touch /app/mark"))
    second = run_trial(task, "nop")
    assert first.resolved and not second.resolved


def test_verifier_timeout():
    task = make_task("slow-verifier", limits=Limits(agent_timeout_s=10, verifier_timeout_s=1))
    task = task.model_copy(update={"verifier": {"test.sh": b"#!/bin/bash\nsleep 30\n"}})
    t0 = time.monotonic()
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.VERIFIER_TIMEOUT
    assert time.monotonic() - t0 < 15


def test_garbage_verifier_output_is_parse_error():
    task = make_task("garbage")
    task = task.model_copy(
        update={
            "verifier": {"test.sh": b"#!/bin/bash\necho '{garbage' > /logs/verifier/ctrf.json\n"}
        }
    )
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.PARSE_ERROR
    assert "ctrf.json" in r.failure_detail


def test_binary_verifier():
    task = make_task("binary")
    task = task.model_copy(
        update={
            "verifier": {
                "test.sh": b"#!/bin/bash\n[ -f /app/done ] && echo 1 > "
                b"/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
            }
        }
    )
    r = run_trial(task, "oracle")
    assert r.report.binary and r.resolved and r.total == 1


def test_agent_that_raises_is_recorded():
    class Crashing:
        name = "crashing"

        def run(self, sandbox, task, deadline):
            raise RuntimeError("model server went away")

    r = run_trial(make_task(), Crashing())
    assert r.failure_mode == FailureMode.AGENT_ERROR
    assert "model server went away" in r.failure_detail
    assert r.total == 1  # the verifier still scored the untouched sandbox


def test_trials_run_concurrently():
    tasks = [
        make_task(f"conc-{i}", expect=(f"/app/f{i}",), solve=f"touch /app/f{i}\n") for i in range(6)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: run_trial(t, "oracle"), tasks))
    assert all(r.resolved for r in results), [r.failure_detail for r in results]
