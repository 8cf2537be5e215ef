import csv
import json
import sqlite3
from collections import defaultdict

DB = "file:/app/shop.db?mode=ro"


def truth():
    db = sqlite3.connect(DB, uri=True)
    country = {cid: (name, c) for cid, name, c in db.execute("SELECT id, name, country FROM customers")}
    rev = defaultdict(float)
    for oid, q, p in db.execute("SELECT order_id, quantity, unit_price FROM order_items"):
        rev[oid] += q * p
    monthly = defaultdict(lambda: [0, 0.0])
    per_cust = defaultdict(float)
    for oid, cid, ts, st in db.execute("SELECT id, customer_id, created_at, status FROM orders"):
        if st != "completed" or not ts.startswith("2023-"):
            continue
        key = (country[cid][1], ts[:7])
        monthly[key][0] += 1
        monthly[key][1] += rev[oid]
        per_cust[cid] += rev[oid]
    return country, monthly, per_cust


def report_rows():
    with open("/app/monthly_revenue.csv", newline="") as f:
        return list(csv.reader(f))


def test_monthly_header_and_order():
    _, monthly, _ = truth()
    rows = report_rows()
    assert rows[0] == ["country", "month", "orders", "revenue"], rows[0]
    keys = [(r[0], r[1]) for r in rows[1:]]
    assert keys == sorted(monthly), "rows missing, extra or not sorted by country, month"


def test_monthly_order_counts():
    _, monthly, _ = truth()
    for c, m, n, _ in report_rows()[1:]:
        assert int(n) == monthly[(c, m)][0], (c, m, n, monthly[(c, m)][0])


def test_monthly_revenue_values():
    _, monthly, _ = truth()
    for c, m, _, r in report_rows()[1:]:
        assert len(r.split(".")[-1]) == 2 and "." in r, f"revenue not 2 decimals: {r}"
        assert abs(float(r) - monthly[(c, m)][1]) <= 0.01, (c, m, r, monthly[(c, m)][1])


def test_top_customers():
    country, _, per_cust = truth()
    want = sorted(per_cust, key=lambda cid: (-round(per_cust[cid], 6), cid))[:5]
    got = json.load(open("/app/top_customers.json"))
    assert [g["customer_id"] for g in got] == want, [g["customer_id"] for g in got]
    for g in got:
        cid = g["customer_id"]
        assert (g["name"], g["country"]) == country[cid], g
        assert abs(g["revenue"] - per_cust[cid]) <= 0.01, (g, per_cust[cid])


def test_database_unmodified():
    db = sqlite3.connect(DB, uri=True)
    counts = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
              for t in ("customers", "orders", "order_items")]
    assert counts[0] == 300 and counts[1] == 6000, counts
