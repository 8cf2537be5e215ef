"""`t1 sql`, `t1 lineage` and `t1 warehouse ...`: the warehouse from the command line.

Every command reads through a snapshot (`warehouse.snapshot`): it never locks the store, so it
runs while pipelines write. `--store` defaults to $T1_WAREHOUSE, else ./data/warehouse.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, TextIO

import duckdb
import typer
from rich.console import Console
from rich.table import Table

from pipelines.cli.output import ExitCode, TableFormat, fail, print_rows
from pipelines.cli.root import app
from tasks.pools import Pool
from warehouse import Store, WarehouseError, export_pool, open_snapshot, resolve_store_path
from warehouse.lineage import (
    LINEAGE_NAMES,
    TaskNotFoundError,
    ancestry_lines,
    descendants,
    resolve_task,
)
from warehouse.migrations import migrate
from warehouse.snapshot import QueryResult, Snapshot
from warehouse.store import DEFAULT_RETIRE_GRACE_S

warehouse_app = typer.Typer(help="Maintain and export the Parquet warehouse.", no_args_is_help=True)
app.add_typer(warehouse_app, name="warehouse")

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store", help="Warehouse directory (default: $T1_WAREHOUSE, else data/warehouse)."
    ),
]


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, soft_wrap=False)


def _fail(message: str, code: int = 1) -> typer.Exit:
    return fail(message, ExitCode(code))


def _open(store: Path | None) -> Snapshot:
    try:
        return open_snapshot(store)
    except WarehouseError as e:
        raise _fail(str(e), 2) from e


def print_result(result: QueryResult, fmt: TableFormat, out: TextIO, max_rows: int) -> None:
    print_rows(result.columns, result.rows, fmt, out, max_rows=max_rows)


def _statements(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    return [s.query for s in con.extract_statements(text)]


def run_statements(snap: Snapshot, text: str, fmt: TableFormat, out: TextIO, max_rows: int) -> None:
    """Run every statement in `text`; print the result of each that returns rows."""
    for query in _statements(snap.con, text):
        if LINEAGE_NAMES.search(query):
            snap.ensure_lineage_index()
        result = snap.sql(query)
        if result.columns:
            print_result(result, fmt, out, max_rows)


SHELL_HELP = """Statements end with ';'. Commands:
  .tables          list the tables, views and lineage macros
  .schema NAME     columns of a table or view
  .refresh         re-open on the newest committed generation
  .help            this text
  .quit            leave (so does end of input)"""


def run_shell(
    snap: Snapshot,
    lines: Iterable[str],
    fmt: TableFormat,
    out: TextIO,
    max_rows: int,
    prompt: bool,
) -> tuple[Snapshot, int]:
    """The `t1 sql` shell: reads lines, runs each statement once it ends with ';' (or at end
    of input). Returns the (possibly refreshed) snapshot and the number of failed statements."""
    err = _console(stderr=True)
    failures = 0
    buffer: list[str] = []

    def show_prompt() -> None:
        if prompt:
            out.write("...> " if buffer else "t1> ")
            out.flush()

    def execute(text: str) -> None:
        nonlocal failures
        try:
            run_statements(snap, text, fmt, out, max_rows)
        except duckdb.Error as e:
            failures += 1
            err.print(f"[red]error:[/red] {e}", highlight=False)

    show_prompt()
    for raw in lines:
        line = raw.rstrip("\n")
        stripped = line.strip()
        if not buffer and stripped.startswith("."):
            cmd, _, arg = stripped.partition(" ")
            if cmd in (".quit", ".exit"):
                return snap, failures
            if cmd == ".help":
                out.write(SHELL_HELP + "\n")
            elif cmd == ".tables":
                execute(
                    "SELECT name, kind FROM (SELECT view_name AS name, 'view' AS kind "
                    "FROM duckdb_views() WHERE NOT internal UNION ALL SELECT table_name, "
                    "'table' FROM duckdb_tables() UNION ALL SELECT DISTINCT function_name, "
                    "'macro' FROM duckdb_functions() WHERE function_type = 'table_macro' "
                    "AND NOT internal) WHERE NOT starts_with(name, '_') ORDER BY kind, name"
                )
            elif cmd == ".schema" and arg.strip():
                execute(f'DESCRIBE "{arg.strip().replace(chr(34), "")}"')
            elif cmd == ".refresh":
                fresh = open_snapshot(snap.store)
                snap.close()
                snap = fresh
                out.write(f"generation {snap.generation}\n")
            else:
                failures += 1
                err.print(f"unknown command {stripped!r}; try .help", highlight=False)
        elif stripped:
            buffer.append(line)
            if stripped.endswith(";"):
                execute("\n".join(buffer))
                buffer.clear()
        show_prompt()
    if buffer:
        execute("\n".join(buffer))
    if prompt:
        out.write("\n")
    return snap, failures


@app.command("sql")
def sql_cmd(
    query: Annotated[
        str | None, typer.Argument(help="SQL to run; omit it for an interactive shell.")
    ] = None,
    store: StoreOpt = None,
    fmt: Annotated[
        TableFormat,
        typer.Option(
            "--format",
            case_sensitive=False,
            help="table (fits the terminal; long cells cut), csv, json (array of row "
            "objects) or markdown.",
        ),
    ] = TableFormat.TABLE,
    as_csv: Annotated[bool, typer.Option("--csv", help="Short for --format csv.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Short for --format json.")] = False,
    max_rows: Annotated[int, typer.Option(help="Rows shown in table output.")] = 200,
) -> None:
    """Query the warehouse (tasks, trials, pools, ... and the lineage views) with DuckDB SQL.
    Exit codes: 0 done, 1 a statement failed, 2 no store or bad options."""
    if as_csv and as_json:
        raise _fail("choose one of --csv and --json", 2)
    fmt = TableFormat.CSV if as_csv else TableFormat.JSON if as_json else fmt
    snap = _open(store)
    try:
        if query is None:
            interactive = sys.stdin.isatty()
            if interactive:
                sys.stdout.write(
                    f"T1 warehouse {snap.store.root} (generation {snap.generation}); .help\n"
                )
            snap, failures = run_shell(snap, sys.stdin, fmt, sys.stdout, max_rows, interactive)
            if failures and not interactive:
                raise typer.Exit(1)
            return
        try:
            run_statements(snap, query, fmt, sys.stdout, max_rows)
        except duckdb.Error as e:
            raise _fail(str(e)) from e
    finally:
        snap.close()


@app.command("lineage")
def lineage_cmd(
    task: Annotated[str, typer.Argument(help="Task id, content hash, or hash prefix.")],
    store: StoreOpt = None,
    show_descendants: Annotated[
        bool, typer.Option("--descendants", help="Also list every recorded descendant.")
    ] = False,
) -> None:
    """Print a task's ancestry tree up to its seeds."""
    with _open(store) as snap:
        try:
            h = resolve_task(snap, task)
        except TaskNotFoundError as e:
            raise _fail(str(e)) from e
        out = _console()
        for line in ancestry_lines(snap, h):
            out.print(line, highlight=False, markup=False)
        if show_descendants:
            nodes = descendants(snap, h)
            table = Table(title=f"{len(nodes)} descendants")
            for col in ("distance", "task_id", "hash", "round", "operator", "family"):
                table.add_column(col)
            for n in nodes:
                table.add_row(
                    str(n.distance),
                    n.task_id,
                    n.content_hash[:12],
                    str(n.round),
                    n.operator or "",
                    n.family or "",
                )
            out.print(table)


@warehouse_app.command("export-pool")
def export_pool_cmd(
    pool: Annotated[Pool, typer.Argument(case_sensitive=False, help="Pool name.")],
    dest: Annotated[Path, typer.Argument(help="New directory to write (must not exist).")],
    version: Annotated[int | None, typer.Option(help="Pool version (default: latest).")] = None,
    store: StoreOpt = None,
) -> None:
    """Write a pool as DEST/pool.parquet plus DEST/tasks/<task>/ Harbor directories."""
    with _open(store) as snap:
        try:
            result = export_pool(snap, pool, dest, version)
        except ValueError as e:
            raise _fail(str(e)) from e
    _console().print(
        f"exported {result.pool} v{result.version}: {result.tasks} tasks -> "
        f"{result.parquet} and {result.harbor_dir}/",
        highlight=False,
    )


@warehouse_app.command("compact")
def compact_cmd(
    store: StoreOpt = None,
    table: Annotated[
        list[str] | None, typer.Option("--table", help="Only these tables (repeatable).")
    ] = None,
    grace_s: Annotated[
        float, typer.Option(help="Keep retired parts this long for open readers.")
    ] = DEFAULT_RETIRE_GRACE_S,
) -> None:
    """Merge small parts, drop expired retired parts and files left by killed writers."""
    try:
        result = Store.open(store).compact(table or None, retire_grace_s=grace_s)
    except WarehouseError as e:
        raise _fail(str(e), 2) from e
    merged = ", ".join(f"{t}: {n} parts" for t, n in result.merged.items()) or "nothing"
    _console().print(
        f"generation {result.generation}; merged {merged}; "
        f"deleted {len(result.deleted_files)} files",
        highlight=False,
    )


@warehouse_app.command("catalog")
def catalog_cmd(store: StoreOpt = None) -> None:
    """Write STORE/catalog.duckdb for external DuckDB clients; every commit keeps it current."""
    try:
        path = Store.open(store).write_catalog()
    except WarehouseError as e:
        raise _fail(str(e), 2) from e
    _console().print(
        f"{path}: the views `t1 sql` sees, over the current parts; refreshed on every commit.\n"
        f"Open it read-only, e.g. python -c \"import duckdb; print(duckdb.connect('{path}', "
        "read_only=True).sql('FROM pools'))\"",
        highlight=False,
        markup=False,
    )


@warehouse_app.command("ddl")
def ddl_cmd(store: StoreOpt = None) -> None:
    """Print the SQL that builds the views `t1 sql` sees (run it in any DuckDB session)."""
    from warehouse.views import reader_statements

    try:
        st = Store.open(store)
        parts = st.part_files(st.read_manifest())
    except WarehouseError as e:
        raise _fail(str(e), 2) from e
    absolute = {t: [p.resolve() for p in files] for t, files in parts.items()}
    for statement in reader_statements(absolute, with_lineage=True):
        sys.stdout.write(statement.strip() + ";\n")


@warehouse_app.command("migrate")
def migrate_cmd(store: StoreOpt = None) -> None:
    """Bring an older store to this t1-forge's schema version, in place."""
    try:
        before, after = migrate(Store(_path(store)))
    except WarehouseError as e:
        raise _fail(str(e), 2) from e
    _console().print(f"schema version {before} -> {after}", highlight=False)


@warehouse_app.command("info")
def info_cmd(store: StoreOpt = None) -> None:
    """Schema version, generation, and parts/rows/bytes per table."""
    try:
        st = Store.open(store)
        manifest = st.read_manifest()
    except WarehouseError as e:
        raise _fail(str(e), 2) from e
    _console().print(
        f"{st.root}  schema v{manifest.schema_version}  gen {manifest.generation}",
        highlight=False,
        soft_wrap=True,
    )
    table = Table()
    for col in ("table", "parts", "rows", "bytes"):
        table.add_column(col, justify="right" if col != "table" else "left")
    for name, parts in manifest.tables.items():
        table.add_row(
            name,
            str(len(parts)),
            str(sum(p.rows for p in parts)),
            str(sum(p.bytes for p in parts)),
        )
    _console().print(table)
    if manifest.retired:
        _console().print(f"{len(manifest.retired)} retired parts awaiting deletion")


def _path(store: Path | None) -> Path:
    path = resolve_store_path(store)
    if not (path / "_meta.json").exists():
        raise _fail(f"no warehouse at {str(path)!r}", 2)
    return path


if __name__ == "__main__":  # `python -m pipelines.cli.warehouse_cmds`: only these commands
    app()
