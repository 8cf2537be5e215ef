"""A sleep as synchronization is put to the test by cutting it, not by shrinking every sleep.

Attack first: the judge confirmed a suspected sleep (a fixed sleep after starting a server
or a job, no wait between) by a run under a CPU quota of 0.1 with every sleep a tenth as
long: 100 times less slack. Whether that lost the race was the margin's and the machine's
call: the independent set's 2.5 s sleep for `python3 -m http.server` (50 ms here) was named
flaky on this machine and, once, not on CI's, and a verifier that gives a job far more time
than it needs, or waits for a job that itself sleeps (shrunk as much), was never named. Yet
the verdict rests on that sleep outlasting what it started, and what it started is the
agent's work: its speed is an unstated requirement the reference's margin says nothing of.
Now the suspected sleeps (their seconds read from the verifier) are cut to nothing, every
other sleep lasts what it asks (a poll keeps its pace), and every process the verifier
starts starts 0.3 s late: cut alone, the sleep yielded the CPU to a job of a few
milliseconds, which then won 1 run in 6 (measured, local). A verdict that changes rested on
the sleep, on any machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.static_checks import sleep_seconds, suspected_sleeps
from audit.trials import host_sleep_shim, sleep_cut_env
from audit.verdict import Code, Finding, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision
from tests.factories import make_task

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-independent"

PROGRAM = """import subprocess, time
WAIT = 2
def test_job():
    subprocess.Popen(["bash", "/app/job.sh"])
    time.sleep(3)
    time.sleep(WAIT)
    time.sleep(len("abc"))
    time.sleep(0.5 * 2)
"""


@pytest.mark.parametrize(("line", "seconds"), [(5, 3.0), (6, 2.0), (7, None), (8, None), (4, None)])
def test_the_seconds_of_a_sleep_are_read_where_they_are_fixed(line, seconds):
    assert sleep_seconds(PROGRAM, line) == seconds


def test_the_suspected_sleeps_are_the_verifiers_own():
    task = make_task(extra_tests={"test_outputs.py": PROGRAM.encode()})
    races = [
        Finding(code=Code.RACE, item=item, evidence="")
        for item in ("tests/test_outputs.py:5", "tests/test_outputs.py:6", "solution/solve.py:5")
    ]
    races.append(Finding(code=Code.RACE, item="tests/test_outputs.py:5", evidence=""))
    assert suspected_sleeps(task, races) == [2.0, 3.0]  # the solution's sleep is not run here
    assert sleep_cut_env([2.0, 0.25]) == {"T1_SLEEP_CUT": "2000000000,250000000"}


def test_the_library_cuts_the_named_sleeps_and_leaves_the_others(tmp_path):
    lib = host_sleep_shim()
    if lib is None:
        pytest.skip("no C compiler on this host")
    (tmp_path / "lib.so").write_bytes(lib)
    env = {**os.environ, "LD_PRELOAD": str(tmp_path / "lib.so"), **sleep_cut_env([2.0])}
    code = (
        "import time\nfor s in (2, 0.4):\n"
        "    m = time.monotonic(); time.sleep(s); print(round(time.monotonic() - m, 3))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    cut, kept = map(float, r.stdout.split())
    assert r.stderr == "" and cut < 0.2 and kept >= 0.4  # 2 s cut; 0.4 s as asked
    t0 = time.monotonic()
    shell = subprocess.run(["bash", "-c", "sleep 2; echo done"], env=env, capture_output=True)
    assert shell.stdout == b"done\n" and time.monotonic() - t0 < 1.5


def _job_task(root: Path):
    """A task whose verifier starts the agent's job and sleeps 3 s for it: a job that needs a
    few milliseconds (600 times less), which a sleep a tenth as long under a 0.1 quota left
    ample time."""
    d = root / "job-given-a-fixed-sleep"
    shutil.copytree(SET / "flaky--server-sleep", d)
    (d / "instruction.md").write_text(
        "Write `/app/job.sh`: a bash script that writes the number of lines of "
        "`/app/poem.txt` to `/app/out/lines.txt`.\n"
    )
    (d / "solution" / "solve.sh").write_text(
        "#!/bin/bash\nmkdir -p /app/out\n"
        "printf '%s\\n' '#!/bin/bash' 'wc -l < /app/poem.txt > /app/out/lines.txt' "
        "> /app/job.sh\n"
    )
    (d / "tests" / "test_outputs.py").write_text(
        "import subprocess, time\nfrom pathlib import Path\n\n"
        "def test_job_counts():\n"
        '    subprocess.Popen(["bash", "/app/job.sh"])\n'
        "    time.sleep(3)\n"
        '    lines = len(Path("/app/poem.txt").read_text().splitlines())\n'
        '    assert Path("/app/out/lines.txt").read_text().strip() == str(lines)\n'
    )
    return import_dir(root)[0][0]


def _judged(task, backend: str):
    return run_exec_judge(task, ExecConfig(**{**OFF, "starved": True}, backend=backend, workers=2))


def _assert_named(ev):
    shown = "\n".join(f.text() for f in ev.findings if f.item.startswith(("starved", "tests/")))
    flaky = [f for f in ev.findings if f.code == Code.FLAKY_VERIFIER]
    assert [f.item for f in flaky] == ["sleeps-cut"], shown
    assert (
        "tests/test_outputs.py:6" in flaky[0].evidence and "3 s cut to nothing" in flaky[0].evidence
    )
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED and Code.FLAKY_VERIFIER.value in decided.hard


@pytest.mark.sandbox
def test_a_job_given_a_fixed_sleep_far_longer_than_it_needs_is_a_race(tmp_path):
    _assert_named(_judged(_job_task(tmp_path), "local"))


@pytest.mark.sandbox
@pytest.mark.docker
def test_a_job_given_a_fixed_sleep_is_a_race_on_the_docker_backend(tmp_path, docker_engine):
    _assert_named(_judged(_job_task(tmp_path), "docker"))
