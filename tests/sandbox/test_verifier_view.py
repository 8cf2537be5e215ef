"""The verifier's view: what it sees of the agent's work, the task's opt-ins, and the
tampering rule on paths (pure) and in real trials."""

from __future__ import annotations

import pytest

from sandbox import CommandAgent, run_trial
from sandbox.tamper import Change, ChangeKind, tampered_paths
from tasks.model import Healthcheck, PhaseConfig
from tasks.results import FailureMode
from tests.sandbox.images import pytest_task, tools_task

# Paths an agent doing honest work adds (absolute), and paths that target the verifier.
HONEST = [
    "/app/main.py",
    "/app/tests/conftest.py",  # the agent's own project tests
    "/app/test.py",
    "/usr/local/bin/mytool",
    "/usr/local/bin/python3.12",  # a new interpreter the image never had (built from source)
    "/usr/local/lib/python3.11/dist-packages/requests/__init__.py",
    "/usr/lib/python3/dist-packages/numpy/__init__.py",
    "/etc/nginx/nginx.conf",
    "/etc/crontab",
    "/root/.bashrc",
    "/opt/app/pyproject.toml",
    "/home/user/setup.cfg",
    "/var/www/index.html",
    "/usr/bin/jq",
    "/tests",  # the verifier's mountpoint, created empty
]
TARGETING = [
    "/tests/conftest.py",
    "/logs/verifier/ctrf.json",
    "/conftest.py",
    "/pytest.ini",
    "/pyproject.toml",
    "/etc/ld.so.preload",
    "/etc/python3.11/sitecustomize.py",
    "/etc/alternatives/python3",
    "/usr/local/bin/pytest",  # the image has pytest on PATH: an added one shadows it
    "/usr/local/bin/python3",
    "/usr/bin/python3.11",
    "/usr/local/sbin/env",
    "/usr/local/lib/python3.11/dist-packages/evil.pth",
    "/usr/local/lib/python3.11/dist-packages/_pytest/main.py",
    "/usr/lib/python3/dist-packages/pluggy/_hooks.py",
    "/root/.local/lib/python3.11/site-packages/sitecustomize.py",
    "/usr/lib/python3.11/json/__init__.py",
    "/app/pytest.py",
    "/app/_pytest/__init__.py",
]
IMAGE_COMMANDS = frozenset({"bash", "sh", "env", "python3", "python3.11", "pytest", "pip3"})


def _hits(path: str, kind: ChangeKind = ChangeKind.ADDED) -> tuple[str, ...]:
    return tampered_paths([Change(path, kind)], image_commands=IMAGE_COMMANDS, workdir="/app")


@pytest.mark.parametrize("path", HONEST)
def test_honest_paths_are_not_tampering(path):
    assert _hits(path) == ()


@pytest.mark.parametrize("path", TARGETING)
def test_paths_that_target_the_verifier_are_tampering(path):
    assert _hits(path) == (path,)


def test_replacing_or_deleting_a_command_the_image_has_is_tampering():
    assert _hits("/usr/bin/bash", ChangeKind.MODIFIED) == ("/usr/bin/bash",)
    assert _hits("/usr/bin/python3", ChangeKind.DELETED) == ("/usr/bin/python3",)
    assert _hits("/usr/local/bin/uv") == ()  # uv was never on the image's PATH


@pytest.mark.sandbox
def test_installed_packages_are_visible_only_in_trusted_paths():
    install = "mkdir -p /usr/local/share/t1 && echo ok > /usr/local/share/t1/flag"
    check = (
        b"#!/bin/bash\n[ -f /usr/local/share/t1/flag ] && r=1 || r=0\n"
        b"echo $r > /logs/verifier/reward.txt\n"
    )
    task = tools_task("trusted", verifier={"test.sh": check})
    assert not run_trial(task, CommandAgent(install)).resolved  # /usr is the image's
    trusted = task.model_copy(update={"trusted_paths": ["/usr/local"]})
    assert run_trial(trusted, CommandAgent(install)).resolved


@pytest.mark.sandbox
def test_kept_processes_serve_the_verifier():
    serve = "cd /tmp && echo hi > index.html && (python3 -m http.server 8088 >/dev/null 2>&1 &)"
    check = (
        b"#!/bin/bash\n"  # a server still starting (a loaded machine) is waited for, 15 s at most
        b"for i in $(seq 150); do curl -s -o /dev/null http://127.0.0.1:8088/ && break;"
        b" sleep 0.1; done\n"
        b'[ "$(curl -s http://127.0.0.1:8088/index.html)" = hi ] && r=1 || r=0\n'
        b"echo $r > /logs/verifier/reward.txt\n"
    )
    task = tools_task("server", verifier={"test.sh": check})
    assert not run_trial(task, CommandAgent(serve)).resolved  # killed before the verifier
    kept = task.model_copy(update={"keep_agent_processes": True})
    assert run_trial(kept, CommandAgent(serve)).resolved


@pytest.mark.sandbox
def test_verifier_env_user_and_network_are_its_own():
    check = (
        b"#!/bin/bash\n"
        b'[ "$MODE" = strict ] && [ "$(id -un)" = nobody ] && r=1 || r=0\n'
        b"echo $r > /logs/verifier/reward.txt\n"
    )
    task = tools_task("phases", verifier={"test.sh": check})
    task = task.model_copy(
        update={"verifier_config": PhaseConfig(user="nobody", env={"MODE": "strict"})}
    )
    # the report directory is the verifier's: a non-root verifier must be able to write it
    r = run_trial(task, CommandAgent("export MODE=lax"))
    assert r.resolved, (r.failure_mode, r.failure_detail, r.verifier_output)


@pytest.mark.sandbox
def test_healthcheck_gates_the_agent_phase():
    good = tools_task("healthy")
    good = good.model_copy(
        update={
            "environment": good.environment.model_copy(
                update={"healthcheck": Healthcheck(command="test -d /app", retries=0)}
            )
        }
    )
    assert run_trial(good, "oracle").resolved
    bad = good.model_copy(
        update={
            "environment": good.environment.model_copy(
                update={
                    "healthcheck": Healthcheck(command="test -f /nope", retries=1, interval_sec=0.1)
                }
            )
        }
    )
    r = run_trial(bad, "oracle")
    assert r.failure_mode == FailureMode.ENVIRONMENT_ERROR and not r.rewardable
    assert "healthcheck" in r.failure_detail


@pytest.mark.sandbox
def test_tampering_is_recorded_even_when_the_work_is_done():
    r = run_trial(pytest_task(), CommandAgent("echo ok > /app/done; echo x > /pytest.ini"))
    assert r.report.passed == 2  # the work was done and the verifier saw it
    assert r.failure_mode == FailureMode.TAMPERED and r.passed == 0  # but no reward
