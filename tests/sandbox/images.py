"""Tasks for sandbox tests that need real tools (python3, pytest, curl, ps) in their image.

One Dockerfile for all of them, so the image is built once per machine and shared."""

from __future__ import annotations

from tasks.model import EnvironmentSpec, Limits
from tests.factories import make_task

TOOLS_DOCKERFILE = b"""FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest \\
    curl procps && rm -rf /var/lib/apt/lists/*
WORKDIR /app
"""

LIMITS = Limits(agent_timeout_s=30, verifier_timeout_s=30, memory_mb=512, pids=256, disk_mb=256)

# pytest verifier, Terminal-Bench style: the `-rA` summary on stdout and reward.txt.
PYTEST_TEST_SH = b"""#!/bin/bash
pytest -rA /tests/test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
PYTEST_TESTS = b"""from pathlib import Path


def test_done_exists():
    assert Path("/app/done").exists()


def test_done_says_ok():
    assert Path("/app/done").read_text().strip() == "ok"
"""


def tools_task(
    task_id: str = "tools",
    *,
    verifier: dict[str, bytes] | None = None,
    network: bool = False,
    limits: Limits | None = None,
    solve: str = "echo ok > /app/done\n",
):
    env = EnvironmentSpec(files={"Dockerfile": TOOLS_DOCKERFILE}, allow_network=network)
    task = make_task(task_id, environment=env, limits=limits or LIMITS, solve=solve)
    if verifier is not None:
        task = task.model_copy(update={"verifier": verifier})
    return task


def pytest_task(task_id: str = "pytest-verifier", **kw):
    verifier = {"test.sh": PYTEST_TEST_SH, "test_outputs.py": PYTEST_TESTS}
    return tools_task(task_id, verifier=verifier, **kw)


def dns_probe() -> str:
    """Shell: one DNS query straight to the NAT's forwarder (10.0.2.3), printing
    `dns=answered` or `dns=refused <error>`."""
    return (
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM);'
        " s.settimeout(3); q = bytes.fromhex('abcd01000001000000000000')"
        " + b'\\x04pypi\\x03org\\x00' + bytes.fromhex('00010001');"
        "\ntry:\n s.sendto(q, ('10.0.2.3', 53)); s.recv(512)"
        "\n print('dns=answered')\nexcept OSError as e: print('dns=refused', e)\""
    )


def verifier_spec_for(sb, task, command: str | None = None, **kw):
    """The VerifierSpec the judge would give `sb` for `task` (sandbox.judge.verifier_spec),
    with `command` in place of the task's entry and fields of `kw` replaced: for tests that
    call `Sandbox.verify` themselves."""
    import dataclasses

    from sandbox.judge import outputs_of, verifier_spec
    from sandbox.verdict_channel import open_channel

    spec = verifier_spec(task, open_channel(), sb.workdir, outputs_of(task))
    if command is not None:
        spec = dataclasses.replace(spec, command=command)
    return dataclasses.replace(spec, **kw)
