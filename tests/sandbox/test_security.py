"""Adversarial agents against the local sandbox: each attack is contained, the host is
unchanged, the trial ends within its limits with the right failure mode, and the next trial
still works."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sandbox import CommandAgent, get_backend, run_trial
from sandbox.cgroups import stale_groups
from tasks.model import Limits
from tasks.results import FailureMode
from tests.factories import make_task

pytestmark = pytest.mark.sandbox

SECRET_IN_TESTS = "verifier-secret-7d1f0c"
SECRET_IN_SOLUTION = "solution-secret-93ab2e"


def secret_task():
    return make_task(
        "secret",
        solve=f"# {SECRET_IN_SOLUTION}\ntouch /app/done\n",
        extra_tests={"notes.txt": SECRET_IN_TESTS.encode()},
    )


def agent_output(task, command: str) -> str:
    sb = get_backend("local").open(task)
    try:
        r = sb.exec(command, timeout_s=60)
        return r.stdout + r.stderr
    finally:
        sb.stop()


def test_agent_cannot_find_verifier_or_solution_anywhere():
    # Both secrets also exist on the host inside this repository's files (this test file).
    out = agent_output(
        secret_task(),
        "grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
        f"-e {SECRET_IN_TESTS} -e {SECRET_IN_SOLUTION} / 2>/dev/null; ls /tests /solution; true",
    )
    assert SECRET_IN_TESTS not in out and SECRET_IN_SOLUTION not in out
    assert "No such file or directory" in out  # neither /tests nor /solution exists


def test_host_secrets_and_other_dirs_are_hidden():
    shadow = agent_output(make_task(), "cat /etc/shadow /etc/gshadow 2>&1")
    assert "No such file or directory" in shadow and "root:" not in shadow
    out = agent_output(
        make_task(), f"ls -A /root /home /work /var/cache {os.getcwd()} 2>&1; echo END"
    )
    assert "END" in out
    listed = out.split("END")[0]
    assert ".venv" not in listed and "pyproject.toml" not in listed


def test_masks_cannot_be_unmounted_and_nothing_mounted():
    out = agent_output(make_task(), "umount /etc; mount -t tmpfs x /mnt; echo rc=$?")
    assert "rc=0" not in out


def test_network_is_off(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        out = agent_output(
            make_task(),
            f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/; echo;"
            "getent hosts pypi.org || echo no-dns",
        )
    finally:
        server.shutdown()
    assert "200" not in out
    assert "no-dns" in out


def test_writes_stay_inside_the_sandbox():
    marker = f"t1-escape-{os.getpid()}"
    cmd = (
        f"echo x > /etc/{marker}; echo x > /usr/local/bin/{marker}; echo x > /tmp/{marker};"
        f"mkdir -p /var/lib/{marker}; echo x > /{marker}; ln -s /etc /tests"
    )
    r = run_trial(make_task(), CommandAgent(cmd))
    for p in (
        f"/etc/{marker}",
        f"/usr/local/bin/{marker}",
        f"/tmp/{marker}",
        f"/var/lib/{marker}",
        f"/{marker}",
        "/etc/test.sh",
        "/etc/expect",
    ):
        assert not os.path.lexists(p), f"sandbox wrote {p} on the host"
    assert r.failure_mode == FailureMode.NONE


def test_fork_bomb_is_contained():
    limits = Limits(agent_timeout_s=5, verifier_timeout_s=20, memory_mb=256, pids=64)
    t0 = time.monotonic()
    r = run_trial(make_task(limits=limits), CommandAgent(":(){ :|:& };:; sleep 30"))
    assert time.monotonic() - t0 < 30
    assert r.failure_mode == FailureMode.AGENT_TIMEOUT
    assert r.total == 1  # the verifier still ran afterwards


def test_memory_exhaustion_is_out_of_memory():
    limits = Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=96, pids=64)
    hog = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"
    r = run_trial(make_task(limits=limits), CommandAgent(hog))
    assert r.failure_mode == FailureMode.OUT_OF_MEMORY
    assert r.agent_exit_code != 0


def test_filling_the_disk_hits_the_disk_limit():
    limits = Limits(agent_timeout_s=30, verifier_timeout_s=20, memory_mb=512, disk_mb=32)
    sb = get_backend("local").open(make_task(limits=limits))
    try:
        r = sb.exec("dd if=/dev/zero of=/app/big bs=1M count=200 2>&1; du -sm /app/big")
        assert "No space left on device" in r.stdout
        assert int(r.stdout.split()[-2]) <= 32
    finally:
        sb.stop()


def test_timeout_is_enforced_on_wall_clock():
    limits = Limits(agent_timeout_s=2, verifier_timeout_s=20)
    t0 = time.monotonic()
    r = run_trial(make_task(limits=limits), CommandAgent("sleep 1000"))
    assert time.monotonic() - t0 < 10
    assert r.failure_mode == FailureMode.AGENT_TIMEOUT


def test_output_limit():
    limits = Limits(agent_timeout_s=20, verifier_timeout_s=20, output_bytes=10_000)
    r = run_trial(make_task(limits=limits), CommandAgent("yes"))
    assert r.failure_mode == FailureMode.OUTPUT_LIMIT


def _host_processes(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def test_background_processes_do_not_outlive_the_trial():
    cmd = "(sleep 4242 &); nohup sleep 4243 >/dev/null 2>&1 & setsid sleep 4244 & disown; true"
    r = run_trial(make_task(), CommandAgent(cmd))
    assert r.failure_mode == FailureMode.NONE
    time.sleep(0.2)
    assert _host_processes("sleep 424[234]") == []
    # Nor across commands of one sandbox, and its cgroups are removed when it stops.
    sb = get_backend("local").open(make_task())
    try:
        sb.exec("setsid sleep 4245 & disown; true")
        assert sb.exec("pgrep -a sleep || echo none").stdout.strip() == "none"
        assert sb.id in stale_groups()
    finally:
        sb.stop()
    assert sb.id not in stale_groups()
    assert _host_processes("sleep 4245") == []


def test_next_trial_works_after_attacks():
    r = run_trial(make_task(), "oracle")
    assert r.failure_mode == FailureMode.NONE
    assert r.resolved


def test_hidden_paths_cover_project_and_state():
    from sandbox.local import PROJECT_ROOT, STATE_DIR, hidden_paths

    hidden = hidden_paths()
    for p in (PROJECT_ROOT, STATE_DIR, Path.home()):
        rel = str(p.resolve()).lstrip("/")
        assert any(rel == h or rel.startswith(h + "/") for h in hidden), p
