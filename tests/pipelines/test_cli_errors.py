"""The `t1` command as a user meets it, in real subprocesses: a user error is one line on
stderr naming what to fix, with exit code 2 (no traceback); `task check --json` keeps its
JSON when a task does not load; `t1 sql` tables fit the terminal or switch format.

Regression: `--agent bogus`, `--preset nope`, a bad `--policy-path` and an unknown `--pool`
printed 33-line tracebacks; `task check --json` with one bad task printed no JSON."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
T1 = str(Path(sys.executable).parent / "t1")
SEED = str(ROOT / "tasks" / "seeds" / "vc-gitignore-untrack")


def t1(*args: str, columns: int = 80, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), **env}
    return subprocess.run(
        [T1, *args], capture_output=True, text=True, env=environ, timeout=300, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("sql", "SELECT 1", "--format", "xml"), ("--format", "'markdown'", "t1 sql --help")),
        (("nope",), ("No such command 'nope'",)),
        (("task", "run", SEED, "--agent", "bogus"), ("--agent", "unknown agent 'bogus'")),
        (("sql", "SELECT 1", "--store", "/nonexistent/wh"), ("no warehouse at",)),
        (("warehouse", "export-pool", "t2", "/tmp/x"), ("'t2' is not one of",)),
        (("task", "run", "/nonexistent/task"), ("/nonexistent/task",)),
    ],
)
def test_user_errors_are_one_line(args, needles):
    assert_one_line_error(t1(*args), *needles)


def test_a_host_without_a_local_sandbox_is_exit_2_not_invalid_tasks():
    """Regression (issue 36): without cgroups every trial was `sandbox_error` and
    `t1 task check` called the seed invalid (exit 1), an environment problem reported as
    the task's."""
    result = t1("task", "check", SEED, T1_CGROUP_ROOT="/nonexistent")
    assert_one_line_error(result, "the local sandbox cannot run here", "no cgroup hierarchy")


@pytest.mark.torch
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("train", "--pool", "nope"), ("--pool", "'nope' is not one of")),
        (("train", "--preset", "nope"), ("no campaign preset", "nope.toml")),
        (("train", "--policy-path", "/nonexistent"), ("--policy-path",)),
    ],
)
def test_train_user_errors_are_one_line(args, needles, tmp_path):
    assert_one_line_error(t1(*args, "--store", str(tmp_path / "wh")), *needles)


def test_train_on_a_pool_version_that_does_not_exist(t1_store):
    store, _, _ = t1_store
    result = t1("train", "--pool", "T1", "--pool-version", "9", "--store", str(store))
    assert_one_line_error(result, "pool 't1' has no version 9")


def test_ui_refuses_a_taken_port_before_starting_anything(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {"DAGSTER_HOME": str(tmp_path / "dh")}
        taken = t1("ui", "--port", str(port), "--no-prefect", **env)
        same = t1("ui", "--port", "18599", "--prefect-port", "18599", **env)
    assert_one_line_error(taken, f"port {port}", "--port")
    assert_one_line_error(same, "--port and --prefect-port")
    assert not (tmp_path / "dh").exists()  # nothing was started or created


def test_sql_tables_fit_the_terminal_or_change_format(t1_store):
    store, _, _ = t1_store
    wide = t1("sql", "SELECT * FROM tasks ORDER BY task_id", "--store", str(store), columns=80)
    assert wide.returncode == 0, wide.stderr
    table = [line for line in wide.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80
    assert "more columns" in wide.stdout and "--format" in wide.stdout
    md = t1("sql", "SELECT pool, count(*) AS n FROM pool_members GROUP BY ALL", "--store",
            str(store), "--format", "markdown")  # fmt: skip
    assert md.stdout.splitlines() == ["| pool | n |", "|---|---|", "| t1 | 3 |"]


@pytest.mark.sandbox
def test_task_check_json_keeps_the_json_when_a_task_does_not_load(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "task.toml").write_text("this is not toml\n")
    result = t1("task", "check", "--json", str(bad), SEED)
    assert result.returncode == 1, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["task"], r["ok"]) for r in rows] == [(str(bad), False), (Path(SEED).name, True)]
    assert "invalid TOML" in rows[0]["problems"][0]
