"""Pure parts of the docker backend: reading FROM lines, adding the build-time CA to a
Dockerfile, the egress routes for each network policy, the no-engine path, and an archive
upload sent again."""

from __future__ import annotations

import json
import re

import pytest

from sandbox.base import NetworkMode, NetworkPolicy
from sandbox.build import verifier_toolchain_script
from sandbox.docker_build import (
    _instructions,
    dockerfile_bases,
    verifier_dockerfile,
    with_build_ca,
)
from sandbox.egress import route_commands
from sandbox.network import REFUSED_NETWORKS

MOUNT = "--mount=type=secret,id=t1-ca,target=/run/secrets/t1-ca.crt,mode=0444"


def test_bases_follow_global_args_skip_stages_and_scratch():
    text = (
        "# syntax comment\nARG BASE=ubuntu:24.04\nARG PY\n"
        "FROM ${BASE} AS build\nRUN make\n"
        "from build\n"
        "FROM scratch\n"
        "FROM --platform=linux/amd64 python:3.11-slim as py\n"
        "FROM \\\n  debian:12\n"
        "FROM $BASE\n"
    )
    assert dockerfile_bases(text) == ["ubuntu:24.04", "python:3.11-slim", "debian:12"]


def test_build_ca_mounts_on_every_run_and_args_after_every_from():
    text = (
        "FROM debian:bookworm-slim AS a\n"
        "# RUN in a comment\n"
        "RUN apt-get update && \\\n"
        "    run-parts /etc/x\n"
        'run ["echo", "exec form"]\n'
        "RUN --mount=type=cache,target=/root/.cache pip install x\n"
        "FROM \\\n  a\n"
        "ENV RUN=1\n"
        "COPY run.sh /run.sh\n"
        "RUN true\n"
    )
    out = with_build_ca(text)
    lines = out.split("\n")
    runs = [line for line in lines if re.match(r"(?i)\s*run\s", line)]
    assert len(runs) == 4 and all(MOUNT in r for r in runs)
    assert "    run-parts /etc/x" in lines and "# RUN in a comment" in lines
    assert "ENV RUN=1" in lines and "COPY run.sh /run.sh" in lines
    assert "run --mount" in out and '["echo", "exec form"]' in out
    assert out.count("ARG SSL_CERT_FILE=/run/secrets/t1-ca.crt") == 2
    # ARGs come right after each (possibly continued) FROM
    assert lines[lines.index("  a") + 1].startswith("ARG ")
    assert len(_instructions(out)) == len(_instructions(text)) + 2 * 6


def test_routes_per_policy():
    host = ["192.0.2.2", "172.17.0.1"]
    assert route_commands(NetworkPolicy(), host, []) == []
    internet = route_commands(NetworkPolicy(NetworkMode.INTERNET), host, [])
    refusals = [["ip", "route", "add", "prohibit", n] for n in REFUSED_NETWORKS]
    assert internet == [
        ["ip", "route", "add", "prohibit", "192.0.2.2/32"],
        ["ip", "route", "add", "prohibit", "172.17.0.1/32"],
        *refusals,
    ]
    allow = route_commands(
        NetworkPolicy(NetworkMode.ALLOWLIST, ("a.example",)),
        host,
        ["203.0.113.5", "192.0.2.2", "169.254.169.254"],  # a name resolving to the metadata
    )
    n = len(internet)
    assert allow[:n] == internet
    assert allow[n : n + 2] == [
        ["ip", "route", "del", "default"],
        ["ip", "route", "add", "prohibit", "default"],
    ]
    # the NAT's DNS forwarder too (names are resolved on the host under an allowlist)
    assert allow[n + 2] == ["ip", "route", "add", "prohibit", "10.0.2.3/32"]
    assert allow[n + 3 :] == [
        ["ip", "route", "add", "203.0.113.5/32", "via", "10.0.2.2", "dev", "tap0"]
    ]


def test_no_engine_is_a_sandbox_error_not_a_crash(monkeypatch, tmp_path):
    from sandbox import run_trial
    from tasks.results import FailureMode
    from tests.factories import make_task

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    r = run_trial(make_task(), "oracle", backend="docker")
    assert r.failure_mode == FailureMode.SANDBOX_ERROR
    assert "no Docker daemon answers" in r.failure_detail
    assert not r.rewardable


def test_verifier_venv_layer_runs_the_builders_script_as_root_and_restores_the_user():
    # Bug pinned: the docker backend never built the verifier's venv (every converted
    # Terminal-Bench task was verifier_error there).
    packages = ["pytest==8.4.1", "requests==2.32.3"]
    text = verifier_dockerfile("t1-forge-env:abc", "app", packages)
    instrs = [instr for _, _, instr in _instructions(text)]
    assert instrs[:2] == ["FROM t1-forge-env:abc", "USER root"]
    assert instrs[-1] == "USER app"
    word, _, argv = instrs[2].partition(" ")
    assert word == "RUN" and json.loads(argv) == [
        "/bin/sh",
        "-c",
        verifier_toolchain_script(packages),
    ]
    assert "/usr/lib/t1-verifier/bin/pip install" in verifier_toolchain_script(packages)
    for root in ("", "root", "0"):
        assert "USER" not in verifier_dockerfile("img", root, packages).split("\n", 2)[2]
    with_ca = with_build_ca(text)  # Podman: the RUN gets the CA secret, exec form kept
    assert f"RUN {MOUNT} [" in with_ca


def test_an_archive_upload_that_breaks_is_sent_again_and_the_last_failure_raised():
    """Podman 4.3's archive API ends an upload in "broken pipe" now and then: the upload is
    sent again; one that never goes through raises its own error after the attempts."""
    from sandbox.docker import archive_retried

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("passing bulk input to subprocess: write |1: broken pipe")
        return "uploaded"

    assert archive_retried(flaky, pause_s=0) == "uploaded" and len(calls) == 3

    def broken() -> None:
        calls.append(1)
        raise OSError(f"attempt {len(calls)}")

    calls.clear()
    with pytest.raises(OSError, match="attempt 3"):
        archive_retried(broken, pause_s=0)
    assert len(calls) == 3
