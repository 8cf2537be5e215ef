"""A stock Harbor task whose answer is not in its working directory (the public corpus puts
results under /solution, /tmp, /var/log): the judge carries what a task's outputs name, and a
stock task names none, so before, an honest agent's answer never reached the verifier (6 of
14 public tasks' oracles failed; docs/audit.md, "Public tasks in full trial mode"). The
import names the paths its tests spell (`tasks.harbor.named_outputs`), never the system's
programs. A file the build copies in is one of them when the tests name it: the agent's task
may be to fix it or consume it (about one public task in ten names such a file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox import run_trial
from tasks.corpus import import_dir
from tasks.harbor import named_outputs
from tasks.results import FailureMode

BASE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "audit-independent" / "clean--word-frequency"
)
TESTS = """from collections import Counter
from pathlib import Path
import subprocess

def test_top3():
    subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
    c = Counter(Path("/app/poem.txt").read_text().split())
    want = [f"{w} {n}" for w, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    assert Path("/solution/top3.txt").read_text().splitlines() == want
"""


def test_the_paths_the_tests_name_are_a_stock_tasks_outputs():
    verifier = {"test_outputs.py": TESTS.encode(), "test.sh": b"cd /etc && pytest\n"}
    env = {"Dockerfile": b"FROM x\nWORKDIR /app\nCOPY data/in.txt /data/in.txt\n",
           "data/in.txt": b"1\n"}  # fmt: skip
    extra = b'open("/data/in.txt"); open("/var/log/app/report.json"); open("/etc")'
    verifier["helper.py"] = extra
    assert env["data/in.txt"]  # the build copies it in: named, it is carried all the same
    assert named_outputs(verifier, "/app") == [
        "/app", "/data/in.txt", "/var/log/app/report.json", "/solution/top3.txt"
    ]  # fmt: skip


@pytest.mark.sandbox
def test_a_stock_tasks_answer_outside_its_workdir_reaches_the_verifier(tmp_path):
    d = tmp_path / "stock-answer"
    shutil.copytree(BASE, d)
    (d / "tests" / "test_outputs.py").write_text(TESTS)
    solve = (d / "solution" / "solve.sh").read_text().replace("/app/top3.txt", "/solution/top3.txt")
    (d / "solution" / "solve.sh").write_text("mkdir -p /solution\n" + solve)
    task = import_dir(tmp_path)[0][0]
    assert task.outputs == ["/app", "/solution/top3.txt"]
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.NONE and r.passed == r.total == 1, r.failure_detail
    assert run_trial(task, "nop").passed == 0


FIX_AND_CONSUME_TESTS = """from pathlib import Path

def test_the_playbook_was_fixed():
    assert "serial: 1" in Path("/opt/deploy/site.yml").read_text()

def test_every_message_was_consumed():
    assert not list(Path("/var/queue/messages").iterdir())
    assert Path("/app/processed.txt").read_text().split() == ["m1", "m2"]
"""
FIX_AND_CONSUME_SOLVE = """#!/bin/bash
echo "serial: 1" >> /opt/deploy/site.yml
for m in /var/queue/messages/*; do basename "$m" .json >> /app/processed.txt; rm "$m"; done
"""


def test_files_the_build_copied_reach_the_verifier_as_the_agent_left_them(tmp_path, backend):
    """A stock task whose agent must fix a file the build copied outside the working
    directory and consume others: before, the judge kept the image's copies of both (an
    honest agent failed both tests, on both backends)."""
    d = tmp_path / "fix-and-consume"
    shutil.copytree(BASE, d)
    (d / "tests" / "test_outputs.py").write_text(FIX_AND_CONSUME_TESTS)
    (d / "solution" / "solve.sh").write_text(FIX_AND_CONSUME_SOLVE)
    env = d / "environment"
    (env / "site.yml").write_text("hosts: web\n")
    (env / "m1.json").write_text("{}\n")
    (env / "m2.json").write_text("{}\n")
    dockerfile = (env / "Dockerfile").read_text()
    (env / "Dockerfile").write_text(
        dockerfile + "COPY site.yml /opt/deploy/site.yml\n"
        "COPY m1.json m2.json /var/queue/messages/\n"
    )
    task = import_dir(tmp_path)[0][0]
    assert task.outputs == ["/app", "/opt/deploy/site.yml", "/var/queue/messages"]
    r = run_trial(task, "oracle", backend)
    assert r.failure_mode == FailureMode.NONE and r.passed == r.total == 2, (
        r.failure_detail,
        r.verifier_output[-800:],
    )
    assert run_trial(task, "nop", backend).passed == 0
