#!/usr/bin/env python3
"""todo - a tiny task tracker backed by sqlite.

The database path is taken from the TODO_DB environment variable (default: todo.db next to
this script). Commands:
  todo.py add TITLE [--due YYYY-MM-DD] [--tag TAG ...]   prints the new task id
  todo.py done ID                                        marks a task as done
  todo.py list                                           open tasks, one per line
"""

import argparse
import datetime
import os
import sqlite3
import sys

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    due TEXT,
    done INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tags (
    task_id INTEGER NOT NULL REFERENCES tasks(id),
    tag TEXT NOT NULL,
    UNIQUE (task_id, tag)
);
"""


def connect():
    path = os.environ.get("TODO_DB") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "todo.db")
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    return db


def cmd_add(db, args):
    if args.due:
        datetime.date.fromisoformat(args.due)
    cur = db.execute("INSERT INTO tasks (title, due) VALUES (?, ?)", (args.title, args.due))
    for tag in args.tag or []:
        db.execute("INSERT OR IGNORE INTO tags (task_id, tag) VALUES (?, ?)", (cur.lastrowid, tag))
    db.commit()
    print(cur.lastrowid)


def cmd_done(db, args):
    cur = db.execute("UPDATE tasks SET done = 1 WHERE id = ?", (args.id,))
    db.commit()
    if cur.rowcount == 0:
        print(f"no task {args.id}", file=sys.stderr)
        return 1
    return 0


def cmd_list(db, args):
    for tid, title, due in db.execute("SELECT id, title, due FROM tasks WHERE done = 0 ORDER BY id"):
        print(f"{tid:>4}  {title}" + (f"  (due {due})" if due else ""))


def main(argv=None):
    p = argparse.ArgumentParser(prog="todo.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add")
    a.add_argument("title")
    a.add_argument("--due")
    a.add_argument("--tag", action="append")
    d = sub.add_parser("done")
    d.add_argument("id", type=int)
    sub.add_parser("list")
    args = p.parse_args(argv)
    db = connect()
    handler = {"add": cmd_add, "done": cmd_done, "list": cmd_list}[args.cmd]
    return handler(db, args) or 0


if __name__ == "__main__":
    sys.exit(main())
