"""The SQL every reader of a store sees, as DDL: one view per table over exactly the Parquet
parts a manifest names, then the lineage views and macros.

`Snapshot.open` runs these statements on a private in-memory connection; the catalog file
(`catalog.duckdb` in the store, see `write_catalog`) holds the same statements, in a storage
format older DuckDB releases read (`CATALOG_STORAGE_VERSION`), so the DuckDB CLI, a notebook
or DBeaver opening it sees exactly what `t1 sql` sees. Views bind part files
by name: globbing `<table>/*.parquet` instead would also read parts a compaction retired
(kept an hour for open readers) and files a killed writer left, and count rows twice.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import duckdb

import warehouse.lineage as lineage
import warehouse.provenance as provenance
import warehouse.schema as schema

CATALOG_FILE = "catalog.duckdb"
# The catalog's on-disk format: the oldest DuckDB release that reads it. Written with the
# writer's own (newest) format, a DuckDB 2.0 catalog failed in the 1.5 CLI, still the
# registry's current CLI ("version number 69, can only read 64-68"). Readers: DuckDB 1.5
# to 2.0 (the lineage walks are `USING KEY` CTEs with `UNION ALL`, which 1.4 refuses and 2.0
# wants instead of `UNION`); a 1.4 client opens the file and reads every table view, not the
# lineage walks. Documented in docs/warehouse.md, tested with the registry's `duckdb-cli`.
CATALOG_STORAGE_VERSION = "v1.4.0"


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def parquet_list_sql(paths: Sequence[Path]) -> str:
    """A DuckDB list literal of file paths, quoted for inlining into SQL."""
    return "[" + ", ".join(_sql_str(str(p)) for p in paths) + "]"


@cache
def empty_table_ddl(name: str) -> str:
    """`CREATE TABLE _empty_<name> (...)` with the DuckDB types of the table's Arrow schema."""
    spec = schema.table_spec(name)
    with duckdb.connect() as con:
        con.register("_schema", spec.schema.empty_table())
        columns = con.sql("DESCRIBE _schema").fetchall()
    cols = ", ".join(f'"{c[0]}" {c[1]}' for c in columns)
    return f"CREATE TABLE _empty_{name} ({cols})"


def view_sql(spec: schema.TableSpec, files: Sequence[Path]) -> str:
    """The body of table `spec`'s view: its typed empty table plus exactly `files`, with the
    name columns (pool names) lowercased and compared case-blind."""
    source = f"SELECT * FROM _empty_{spec.name}"
    if files:
        source += (
            " UNION ALL BY NAME SELECT * FROM "
            f"read_parquet({parquet_list_sql(files)}, union_by_name = true)"
        )
    if not spec.nocase:
        return source
    cols = ", ".join(f'lower("{c}") COLLATE NOCASE AS "{c}"' for c in spec.nocase)
    return f"SELECT * REPLACE ({cols}) FROM ({source})"


def reader_statements(parts: Mapping[str, Sequence[Path]], *, with_lineage: bool) -> list[str]:
    """Every statement that builds a reader's view of the store: `parts` maps each table to
    the files of its committed parts."""
    out: list[str] = []
    for name, spec in schema.TABLES.items():
        out.append(empty_table_ddl(name))
        out.append(f"CREATE VIEW {name} AS {view_sql(spec, parts.get(name, ()))}")
    out.extend(provenance.PROVENANCE_SQL)
    if with_lineage:
        out.extend(lineage.LINEAGE_SQL)
    return out


def write_catalog(root: Path, parts: Mapping[str, Sequence[Path]]) -> Path:
    """Write `root/catalog.duckdb`: the reader statements over absolute part paths, built in a
    temporary file and renamed into place (a client that has the old file open keeps it)."""
    absolute = {t: [Path(p).resolve() for p in files] for t, files in parts.items()}
    target = root / CATALOG_FILE
    tmp = root / f".tmp-catalog-{os.getpid()}-{uuid.uuid4().hex[:8]}.duckdb"
    try:
        with duckdb.connect() as con:
            con.execute(
                f"ATTACH {_sql_str(str(tmp))} AS catalog "
                f"(STORAGE_VERSION {_sql_str(CATALOG_STORAGE_VERSION)})"
            )
            con.execute("USE catalog")
            con.execute(";\n".join(reader_statements(absolute, with_lineage=True)))
            con.execute("USE memory")
            con.execute("DETACH catalog")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return target
