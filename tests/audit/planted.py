"""Planted-defect tasks for the audit tests, built in code on one clean base task.

The base ("log report") is a small, honest task: count the ERROR lines of a log and list
its distinct ERROR messages. Each variant plants exactly one defect the audit must name:

- hidden:   the verifier also checks /app/report/summary.txt ("status: complete"), which
            the instruction never mentions;
- leakage:  a copy of the verifier's checks sits in the environment under app/;
- shortcut: solve.sh echoes the ERROR count literally instead of counting;
- weak:     the verifier only checks that the report directory and one file exist;
- flaky:    the verifier's outcome depends on $RANDOM.
"""

from __future__ import annotations

from pathlib import Path

from tasks.model import Category, EnvironmentSpec, Limits, Task

CHECKRUNNER = (Path(__file__).resolve().parents[2] / "tasks" / "checkrunner.py").read_bytes()
TEST_SH = b"#!/bin/bash\npython3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier\n"

_LEVELS = ["INFO", "WARN", "ERROR"]
_WORDS = ["disk", "cache", "queue", "socket", "worker", "index", "backup", "token"]
_STATES = ["ready", "slow", "failed", "retrying", "stalled", "full"]


def log_text() -> str:
    """A deterministic log without digits (so counts are never spelled out in it)."""
    lines = []
    for i in range(1500):
        level = _LEVELS[(i * 7 + i // 5) % 3]
        lines.append(f"{level} {_WORDS[(i * 3) % 8]} {_STATES[(i * 5 + i // 3) % 6]}")
    return "\n".join(lines) + "\n"


def error_count() -> int:
    return sum(1 for ln in log_text().splitlines() if ln.startswith("ERROR "))


INSTRUCTION = """\
`/app/app.log` is a service log: each line starts with a level (`INFO`, `WARN` or `ERROR`),
a space, and a message.

1. Write the number of `ERROR` lines to `/app/report/errors.txt` (only the number, then a
   newline).
2. Write every distinct `ERROR` message (the text after `ERROR `), sorted, one per line, to
   `/app/report/messages.txt`.
"""

SOLVE = """\
#!/bin/bash
set -e
mkdir -p /app/report
grep -c '^ERROR ' /app/app.log > /app/report/errors.txt
grep '^ERROR ' /app/app.log | cut -d' ' -f2- | sort -u > /app/report/messages.txt
"""

TESTS = """\
import os

LOG = "/app/app.log"
REPORT = "/app/report"


def errors():
    with open(LOG) as f:
        return [ln for ln in f.read().splitlines() if ln.startswith("ERROR ")]


def test_error_count():
    with open(REPORT + "/errors.txt") as f:
        assert f.read().strip() == str(len(errors())), "wrong ERROR count"


def test_messages_sorted_unique():
    want = sorted({ln.split(" ", 1)[1] for ln in errors()})
    with open(REPORT + "/messages.txt") as f:
        assert f.read().splitlines() == want, "messages not sorted/unique/complete"


def test_log_untouched():
    with open(LOG) as f:
        assert len(f.read().splitlines()) > 100, "the log was truncated"
"""


def base_task(task_id: str = "audit-clean", **changes: object) -> Task:
    task = Task(
        id=task_id,
        name=task_id,
        instruction=INSTRUCTION,
        category=Category.SCRIPTING_AUTOMATION,
        limits=Limits(
            agent_timeout_s=30,
            verifier_timeout_s=30,
            memory_mb=256,
            pids=128,
            disk_mb=64,
            output_bytes=200_000,
        ),
        environment=EnvironmentSpec(
            requires=["python3"], files={"app/app.log": log_text().encode()}
        ),
        solution={"solve.sh": SOLVE.encode()},
        verifier={
            "test.sh": TEST_SH,
            "run_checks.py": CHECKRUNNER,
            "test_outputs.py": TESTS.encode(),
        },
    )
    return task.model_copy(update=changes) if changes else task


def hidden_requirement_task() -> Task:
    tests = (
        TESTS
        + """

def test_summary_written():
    with open(REPORT + "/summary.txt") as f:
        assert f.read().startswith("status: complete"), "summary missing"
"""
    )
    base = base_task()
    solve = SOLVE + "echo 'status: complete' > /app/report/summary.txt\n"
    return base_task(
        "audit-hidden",
        solution={"solve.sh": solve.encode()},
        verifier=base.verifier | {"test_outputs.py": tests.encode()},
    )


def leakage_task() -> Task:
    base = base_task()
    files = base.environment.files | {"app/.cache/test_outputs.py": TESTS.encode()}
    env = base.environment.model_copy(update={"files": files})
    return base_task("audit-leakage", environment=env)


def shortcut_task() -> Task:
    solve = SOLVE.replace(
        "grep -c '^ERROR ' /app/app.log > /app/report/errors.txt",
        f"echo {error_count()} > /app/report/errors.txt",
    )
    return base_task("audit-shortcut", solution={"solve.sh": solve.encode()})


def weak_verifier_task() -> Task:
    tests = """\
import os

REPORT = "/app/report"


def test_report_dir_exists():
    assert os.path.isdir(REPORT)


def test_errors_file_exists():
    assert os.path.exists(REPORT + "/errors.txt")
"""
    solve = SOLVE + (
        "cp /app/app.log /app/report/app.log.bak\n"
        "wc -l < /app/app.log > /app/report/lines.txt\n"
        "grep -c '^WARN ' /app/app.log > /app/report/warnings.txt\n"
    )
    base = base_task()
    return base_task(
        "audit-weak",
        solution={"solve.sh": solve.encode()},
        verifier=base.verifier | {"test_outputs.py": tests.encode()},
    )


def flaky_verifier_task() -> Task:
    test_sh = TEST_SH.replace(b"python3", b"export COIN=$((RANDOM % 2))\npython3", 1)
    tests = (
        TESTS
        + """

def test_coin():
    assert os.environ.get("COIN", "0") == "0", "unlucky"
"""
    )
    base = base_task()
    return base_task(
        "audit-flaky",
        verifier=base.verifier | {"test.sh": test_sh, "test_outputs.py": tests.encode()},
    )


PLANTED = {
    "hidden_requirement": hidden_requirement_task,
    "test_leakage": leakage_task,
    "solution_shortcut": shortcut_task,
    "weak_verifier": weak_verifier_task,
    "flaky_verifier": flaky_verifier_task,
}
