"""Evidence that does not depend on how a defect is spelled (issue 33, the independent set's
three misses): an answer carried into the solution in any encoding (the traced solution
never opened the inputs the verifier's expectation follows), an expected-answer file that
shares the output's name (a mention of `/app/unique.txt` does not declare
`/app/data/.expected/unique.txt` an input), and a sleep as synchronization in a Python
verifier (suspected statically, confirmed by a run whose sleeps are a tenth as long under a
CPU quota). Pure pieces here; the trials are in test_independent_forms.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from audit.perturbation import shortcut_findings
from audit.static_checks import declared_inputs, names_base, python_races
from audit.trials import host_sleep_shim
from audit.verdict import Code
from tasks.model import EnvironmentSpec
from tests.factories import make_task

BASE = {"/app/levels.txt": "h1"}
SAME = {"delete": {"/app/levels.txt": "h1"}, "shift-digits": {"/app/levels.txt": "h1"}}
TEXTS = {"/app/levels.txt": "ERROR 25\nINFO 58\nWARN 37\n"}
DECODE = "echo 'RVJST1IgMjUKSU5GTyA1OApXQVJOIDM3Cg==' | base64 -d > /app/levels.txt"
INPUTS = {"/app/events.log": "WARN a\nINFO b\n"}


def _codes(**kw) -> set[Code]:
    args = (BASE, SAME, TEXTS, DECODE, "Count levels.", INPUTS, [], True)
    return {f.code for f in shortcut_findings(*args, **kw)}


def test_an_answer_carried_in_unread_inputs_is_a_shortcut_whatever_its_encoding():
    # before: nothing spelled (base64), nothing cached, nothing to delete: no shortcut
    assert Code.SOLUTION_SHORTCUT not in _codes()
    assert Code.SOLUTION_SHORTCUT in _codes(input_reads=set())
    # the same unchanged output from a solution that did open the input is not called one
    assert Code.SOLUTION_SHORTCUT not in _codes(input_reads={"/app/events.log"})
    # nor when the verifier's expectation does not follow the inputs
    args = (BASE, SAME, TEXTS, DECODE, "Count levels.", INPUTS, [], False)
    assert Code.SOLUTION_SHORTCUT not in {
        f.code for f in shortcut_findings(*args, input_reads=set())
    }


def test_a_name_that_ends_another_absolute_path_declares_no_input():
    instruction = "Write the count to `/app/unique.txt`."
    assert not names_base("unique.txt", "/app/data/.expected/unique.txt", instruction)
    assert names_base("unique.txt", "/app/unique.txt", instruction)
    assert names_base("sales.csv", "/app/data/sales.csv", "Read sales.csv.")
    assert names_base("sales.csv", "/app/data/sales.csv", "Read ./data/sales.csv.")
    env = EnvironmentSpec(
        files={
            "app/access.log": b"10.0.0.1 GET /\n",
            "app/data/.expected/unique.txt": b"41\n",
        },
        workdir="/app",
    )
    task = make_task(environment=env).model_copy(
        update={"instruction": "Count the clients of `/app/access.log` into `/app/unique.txt`."}
    )
    assert declared_inputs(task) == {"app/access.log"}


SERVER = """
import subprocess, time, urllib.request
def test_served():
    server = subprocess.Popen(["python3", "-m", "http.server", "8731"])
    try:
        time.sleep(2.5)
        body = urllib.request.urlopen("http://127.0.0.1:8731/x").read()
    finally:
        server.kill()
"""
POLLS = """
import subprocess, time, socket
def test_served():
    server = subprocess.Popen(["srv"])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", 8731)).close()
            break
        except OSError:
            time.sleep(0.1)
    time.sleep(0.2)
    server.kill()
"""
WAITS = """
import subprocess, time
def test_done():
    p = subprocess.Popen(["true"])
    p.wait()
    time.sleep(0.3)
"""
SHELL_JOB = """
import subprocess, time
def test_daemon():
    subprocess.run("nohup /app/daemon.sh > /dev/null &", shell=True)
    time.sleep(1)
"""


@pytest.mark.parametrize(
    ("source", "flagged"), [(SERVER, True), (POLLS, False), (WAITS, False), (SHELL_JOB, True)]
)
def test_a_sleep_instead_of_a_wait_is_a_suspected_race(source, flagged):
    found = python_races("tests/test_outputs.py", source)
    assert bool(found) == flagged, found
    if flagged:
        assert "sleep as synchronization" in found[0][1]


def test_the_sleeps_library_shortens_sleeps_and_leaves_the_clock(tmp_path):
    lib = host_sleep_shim()
    if lib is None:
        pytest.skip("no C compiler on this host")
    (tmp_path / "lib.so").write_bytes(lib)
    env = {**os.environ, "LD_PRELOAD": str(tmp_path / "lib.so")}
    code = (
        "import time; w, m = time.time(), time.monotonic(); time.sleep(2); "
        "print(round(time.time() - w, 2), round(time.monotonic() - m, 2))"
    )
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall, mono = map(float, r.stdout.split())
    assert r.stderr == "" and wall < 1.0 and mono < 1.0  # a tenth of 2 s, not 2 s
    shell = subprocess.run(["bash", "-c", "sleep 3; echo done"], env=env, capture_output=True)
    assert shell.stdout == b"done\n" and time.monotonic() - t0 < 2.5
