import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

TODO = "/app/todo/todo.py"
TASKS = [
    ("Buy milk", None, ["home"]),
    ("Write report, part 1", "2024-06-30", ["work", "urgent"]),
    ('Call "Bob"', None, []),
    ("Fix bike", "2024-07-02", ["home", "errands"]),
    ("Renew passport", "2024-09-01", ["admin"]),
    ("Plan trip; book hotel", None, ["home", "travel", "admin"]),
    ("Review PR #42", "2024-06-28", ["work"]),
]
DONE = {2, 5}
_db = {}


def run(*args, db):
    env = dict(os.environ, TODO_DB=db)
    return subprocess.run([sys.executable, TODO, *args], capture_output=True, text=True,
                          env=env, timeout=30)


def database():
    if "path" not in _db:
        path = os.path.join(tempfile.mkdtemp(), "verify.db")
        for title, due, tags in TASKS:
            args = ["add", title] + (["--due", due] if due else [])
            for t in tags:
                args += ["--tag", t]
            assert run(*args, db=path).returncode == 0
        for tid in DONE:
            assert run("done", str(tid), db=path).returncode == 0
        _db["path"] = path
    return _db["path"]


def expected(status="all", tag=None):
    con = sqlite3.connect(database())
    out = []
    for tid, title, due, done in con.execute("SELECT id, title, due, done FROM tasks ORDER BY id"):
        tags = sorted(t for (t,) in con.execute("SELECT tag FROM tags WHERE task_id=?", (tid,)))
        st = "done" if done else "open"
        if status != "all" and st != status or (tag and tag not in tags):
            continue
        out.append({"id": tid, "title": title, "due": due, "status": st, "tags": tags})
    return out


def expected_csv(rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "title", "due", "status", "tags"])
    for r in rows:
        w.writerow([r["id"], r["title"], r["due"] or "", r["status"], ";".join(r["tags"])])
    return buf.getvalue()


def test_export_csv_all():
    r = run("export", "--format", "csv", db=database())
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stdout == expected_csv(expected()), r.stdout


def test_export_json_all():
    r = run("export", "--format", "json", db=database())
    assert r.returncode == 0, r.stderr[-800:]
    assert json.loads(r.stdout) == expected()


def test_status_filter():
    for status in ("open", "done"):
        r = run("export", "--format", "json", "--status", status, db=database())
        assert r.returncode == 0, r.stderr[-800:]
        assert json.loads(r.stdout) == expected(status=status), status


def test_tag_filter_combined_with_status():
    r = run("export", "--format", "csv", "--tag", "home", "--status", "open", db=database())
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stdout == expected_csv(expected(status="open", tag="home")), r.stdout


def test_invalid_format_exits_2():
    r = run("export", "--format", "xml", db=database())
    assert r.returncode == 2, f"exit status {r.returncode}"


def test_existing_commands_still_work():
    path = os.path.join(tempfile.mkdtemp(), "other.db")
    assert run("add", "first", "--due", "2024-01-05", db=path).stdout == "1\n"
    assert run("add", "second", "--tag", "x", db=path).stdout == "2\n"
    assert run("done", "1", db=path).returncode == 0
    assert run("done", "99", db=path).returncode == 1
    assert run("list", db=path).stdout == "   2  second\n"
