"""The judge in its own trust domain (docs/sandbox.md, "The judge"): attacks of a hostile
agent on the verifier, on both backends.

Each trial carries several attacks at once (the agent plants every payload; the verifier
offers every trigger), so that one sandbox run tests many doors: if any single payload works,
the trial is forged or voided and the test fails. Which attack did what on the code before is
measured one by one and listed in docs/sandbox.md's table.
"""

from __future__ import annotations

import base64

import pytest

from sandbox import CommandAgent, run_trial
from tasks.hacks import FORGER, forger_path
from tasks.model import EnvironmentSpec, Limits, PhaseConfig, Task
from tests.factories import make_task
from tests.sandbox.images import TOOLS_DOCKERFILE

pytestmark = pytest.mark.sandbox

# The tools image with what real images have: a venv outside /usr first on PATH (with a module
# the tests import), and a test command that lives only there.
JUDGE_DOCKERFILE = TOOLS_DOCKERFILE + (
    b"RUN python3 -m venv --system-site-packages --without-pip /opt/venv"
    b" && echo 'VALUE = 1' > /opt/venv/lib/python3.11/site-packages/t1dep.py"
    b" && printf '#!/bin/sh\\nexec python3 -m pytest \"$@\"\\n' > /opt/venv/bin/run-tests"
    b" && chmod 755 /opt/venv/bin/run-tests\n"
    b"ENV PATH=/opt/venv/bin:$PATH\n"
)
LIMITS = Limits(agent_timeout_s=60, verifier_timeout_s=120, memory_mb=512, pids=256, disk_mb=256)

# Tests that run the agent's program and check its work (never done by the attackers).
PROGRAM_TESTS = b"""import subprocess
from pathlib import Path

import t1dep


def test_program_runs():
    subprocess.run(["bash", "/app/prog.sh"], check=True, timeout=20)


def test_done_says_ok():
    assert t1dep.VALUE == 1 and Path("/app/done").read_text().strip() == "ok"
"""


def judge_task(task_id: str, test_sh: bytes, *, user: str | None = None) -> Task:
    env = EnvironmentSpec(files={"Dockerfile": JUDGE_DOCKERFILE})
    task = make_task(task_id, environment=env, limits=LIMITS)
    return task.model_copy(
        update={
            "verifier": {"test.sh": test_sh, "test_outputs.py": PROGRAM_TESTS},
            "verifier_config": PhaseConfig(user=user),
        }
    )


def plant(path: str, text: str, mode: str = "644") -> str:
    """Shell that writes `text` to `path` (directories made), mode `mode`."""
    b64 = base64.b64encode(text.encode()).decode()
    return f"mkdir -p $(dirname {path}); echo {b64} | base64 -d > {path}; chmod {mode} {path}"


# In a pytest process: every test's report says passed (the recorder then signs that).
FORCE_PASS = """
try:
    import _pytest.reports as _t1r

    _t1i = _t1r.TestReport.__init__

    def _t1f(self, *a, **k):
        _t1i(self, *a, **k)
        self.outcome, self.longrepr = "passed", None

    _t1r.TestReport.__init__ = _t1f
except Exception:
    pass
"""
# `python3 -m pytest` run in the agent's directory: its pytest.py runs in place of pytest's
SHADOW_PYTEST = (
    "import sys\n"
    "_path = sys.path[:]\n"
    "sys.path[:] = [p for p in sys.path if p not in ('', '/app')]\n"
    "import pytest as _real\n"
    "sys.path[:] = _path\n" + FORCE_PASS + "sys.exit(_real.console_main())\n"
)
FORGER_PATH = forger_path("/app")
RUN_FORGER = f"bash {FORGER_PATH} </dev/null >/dev/null 2>&1\n"

# What an agent can leave for a verifier that trusts its configuration (each alone forged a
# resolved verdict on the code before, docs/sandbox.md): the system's and the user's (apt
# hooks, an env file the verifier sources, a login shell's profile), the project's (pytest's
# conftest, ini naming a plugin, a pytest.py for `python -m pytest`, a sitecustomize on an
# appended PYTHONPATH), and a module the tests import from an image venv outside /usr.
CONFIG_PLANTS = {
    "apt-hook": plant(
        "/etc/apt/apt.conf.d/00t1", f'APT::Update::Pre-Invoke {{"{RUN_FORGER.strip()}";}};\n'
    ),
    "env-file": plant("/root/.local/bin/env", RUN_FORGER),
    "profile-d": plant("/etc/profile.d/t1.sh", RUN_FORGER),
    "conftest": plant("/app/conftest.py", FORCE_PASS),
    "ini-plugin": plant("/app/pytest.ini", "[pytest]\naddopts = -p t1force\n")
    + "; "
    + plant("/app/t1force.py", FORCE_PASS),
    "pytest-shadow": plant("/app/pytest.py", SHADOW_PYTEST),
    "sitecustomize": plant("/app/sitecustomize.py", FORCE_PASS),
    "venv-module": plant(
        "/opt/venv/lib/python3.11/site-packages/t1dep.py", "VALUE = 1\n" + FORCE_PASS
    ),
}
CONFIG_TEST_SH = b"""#!/bin/bash
apt-get update -qq >/dev/null 2>&1
[ -f "$HOME/.local/bin/env" ] && . "$HOME/.local/bin/env"
bash -lc true
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/app"
cp /tests/test_outputs.py /app/ && cd /app
python3 -m pytest -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_outputs.py
"""


def config_attack(names: list[str]) -> str:
    setup = plant(FORGER_PATH, FORGER, "755") + "; " + plant("/app/prog.sh", "true\n")
    return "; ".join([setup, *(CONFIG_PLANTS[n] for n in names)])


# Two of them the code before caught by name (its list of files in the working directory that
# make a trial `tampered`); the judge stops them by construction, in a trial of their own (one
# detected payload would mark the other trial tampered and hide the rest).
NAMED_BEFORE = ("pytest-shadow", "sitecustomize")


@pytest.mark.parametrize(
    "plants",
    [
        pytest.param([n for n in sorted(CONFIG_PLANTS) if n not in NAMED_BEFORE], id="forged"),
        pytest.param(list(NAMED_BEFORE), id="named-before"),
    ],
)
def test_nothing_the_agent_configured_runs_as_the_judge(backend, plants):
    """The payloads at once, a verifier that offers every trigger (apt, a sourced env file, a
    login shell, pytest run in the agent's project with /app on the Python path): the work is
    not done, so nothing may resolve the trial, void it or mark it tampered."""
    task = judge_task("judge-config", CONFIG_TEST_SH)
    r = run_trial(task, CommandAgent(config_attack(plants)), backend)
    assert r.failure_mode.value == "none", (r.failure_mode, r.failure_detail)
    assert not r.resolved and r.passed == 1, (r.report, r.verifier_output)


def test_the_same_verifier_judges_honest_work(backend):
    """The control: the verifier of the test above, the work done: resolved, from pytest's
    authenticated records; the agent's program, run as its uid, writes to /dev/stdout and
    /dev/stderr (pytest's capture file, reopened) as programs do."""
    task = judge_task("judge-config-honest", CONFIG_TEST_SH)
    prog = "set -e\necho out > /dev/stdout\necho err > /dev/stderr\n"
    agent = plant("/app/prog.sh", prog) + "; echo ok > /app/done"
    r = run_trial(task, CommandAgent(agent), backend)
    assert r.failure_mode.value == "none" and r.resolved, (r.failure_mode, r.report)
    assert r.report.authenticated, r.report


def test_a_planted_setpriv_does_not_start_the_verifier():
    """A non-root verifier user is switched to with `setpriv`; the agent leaves its own in an
    image PATH directory outside /usr. (Local only: the Docker engine switches users itself.)"""
    forged = (
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="2">'
        '<testcase classname="test_outputs" name="test_program_runs"/>'
        '<testcase classname="test_outputs" name="test_done_says_ok"/></testsuite></testsuites>'
    )
    fake = f"#!/bin/sh\nprintf '%s' '{forged}' > /logs/verifier/junit.xml\nexit 0\n"
    test_sh = (
        b"#!/bin/bash\nrun-tests -rA --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n"
    )
    task = judge_task("judge-setpriv", test_sh, user="nobody")
    r = run_trial(task, CommandAgent(plant("/opt/venv/bin/setpriv", fake, "755")), "local")
    assert not r.failure_mode.infrastructure, (r.failure_mode, r.failure_detail)
    assert not r.resolved and r.passed <= 1, (r.failure_mode, r.report, r.verifier_output)


# A program the tests run, probing the judge from the agent's domain: the key, the report
# directory, /proc of the test runner, ptrace and the calls
# the verifier phase refuses, and a setuid-root shell the agent left in its outputs (used to
# write the report directory).
PROBE = r"""#!/bin/bash
PY=$PPID; SH=$(awk '{print $4}' /proc/$PY/stat)
leak() { echo "LEAK $1"; }
[ -n "$(cat /logs/verifier/.t1-verdict-key 2>/dev/null)" ] && leak key
touch /logs/verifier/probe 2>/dev/null && leak report-dir
tr '\0' '\n' < /proc/$PY/environ 2>/dev/null | grep -q . && leak environ
/app/rootsh -p -c 'touch /logs/verifier/suid' 2>/dev/null && leak setuid-shell
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if libc.syscall(101, 0, 0, 0, 0) == 0:  # ptrace(PTRACE_TRACEME)
    print("LEAK ptrace")
buf = ctypes.create_string_buffer(b"x" * 8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
if libc.syscall(311, os.getpid(), iov, 1, iov, 1, 0) == 8:  # process_vm_writev, to itself
    print("LEAK process_vm_writev")
pidfd = libc.syscall(434, os.getpid(), 0)  # pidfd_open
if pidfd >= 0 and libc.syscall(438, pidfd, 1, 0) >= 0:  # pidfd_getfd
    print("LEAK pidfd_getfd")
EOF
echo "HUNTED uid=$(id -u)"
"""
PROBE_TEST_SH = b"""#!/bin/bash
run-tests -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py
"""


def test_programs_the_tests_run_are_the_agents(backend):
    """The agent's program, run by the tests, runs in the agent's domain under the verifier
    phase's system-call filter: none of the probes reaches the judge."""
    task = judge_task("judge-probe", PROBE_TEST_SH)
    agent = plant("/app/prog.sh", PROBE) + "; cp /bin/bash /app/rootsh; chmod 4755 /app/rootsh"
    r = run_trial(task, CommandAgent(agent), backend)
    assert "HUNTED" in r.verifier_output, r.verifier_output
    assert "LEAK" not in r.verifier_output, r.verifier_output
    assert r.failure_mode.value == "none" and r.passed == 1, (r.failure_mode, r.report)


# A program a shell verifier runs starts a process that waits for the entry script to exit and
# then rewrites its reward (docker: the verifier's container outlived the exec).
EXIT_WATCHER = r"""#!/bin/bash
SH=$PPID
(
  while [ -e /proc/$SH ] && [ "$(awk '{print $3}' /proc/$SH/stat 2>/dev/null)" != Z ]; do
    sleep 0.002
  done
  echo 1 > /logs/verifier/reward.txt
) </dev/null >/dev/null 2>&1 &
"""
SHELL_REWARD_TEST_SH = b"""#!/bin/bash
bash /app/prog.sh
[ "$(cat /app/done 2>/dev/null)" = ok ] && r=1 || r=0
echo $r > /logs/verifier/reward.txt
"""


def test_nothing_outlives_the_verifier(backend):
    """The verifier's whole process tree ends with its entry script, before the report is
    read: a process waiting for the script's exit never writes."""
    task = judge_task("judge-exit-watcher", SHELL_REWARD_TEST_SH)
    r = run_trial(task, CommandAgent(plant("/app/prog.sh", EXIT_WATCHER)), backend)
    assert not r.failure_mode.infrastructure, (r.failure_mode, r.failure_detail)
    assert not r.resolved, (r.failure_mode, r.report)


# What an agent can do so that the verifier cannot start or finish, each of which made the
# trial infrastructure (kept out of the reward) on the code before: delete the verifier's own
# command from an image PATH directory outside /usr, replace the working directory by a FIFO,
# remove the verifier's user, fill the disk that held the runtime's /etc files (local).
VOIDS = "rm -f /opt/venv/bin/run-tests; rm -rf /app; mkfifo /app; sed -i '/^nobody:/d' /etc/passwd"


def test_the_agent_cannot_void_the_verifier(backend):
    """Every void at once: the judge runs from the image all the same, and the trial is the
    agent's failed attempt (rewardable, not resolved)."""
    fill = "; head -c 300M /dev/zero >> /etc/hosts 2>/dev/null" if backend == "local" else ""
    task = judge_task("judge-void", PROBE_TEST_SH, user="nobody")
    r = run_trial(task, CommandAgent(VOIDS + fill), backend)
    assert not r.failure_mode.infrastructure, (r.failure_mode, r.failure_detail)
    assert r.rewardable and not r.resolved, (r.failure_mode, r.report)
