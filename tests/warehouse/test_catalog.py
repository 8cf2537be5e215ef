"""External SQL clients: `catalog.duckdb` (and the printed DDL) show exactly what `t1 sql`
shows, before and after a compaction, and stay current as writers commit. Globbing the part
files instead double-counts after a compaction (the retired parts stay on disk an hour)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from warehouse import Store, open_snapshot, record_pool, record_tasks

COUNTS = """SELECT (SELECT count(*) FROM tasks) AS tasks,
                   (SELECT count(*) FROM pool_members WHERE pool = 'T1') AS t1_members,
                   (SELECT count(*) FROM ancestors((SELECT content_hash FROM tasks
                                                    WHERE task_id = 'child'))) AS ancestors"""


def counts_in_catalog(store: Path) -> tuple:
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        return con.execute(COUNTS).fetchone()


def counts_in_snapshot(store: Path) -> tuple:
    with open_snapshot(store) as snap:
        return snap.sql(COUNTS).rows[0]


def test_catalog_matches_t1_sql_through_commits_and_compaction(store_path, task_factory):
    seed = task_factory("seed")
    child = task_factory("child", parents=(seed,), round=1, root_seed=seed.content_hash)
    record_tasks(store_path, [seed])
    record_tasks(store_path, [child])
    path = Store.open(store_path).write_catalog()
    assert path == store_path / "catalog.duckdb"
    assert counts_in_catalog(store_path) == counts_in_snapshot(store_path) == (2, 0, 1)

    record_pool(store_path, "t1", [child, seed])  # a commit refreshes the catalog
    assert counts_in_catalog(store_path) == counts_in_snapshot(store_path) == (2, 2, 1)

    Store.open(store_path).compact(small_part_bytes=10**9, target_part_bytes=10**9)
    assert counts_in_catalog(store_path) == counts_in_snapshot(store_path) == (2, 2, 1)
    with duckdb.connect() as con:  # why not glob: the retired parts are still there
        globbed = con.execute(f"SELECT count(*) FROM '{store_path}/tasks/*.parquet'").fetchone()[0]
    assert globbed == 4


def test_printed_ddl_builds_the_same_views(store_path, task_factory):
    seed = task_factory("seed")
    child = task_factory("child", parents=(seed,), round=1, root_seed=seed.content_hash)
    record_tasks(store_path, [seed, child])
    record_pool(store_path, "t1", [child])
    ddl = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.warehouse_cmds", "warehouse", "ddl"]
        + ["--store", str(store_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with duckdb.connect() as con:
        con.execute(ddl)
        assert con.execute(COUNTS).fetchone() == counts_in_snapshot(store_path) == (2, 1, 1)


def duckdb_cli() -> str | None:
    """The registry's DuckDB CLI (`pip install duckdb-cli`, a dev dependency), if present."""
    beside = Path(sys.executable).parent / "duckdb"
    return str(beside) if beside.exists() else shutil.which("duckdb")


def test_the_duckdb_cli_opens_the_catalog(store_path, task_factory):
    """Regression: the catalog, written in DuckDB 2.0's own storage format, failed in the
    registry's 1.5 CLI ("version number 69, can only read 64-68"). It is written in the
    oldest format the supported readers share, and its lineage macros run there."""
    cli = duckdb_cli()
    if cli is None:
        pytest.skip("no DuckDB CLI: pip install duckdb-cli (a dev dependency)")
    seed = task_factory("seed")
    child = task_factory("child", parents=(seed,), round=1, root_seed=seed.content_hash)
    record_tasks(store_path, [seed, child])
    record_pool(store_path, "t1", [child, seed])
    path = Store.open(store_path).write_catalog()
    query = COUNTS + ";\nSELECT task_id, distance FROM descendants((SELECT content_hash FROM "
    query += "tasks WHERE task_id = 'seed'));"
    out = subprocess.run(
        [cli, "-readonly", "-csv", "-noheader", str(path), "-c", query],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    version = subprocess.run([cli, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2,2,1", "child,1"], (version.stdout, out.stdout)
