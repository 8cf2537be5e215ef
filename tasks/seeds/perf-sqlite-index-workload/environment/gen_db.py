"""Builds /app/analytics.db (20k users, 300k events, no secondary indexes) and writes the
query workload /app/workload.sql plus its current results /app/expected_results.txt."""
import random
import sqlite3
import subprocess

rng = random.Random(606)
db = sqlite3.connect("/app/analytics.db")
db.executescript("""
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL, country TEXT NOT NULL,
                    created_at TEXT NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, kind TEXT NOT NULL,
                     created_at TEXT NOT NULL, amount REAL NOT NULL);
""")
countries = ["DE", "FR", "US", "BR", "JP", "IN", "NG", "CA"]
db.executemany("INSERT INTO users VALUES (?,?,?,?)",
               ((i, f"user{i}@example.com", rng.choice(countries),
                 f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}") for i in range(1, 20001)))
kinds = ["view"] * 6 + ["purchase"] * 3 + ["refund"]


def ev(i):
    return (i, rng.randint(1, 20000), rng.choice(kinds),
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            round(rng.uniform(1, 500), 2))


db.executemany("INSERT INTO events VALUES (?,?,?,?,?)", (ev(i) for i in range(1, 300001)))
db.commit()
db.close()
open("/app/workload.sql", "w").write("""\
SELECT COUNT(*) FROM events WHERE user_id = 4711;
SELECT id, amount FROM events WHERE kind = 'refund' AND created_at >= '2024-03-01' AND created_at < '2024-03-04' ORDER BY created_at, id;
SELECT id, country FROM users WHERE email = 'user12345@example.com';
SELECT u.country, COUNT(*), ROUND(SUM(e.amount), 2) FROM events e JOIN users u ON u.id = e.user_id WHERE e.created_at >= '2024-06-01' AND e.created_at < '2024-06-02' GROUP BY u.country ORDER BY u.country;
SELECT MAX(created_at) FROM events WHERE user_id = 99 AND kind = 'purchase';
SELECT COUNT(*) FROM users WHERE country = 'NG' AND created_at >= '2023-07-01';
""")
with open("/app/expected_results.txt", "w") as f:
    subprocess.run(["sqlite3", "/app/analytics.db"], stdin=open("/app/workload.sql"), stdout=f, check=True)
