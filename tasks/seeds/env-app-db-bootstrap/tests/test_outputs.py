import configparser
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
APP = "/app/notes"
DB = "/app/notes/var/notes.db"


def migrations():
    out = []
    for name in os.listdir(os.path.join(APP, "migrations")):
        m = re.fullmatch(r"(\d+)_[\w-]+\.sql", name)
        if m:
            out.append((int(m.group(1)), name))
    return sorted(out)


def reference():
    path = os.path.join(tempfile.mkdtemp(), "ref.db")
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    for n, name in migrations():
        with open(os.path.join(APP, "migrations", name)) as f:
            con.executescript(f.read())
        con.execute("INSERT INTO schema_migrations VALUES (?, ?)", (n, name))
    con.commit()
    return con


def agent_db():
    assert os.path.isfile(DB), f"{DB} missing"
    return sqlite3.connect(f"file:{DB}?mode=ro", uri=True)


def objects(con):
    return {(t, n): " ".join((sql or "").split()) for t, n, sql in con.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}


def columns(con, table):
    return [(r[1], r[2].upper(), r[3], r[5]) for r in con.execute(f"PRAGMA table_info({table})")]


def test_settings_ini():
    cp = configparser.ConfigParser()
    assert cp.read(os.path.join(APP, "settings.ini")), "settings.ini missing"
    assert cp.get("database", "path") == DB
    assert cp.get("storage", "attachments_dir") == "/app/notes/var/attachments"
    assert cp.get("server", "port") == "8085"


def test_attachments_dir():
    assert os.path.isdir("/app/notes/var/attachments")


def test_schema_matches_reference():
    ref, got = reference(), agent_db()
    ref_objs, got_objs = objects(ref), objects(got)
    assert set(got_objs) == set(ref_objs), f"objects differ: {sorted(set(got_objs) ^ set(ref_objs))}"
    for t, name in ref_objs:
        if t == "table" and name != "schema_migrations":
            assert columns(got, name) == columns(ref, name), f"columns of {name} differ"
    assert columns(got, "schema_migrations") == columns(ref, "schema_migrations")


def test_data_matches_reference():
    ref, got = reference(), agent_db()
    for (t, name) in objects(ref):
        if t == "table" and name != "schema_migrations":
            q = f"SELECT * FROM {name} ORDER BY 1, 2"
            assert got.execute(q).fetchall() == ref.execute(q).fetchall(), f"rows of {name} differ"


def test_schema_migrations_recorded():
    rows = agent_db().execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert rows == migrations(), rows


def test_app_check_passes():
    with open(os.path.join(HERE, "app_pristine.py")) as f:
        src = f.read()
    marker = "HERE = os.path.dirname(os.path.abspath(__file__))"
    assert marker in src
    pristine = os.path.join(tempfile.mkdtemp(), "app.py")
    with open(pristine, "w") as f:
        f.write(src.replace(marker, f"HERE = {APP!r}"))
    r = subprocess.run([sys.executable, pristine, "check"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, NOTES_SETTINGS=os.path.join(APP, "settings.ini")))
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-600:]
