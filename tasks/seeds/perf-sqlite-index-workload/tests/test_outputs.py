import os
import shutil
import sqlite3
import subprocess
import tempfile

DB = "/app/analytics.db"
WORKLOAD = [
    "SELECT COUNT(*) FROM events WHERE user_id = 4711;",
    "SELECT id, amount FROM events WHERE kind = 'refund' AND created_at >= '2024-03-01' AND created_at < '2024-03-04' ORDER BY created_at, id;",
    "SELECT id, country FROM users WHERE email = 'user12345@example.com';",
    "SELECT u.country, COUNT(*), ROUND(SUM(e.amount), 2) FROM events e JOIN users u ON u.id = e.user_id WHERE e.created_at >= '2024-06-01' AND e.created_at < '2024-06-02' GROUP BY u.country ORDER BY u.country;",
    "SELECT MAX(created_at) FROM events WHERE user_id = 99 AND kind = 'purchase';",
    "SELECT COUNT(*) FROM users WHERE country = 'NG' AND created_at >= '2023-07-01';",
]


def scans(db_path):
    db = sqlite3.connect(db_path)
    bad = []
    for q in WORKLOAD:
        for row in db.execute("EXPLAIN QUERY PLAN " + q):
            if row[3].startswith("SCAN"):
                bad.append((q[:60], row[3]))
    db.close()
    return bad


def user_indexes(db_path):
    db = sqlite3.connect(db_path)
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
    db.close()
    return [r[0] for r in rows]


def test_workload_unchanged():
    lines = open("/app/workload.sql").read().splitlines()
    assert lines == WORKLOAD, "workload.sql was modified"


def test_no_full_scans_in_database():
    bad = scans(DB)
    assert not bad, f"full scans remain: {bad}"


def test_index_budget():
    names = user_indexes(DB)
    assert 1 <= len(names) <= 6, f"{len(names)} indexes: {names}"


def test_indexes_sql_reproduces_plans():
    d = tempfile.mkdtemp()
    copy = os.path.join(d, "a.db")
    shutil.copy(DB, copy)
    db = sqlite3.connect(copy)
    for name in user_indexes(copy):
        db.execute(f'DROP INDEX "{name}"')
    db.execute("DROP TABLE IF EXISTS sqlite_stat1")
    db.commit()
    db.close()
    assert scans(copy), "sanity: without indexes the workload should scan"
    r = subprocess.run(["sqlite3", copy], stdin=open("/app/indexes.sql"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-400:]
    assert len(user_indexes(copy)) <= 6
    bad = scans(copy)
    assert not bad, f"with only indexes.sql applied, full scans remain: {bad}"


def test_results_and_data_intact():
    out = subprocess.run(["sqlite3", DB], stdin=open("/app/workload.sql"), capture_output=True, text=True)
    assert out.stdout == open("/app/expected_results.txt").read(), "workload output changed"
    db = sqlite3.connect(DB)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 300000
    assert db.execute("SELECT COUNT(*) FROM users").fetchone()[0] == 20000
