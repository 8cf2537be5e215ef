"""The Terminal-Bench v1 verifier toolchain, attacked and run on every backend.

A converted TB task runs its tests with a pytest the build installed into a venv of its own
(`tasks.model.VERIFIER_VENV`), first on the verifier's PATH. Bug pinned: that venv lived under
/opt, which the agent writes and the verifier's view keeps, so an agent that replaced the
venv's `pytest` (or its interpreter) with a program printing an all-passed summary resolved
every task. The attack below finds every venv on the machine rather than one known path.
(Now the verifier runs in a fresh sandbox of the image: nothing the agent did to the venv is
there.) The oracle run also
pins the Docker backend building the venv at all (every converted task was
`verifier_error` there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import CommandAgent, run_trial
from tasks.model import VERIFIER_VENV
from tasks.results import FailureMode
from tasks.terminal_bench import load_terminal_bench
from tests.sandbox.images import TOOLS_DOCKERFILE, tools_task

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

RUN_TESTS = """#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi
uv venv .tbench-testing
source .tbench-testing/bin/activate
uv pip install pytest==8.3.5
uv run pytest $TEST_DIR/test_outputs.py -rA
"""

TEST_OUTPUTS = """from pathlib import Path


def test_answer_exists():
    assert Path("/app/answer.txt").exists()


def test_answer_is_right():
    assert Path("/app/answer.txt").read_text().strip() == "42"
"""

TASK_YAML = """instruction: Write the answer (42) to /app/answer.txt.
difficulty: easy
category: software-engineering
parser_name: pytest
max_agent_timeout_sec: 60
max_test_timeout_sec: 60
"""

# A program that prints pytest's short summary with every test of the files it is given
# PASSED, writes reward 1, and exits 0.
FAKE_RUNNER = r"""#!/bin/sh
for f in "$@"; do [ -f "$f" ] && files="$files $f"; done
echo "=========================== short test summary info ============================"
for f in $files; do
  grep -o '^def test_[A-Za-z0-9_]*' "$f" | sed "s|^def |PASSED $f::|"
done
echo "============================== all passed in 0.01s =============================="
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
exit 0
"""


# The same, as the pytest package itself (what the venv's bin/pytest imports).
FAKE_PACKAGE = r"""import re
import sys


def console_main():
    files = [a for a in sys.argv[1:] if a.endswith(".py")]
    print("=========================== short test summary info ============================")
    for f in files:
        for name in re.findall(r"^def (test_\w+)", open(f).read(), re.M):
            print(f"PASSED {f}::{name}")
    print("============================== all passed in 0.01s ==============================")
    open("/logs/verifier/reward.txt", "w").write("1")
    return 0


main = console_main
"""


def _plant(target: str) -> str:
    """Shell: replace, in every Python venv on the machine, its `target` (a glob under the
    venv: bin/pytest, bin/python3, the pytest package) with a fake that reports all tests
    passed. System PATH directories are left alone (the tamper scan watches those); a venv's
    bin/ is not on any PATH the agent sees."""
    fake = FAKE_PACKAGE if target.endswith(".py") else FAKE_RUNNER
    return (
        "cat > /tmp/fake <<'EOF'\n" + fake + "EOF\n"
        "chmod 755 /tmp/fake\n"
        "n=0\n"
        "for cfg in $(find / -xdev -name pyvenv.cfg 2>/dev/null); do\n"
        '  d=$(dirname "$cfg")\n'
        f"  for f in $d/{target}; do\n"
        '    [ -e "$f" ] || [ -L "$f" ] || continue\n'
        '    rm -f "$f" && cp /tmp/fake "$f" && n=$((n+1))\n'
        "  done\n"
        "done\n"
        'echo "planted in $n places"\n'
        '[ "$n" -gt 0 ]\n'
    )


def tb_task(tmp_path: Path):
    d = tmp_path / "tb-answer"
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(TASK_YAML)
    (d / "Dockerfile").write_bytes(TOOLS_DOCKERFILE)
    (d / "run-tests.sh").write_text(RUN_TESTS)
    (d / "solution.sh").write_text("#!/bin/bash\necho 42 > /app/answer.txt\n")
    (d / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    task = load_terminal_bench(d)
    assert task.environment.verifier_packages == ["pytest==8.3.5"]
    assert f'export PATH="{VERIFIER_VENV}/bin:$PATH"' in task.verifier["test.sh"].decode()
    return task


def test_the_converted_verifier_runs_its_own_pytest(backend, tmp_path):
    task = tb_task(tmp_path)
    r = run_trial(task, "oracle", backend)
    assert r.failure_mode == FailureMode.NONE, (r.failure_detail, r.verifier_output)
    assert r.resolved and r.passed == 2
    assert "pytest-8.3.5" in r.verifier_output  # the venv's, not the image's python3-pytest
    nop = run_trial(task, "nop", backend)
    assert nop.failure_mode == FailureMode.NONE and not nop.resolved and nop.passed == 0


@pytest.mark.parametrize(
    "target", ["bin/pytest", "bin/python3", "lib/python3*/site-packages/pytest/__init__.py"]
)
def test_a_replaced_verifier_venv_cannot_forge_the_verdict(backend, tmp_path, target):
    task = tb_task(tmp_path)
    r = run_trial(task, CommandAgent(_plant(target), name="venv-forger"), backend)
    assert r.agent_exit_code == 0, r.failure_detail  # the attack did land in the agent's root
    assert r.rewardable, (r.failure_mode, r.failure_detail)
    assert not r.resolved and r.passed == 0, (r.failure_mode, r.verifier_output)
    # The verifier ran the image's venv, the agent's copy unseen.
    assert "pytest-8.3.5" in r.verifier_output and "FAILED" in r.verifier_output


@pytest.mark.parametrize(
    "entry",
    [
        "cd /app\n./build/solve --check\n",  # a program the agent was to make (exit 127)
        "no-such-test-runner /tests\n",  # the verifier's own command (exit 127)
    ],
)
def test_a_run_without_a_report_is_a_failed_attempt_whatever_its_exit(backend, entry):
    """No exit status decides who caused a failure (sandbox.judge): a verifier that ran to
    its end and left no report is a failed attempt, rewarded 0; one that never works (the
    second) fails the audit's oracle run instead of being infrastructure here."""
    task = tools_task("no-report", verifier={"test.sh": ("#!/bin/bash\n" + entry).encode()})
    r = run_trial(task, "nop", backend)
    assert r.failure_mode == FailureMode.NONE and r.rewardable, r.failure_detail
    assert not r.resolved and (r.passed, r.total) == (0, 1)
    assert r.verifier_exit_code == 127 and "no report (exit 127)" in r.failure_detail
