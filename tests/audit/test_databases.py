"""SQLite databases read as tables (`audit.databases`): views, which tables a run changed,
and the perturbations of a database input (pure, on the host)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from audit.databases import changed_views, is_sqlite, perturb, table_views, view_name


def _db(tmp_path: Path, sql: str) -> bytes:
    path = tmp_path / "x.db"
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.commit()
    con.close()
    return path.read_bytes()


SHOP = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, region TEXT);
INSERT INTO customers VALUES (1, 'Lia Wren', 'east'), (2, 'Oren Hart', 'north'),
  (3, 'Fay Reed', 'north'), (4, 'Pia Hart', 'east'), (5, 'Rae Reed', 'west');
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, status TEXT);
INSERT INTO orders VALUES (10, 1, 12.5, 'paid'), (11, 2, 40.25, 'void'), (12, 3, 7.0, 'paid');
"""


def _rows(data: bytes, tmp_path: Path, sql: str) -> list[tuple]:
    path = tmp_path / "read.db"
    path.write_bytes(data)
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_views_are_per_table_sorted_and_name_their_columns(tmp_path):
    views = table_views(_db(tmp_path, SHOP))
    assert sorted(views) == ["customers", "orders"]
    lines = views["customers"].splitlines()
    assert lines[0] == "id\tname\tregion"
    assert lines[1:] == sorted(lines[1:]) and "2\tOren Hart\tnorth" in lines
    assert table_views(b"id,name\n1,a\n") == {} and not is_sqlite(b"SQLite format 2")


def test_changed_views_are_the_tables_a_run_made_or_changed(tmp_path):
    before = table_views(_db(tmp_path, SHOP))
    after = table_views(
        _db(
            tmp_path,
            SHOP
            + "CREATE TABLE rollup (region TEXT, n INTEGER); INSERT INTO rollup VALUES ('east', 2);"
            + "UPDATE orders SET status = 'paid' WHERE id = 11;",
        )
    )
    assert sorted(changed_views("/app/shop.db", before, after)) == [
        view_name("/app/shop.db", "orders"),
        view_name("/app/shop.db", "rollup"),
    ]


def test_shift_digits_changes_every_number_and_keeps_the_schema(tmp_path):
    data = _db(tmp_path, SHOP)
    out = perturb(data, "shift-digits")
    assert _rows(out, tmp_path, "SELECT id, customer_id, amount FROM orders ORDER BY id") == [
        (21, 2, 23.6),
        (22, 3, 51.36),
        (23, 4, 8.1),
    ]
    schema = "SELECT sql FROM sqlite_master ORDER BY name"
    assert _rows(out, tmp_path, schema) == _rows(data, tmp_path, schema)


def test_drop_lines_drops_every_third_row_and_rot13_rotates_the_text(tmp_path):
    data = _db(tmp_path, SHOP)
    kept = _rows(perturb(data, "drop-lines"), tmp_path, "SELECT id FROM customers ORDER BY id")
    assert kept == [(1,), (2,), (4,), (5,)]
    rot = _rows(perturb(data, "rot13-words"), tmp_path, "SELECT region, status FROM customers "
                "JOIN orders ON orders.customer_id = customers.id ORDER BY orders.id")  # fmt: skip
    assert rot == [("rnfg", "cnvq"), ("abegu", "ibvq"), ("abegu", "cnvq")]


def test_a_row_a_constraint_refuses_once_perturbed_is_left_out_not_an_error(tmp_path):
    # 0 and 90 both shift to 1 (then 01): the unique key keeps one of them
    data = _db(tmp_path, "CREATE TABLE t (k INTEGER UNIQUE, v TEXT); "
               "INSERT INTO t VALUES (0, 'a'), (90, 'b'), (5, 'c');")  # fmt: skip
    got = _rows(perturb(data, "shift-digits"), tmp_path, "SELECT k FROM t ORDER BY k")
    assert got == [(1,), (6,)]


def test_data_that_is_not_a_database_comes_back_unchanged():
    assert perturb(b"a,b\n1,2\n", "shift-digits") == b"a,b\n1,2\n"
