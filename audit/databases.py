"""SQLite databases as inputs and outputs of a task, read on the host (the image needs no
sqlite3 of its own).

A database the instruction names is data the solution works from, like a text input, and
often also where its answer goes (a table it creates or fills). Its *views* make it both:

- `table_views`: one canonical text per table (its columns, then its rows sorted), so an
  output is a table, not the file: the file's bytes change with any write (page counters,
  free lists), a table's view only with its content;
- `perturb`: the same perturbations the text inputs get (`audit.perturbation`), applied to
  every table's cells: digits shifted, every third row dropped, letters rotated.

A view is named `<path>::<table>` (`view_name`), so the shortcut, leak and answer evidence
reads a table as it reads a file.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from audit.perturbation import ROT13

HEADER = b"SQLite format 3\x00"
MAX_ROWS = 2000  # rows read per table view
MAX_VIEW_CHARS = 65536
SEP = "::"


def is_sqlite(data: bytes) -> bool:
    return data.startswith(HEADER)


def view_name(path: str, table: str) -> str:
    return f"{path}{SEP}{table}"


def view_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def _opened(data: bytes) -> Iterator[tuple[sqlite3.Connection, str]]:
    fd, path = tempfile.mkstemp(suffix=".sqlite")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        con = sqlite3.connect(path)
        try:
            yield con, path
        finally:
            con.close()
    finally:
        for p in (path, path + "-journal", path + "-wal", path + "-shm"):
            if os.path.exists(p):
                os.unlink(p)


def _tables(con: sqlite3.Connection) -> list[str]:
    rows = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _cell(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return "x'" + v.hex()[:64] + "'"
    return str(v).replace("\t", "\\t").replace("\n", "\\n")


def table_views(data: bytes) -> dict[str, str]:
    """{table: text} of a SQLite database's tables: the column names, then every row as
    tab-separated cells, sorted (row order is the engine's, not the answer's), at most
    `MAX_ROWS` rows and `MAX_VIEW_CHARS` characters. {} for data that is not a database."""
    if not is_sqlite(data):
        return {}
    out: dict[str, str] = {}
    try:
        with _opened(data) as (con, _):
            for t in _tables(con):
                try:
                    cur = con.execute(f"SELECT * FROM {_quote(t)} LIMIT {MAX_ROWS}")
                    cols = [d[0] for d in cur.description or ()]
                    rows = sorted("\t".join(_cell(v) for v in r) for r in cur.fetchall())
                except sqlite3.Error:
                    continue  # a virtual table whose module is not here
                out[t] = ("\t".join(cols) + "\n" + "\n".join(rows))[:MAX_VIEW_CHARS]
    except sqlite3.Error:
        return {}
    return out


def changed_views(path: str, before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """The tables of `path` a run created or changed ({view name: text after})."""
    return {view_name(path, t): v for t, v in sorted(after.items()) if before.get(t) != v}


_SHIFT = str.maketrans("0123456789", "1234567890")


def _shift(v: object) -> object:
    if isinstance(v, bool) or v is None or isinstance(v, bytes):
        return v
    if isinstance(v, int):
        return int(str(v).translate(_SHIFT))
    if isinstance(v, float):
        try:
            return float(repr(v).translate(_SHIFT))
        except ValueError:
            return v
    return str(v).translate(_SHIFT)


def _rot(v: object) -> object:
    return v.translate(ROT13) if isinstance(v, str) else v


def perturb(data: bytes, mode: str) -> bytes:
    """The database with every table's cells perturbed like a text input's (`mode`:
    `shift-digits`, `drop-lines`: every third row after the first, `rot13-words`). Rows a
    constraint refuses once perturbed are left out (`INSERT OR IGNORE`); the schema, indexes
    and triggers are kept. Data that is not a database comes back unchanged."""
    if not is_sqlite(data) or mode not in ("shift-digits", "drop-lines", "rot13-words"):
        return data
    try:
        with _opened(data) as (con, path):
            for t in _tables(con):
                q = _quote(t)
                try:
                    rows = con.execute(f"SELECT * FROM {q}").fetchall()
                except sqlite3.Error:
                    continue
                if mode == "drop-lines":
                    new = [r for i, r in enumerate(rows) if i == 0 or (i + 1) % 3 != 0]
                else:
                    cell = _shift if mode == "shift-digits" else _rot
                    new = [tuple(cell(v) for v in r) for r in rows]
                if not rows:
                    continue
                marks = ", ".join("?" * len(rows[0]))
                try:
                    with con:  # one transaction a table: a table refused keeps its rows
                        con.execute(f"DELETE FROM {q}")
                        con.executemany(f"INSERT OR IGNORE INTO {q} VALUES ({marks})", new)
                except sqlite3.Error:
                    continue
            con.commit()
            with open(path, "rb") as out:
                return out.read()
    except sqlite3.Error:
        return data
