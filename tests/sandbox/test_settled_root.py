"""The judge's root holds still: a stock verifier that archives a directory of the agent's
outputs it has not read before sees the same directory before and after reading it.

On the local backend the judge's writable layer is written beside the overlay, not through it
(sandbox/carry.py), so a directory the image ships below an output path is a merge the kernel
has not yet looked up. Its first lookup stores the lower directory's origin on the upper one
and marks the parent impure (extended attributes: each write moves the directory's ctime), and
a later read may clear that mark again. A verifier that ran `tar` over such a directory saw
it change while it read it ("file changed as we read it", exit 1): the first archive of
`/app/data` failed, the second passed (a backup task of the third blind set met it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from sandbox import run_trial
from tasks.corpus import import_dir
from tasks.results import FailureMode

BASE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "audit-independent" / "clean--word-frequency"
)
TESTS = """import os
import subprocess

DIRS = ["/app/data", "/app/data/orders", "/app/data/orders/2024", "/app/out"]


def ctimes():
    return [os.stat(d).st_ctime_ns for d in DIRS]


def test_the_first_archive_of_the_data_succeeds():
    r = subprocess.run(["tar", "-C", "/app", "-czf", "/tmp/first.tgz", "data"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_reading_a_directory_leaves_its_ctime():
    before = ctimes()
    for d in DIRS:
        for base, dirs, files in os.walk(d):
            for name in dirs + files:
                os.lstat(os.path.join(base, name))
    assert ctimes() == before
"""
SOLVE = "#!/bin/bash\nmkdir -p /app/out/day && echo done > /app/out/day/status\n"


def test_a_verifiers_first_archive_of_an_image_directory_succeeds(tmp_path, backend):
    d = tmp_path / "archive-data"
    shutil.copytree(BASE, d)
    (d / "tests" / "test_outputs.py").write_text(TESTS)
    (d / "solution" / "solve.sh").write_text(SOLVE)
    data = d / "environment" / "app" / "data"
    (data / "orders" / "2024").mkdir(parents=True)
    (data / "site.json").write_text("{}\n")
    (data / "orders" / "2024" / "05.csv").write_text("id,total\n1,2\n")
    (data / "orders" / "2024" / "06.csv").write_text("id,total\n3,4\n")
    task = import_dir(tmp_path)[0][0]
    r = run_trial(task, "oracle", backend)
    assert r.failure_mode == FailureMode.NONE and r.total == 2, r.failure_detail
    assert r.passed == 2, [(a.name, a.message[-300:]) for a in r.assertions if not a.ok]
