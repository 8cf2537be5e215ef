"""`t1 sql`, `t1 lineage` and `t1 warehouse ...`, run in process with typer's runner."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pipelines.cli.warehouse_cmds  # noqa: F401  (registers the commands)
from pipelines.cli.root import app
from tasks.harbor import load_harbor
from warehouse import record_pool, record_tasks
from warehouse.schema import SCHEMA_VERSION

runner = CliRunner()


@pytest.fixture
def store(store_path: Path, graph) -> Path:
    record_tasks(store_path, graph.tasks)
    record_pool(store_path, "t1", [graph.F, graph.K, graph.G])
    return store_path


def t1(*args: str, stdin: str | None = None):
    return runner.invoke(app, list(args), input=stdin)


def test_sql_table_csv_and_json(store: Path) -> None:
    q = "SELECT task_id, round FROM tasks WHERE round = 3 ORDER BY task_id"
    table = t1("sql", q, "--store", str(store))
    assert table.exit_code == 0, table.output
    assert "task_id" in table.output and "2 rows" in table.output
    as_csv = t1("sql", q, "--csv", "--store", str(store))
    assert list(csv.reader(io.StringIO(as_csv.output))) == [
        ["task_id", "round"],
        ["f", "3"],
        ["k", "3"],
    ]
    as_json = t1(
        "sql",
        "SELECT task_id, bundle FROM tasks WHERE task_id = 'f'",
        "--json",
        "--store",
        str(store),
    )
    row = json.loads(as_json.output)[0]
    assert row["task_id"] == "f" and "task.toml" in row["bundle"]  # bytes as base64 strings


def test_sql_uses_the_environment_variable_and_reports_errors(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("T1_WAREHOUSE", str(store))
    assert t1("sql", "SELECT count(*) AS n FROM tasks", "--csv").output.splitlines() == ["n", "11"]
    bad = t1("sql", "SELECT nope FROM tasks")
    assert bad.exit_code == 1 and "nope" in bad.output
    missing = t1("sql", "SELECT 1", "--store", str(store.parent / "absent"))
    assert missing.exit_code == 2 and "no warehouse" in missing.output


def test_sql_shell_reads_piped_statements(store: Path) -> None:
    script = (
        ".tables\n"
        "SELECT count(*) AS n\n  FROM tasks;\n"
        "SELECT 1 AS a; SELECT 'x;y' AS b;\n"
        "SELECT seed_id, descendants FROM seed_fanout ORDER BY seed_id\n"
    )
    result = t1("sql", "--csv", "--store", str(store), stdin=script)
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert "ancestors,macro" in out and "tasks,view" in out
    assert not any(line.startswith("_empty") for line in out)
    i = out.index("n")
    assert out[i : i + 6] == ["n", "11", "a", "1", "b", "x;y"]
    assert out[-3:] == ["seed_id,descendants", "s1,7", "s2,3"]  # run at end of input
    failing = t1("sql", "--store", str(store), stdin="SELECT nope;\nSELECT 2 AS ok;\n")
    assert failing.exit_code == 1 and "ok" in failing.output


def test_lineage_prints_the_ancestry_tree(store: Path, graph) -> None:
    result = t1("lineage", "f", "--store", str(store), "--descendants")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"f {graph.F.content_hash[:12]} (round 3 via crossover")
    assert any("s2" in line and "(seed" in line for line in lines)
    assert "0 descendants" in result.output
    by_prefix = t1("lineage", graph.S1.content_hash[:8], "--store", str(store), "--descendants")
    assert "7 descendants" in by_prefix.output
    unknown = t1("lineage", "zzz", "--store", str(store))
    assert unknown.exit_code == 1 and "no recorded task" in unknown.output


def test_warehouse_export_compact_info(store: Path, tmp_path: Path, graph) -> None:
    dest = tmp_path / "out"
    result = t1("warehouse", "export-pool", "t1", str(dest), "--store", str(store))
    assert result.exit_code == 0, result.output
    assert load_harbor(dest / "tasks" / "k").content_hash == graph.K.content_hash
    assert t1("warehouse", "export-pool", "t1", str(dest), "--store", str(store)).exit_code == 1
    record_tasks(store, [graph.tasks[0]])  # no-op write: nothing to compact yet
    compact = t1("warehouse", "compact", "--store", str(store), "--grace-s", "0")
    assert compact.exit_code == 0 and "generation" in compact.output
    info = t1("warehouse", "info", "--store", str(store))
    v = SCHEMA_VERSION
    assert info.exit_code == 0 and "tasks" in info.output and f"schema v{v}" in info.output
    assert t1("warehouse", "migrate", "--store", str(store)).output.strip() == (
        f"schema version {v} -> {v}"
    )
