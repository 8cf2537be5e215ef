"""Read-only snapshots: a private in-memory DuckDB connection whose views read Parquet parts.

A snapshot reads `_meta.json` once and binds every view to exactly the parts it names, so a
reader sees one committed generation however many writers commit meanwhile, and never touches
a lock or a DuckDB database file (any number of processes read at once, each with its own
connection). It installs the lineage views and macros of `warehouse.lineage`; their index
(`task_edges`, `lineage_nodes`) is built in memory on first use (`ensure_lineage_index`).

A snapshot stays valid while its parts exist: parts retired by a compaction are kept for the
store's retire grace period (an hour by default). Long-lived readers (a web server) should open
a fresh snapshot per request or per refresh, which is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

import warehouse.lineage as lineage
from warehouse.store import Manifest, Store
from warehouse.views import reader_statements


@dataclass
class QueryResult:
    """All rows of one query, fetched."""

    columns: list[str]
    rows: list[tuple]

    def fetchall(self) -> list[tuple]:
        return self.rows

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        """The first column of the first row (a count, a max); ValueError when no row."""
        if not self.rows:
            raise ValueError("the query returned no row")
        return self.rows[0][0]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class Snapshot:
    """One consistent, read-only view of a store; use as a context manager or `close()`."""

    def __init__(
        self,
        store: Store,
        manifest: Manifest,
        con: duckdb.DuckDBPyConnection,
        *,
        with_lineage: bool = True,
    ) -> None:
        self.store = store
        self.manifest = manifest
        self.con = con
        self.with_lineage = with_lineage
        self.lineage_indexed = False

    def ensure_lineage_index(self) -> None:
        """Build the in-memory lineage index once (see `warehouse.lineage.build_index`)."""
        if not self.lineage_indexed:
            if not self.with_lineage:
                raise ValueError("this snapshot was opened with with_lineage=False")
            lineage.build_index(self.con)
            self.lineage_indexed = True

    @classmethod
    def open(
        cls,
        store: Store | Path | str | None = None,
        *,
        manifest: Manifest | None = None,
        lineage_index: bool = False,
        with_lineage: bool = True,
    ) -> Snapshot:
        """Snapshot of `store` (a Store, a path, or None for the default location).

        `manifest` pins the generation (writers use it to read under their lock);
        `lineage_index=True` builds the in-memory lineage index now rather than on first use;
        `with_lineage=False` leaves out the lineage views and macros altogether.
        """
        if not isinstance(store, Store):
            store = Store.open(store)
        if manifest is None:
            manifest = store.read_manifest()
        con = duckdb.connect(":memory:")
        try:
            con.execute("SET enable_progress_bar = false")
            con.execute("SET TimeZone = 'UTC'")
            statements = reader_statements(store.part_files(manifest), with_lineage=with_lineage)
            con.execute(";\n".join(statements))
        except BaseException:
            con.close()
            raise
        snap = cls(store, manifest, con, with_lineage=with_lineage)
        if lineage_index and with_lineage:
            snap.ensure_lineage_index()
        return snap

    @property
    def generation(self) -> int:
        return self.manifest.generation

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> QueryResult:
        """Run `query` and fetch all of its rows (DuckDB 2 refuses new work on a connection
        while a result is only partly fetched, so results are never left open)."""
        cur = self.con.execute(query, params) if params is not None else self.con.execute(query)
        columns = [d[0] for d in cur.description] if cur.description else []
        return QueryResult(columns=columns, rows=cur.fetchall())

    def arrow(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pa.Table:
        return self.con.sql(query, params=params).to_arrow_table()

    def rows(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> list[dict]:
        """Result rows as dicts (column name -> Python value)."""
        return self.sql(query, params).dicts()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_snapshot(store: Store | Path | str | None = None) -> Snapshot:
    """Shorthand for `Snapshot.open(store)`."""
    return Snapshot.open(store)
