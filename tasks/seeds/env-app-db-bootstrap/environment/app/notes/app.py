#!/usr/bin/env python3
"""notes app - `python3 app.py check` verifies the environment, `python3 app.py stats` reports.

Settings are read from $NOTES_SETTINGS, default: settings.ini next to this file."""
import configparser
import os
import re
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def settings():
    path = os.environ.get("NOTES_SETTINGS") or os.path.join(HERE, "settings.ini")
    cp = configparser.ConfigParser()
    if not cp.read(path):
        raise SystemExit(f"cannot read settings {path}")
    return cp


def migrations():
    out = {}
    for name in os.listdir(os.path.join(HERE, "migrations")):
        m = re.fullmatch(r"(\d+)_[\w-]+\.sql", name)
        if m:
            out[int(m.group(1))] = name
    return out


def check():
    cp = settings()
    problems = []
    db_path = cp.get("database", "path", fallback="")
    if not os.path.isabs(db_path) or not os.path.isfile(db_path):
        problems.append(f"database.path: {db_path!r} is not an existing absolute path")
    else:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            applied = dict(con.execute("SELECT version, name FROM schema_migrations"))
        except sqlite3.Error as e:
            applied = {}
            problems.append(f"schema_migrations: {e}")
        if applied != migrations():
            missing = sorted(set(migrations()) - set(applied))
            problems.append(f"schema_migrations does not match migrations/ (missing {missing})")
        if con.execute("PRAGMA foreign_key_check").fetchall():
            problems.append("foreign key violations")
    att = cp.get("storage", "attachments_dir", fallback="")
    if not (os.path.isabs(att) and os.path.isdir(att) and os.access(att, os.W_OK)):
        problems.append(f"storage.attachments_dir: {att!r} is not a writable directory")
    port = cp.get("server", "port", fallback="")
    if not (port.isdigit() and 1024 <= int(port) <= 65535):
        problems.append(f"server.port: {port!r} is not an integer in 1024-65535")
    for p in problems:
        print(p)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def stats():
    con = sqlite3.connect(settings().get("database", "path"))
    for table in ("users", "notes", "tags"):
        print(table, con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    sys.exit({"check": check, "stats": stats}.get(cmd, lambda: print(__doc__) or 2)())
