#!/bin/bash
set -euo pipefail
mkdir -p /app/clean
python3 - <<'PY'
import csv, datetime, json

MON = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

def date(s):
    if "-" in s:
        return datetime.date.fromisoformat(s)
    if "/" in s:
        d, m, y = map(int, s.split("/"))
        return datetime.date(y, m, d)
    if "," in s:
        md, y = s.split(",")
        m, d = md.split()
        return datetime.date(int(y), MON[m], int(d))
    return datetime.date(int(s[:4]), int(s[4:6]), int(s[6:]))

def valid(e):
    if e.count("@") != 1:
        return False
    local, dom = e.split("@")
    return bool(local) and "." in dom

rows = list(csv.DictReader(open("/app/raw/customers.csv", encoding="utf-8", newline="")))
invalid, best = 0, {}
for r in rows:
    r = {k: v.strip() for k, v in r.items()}
    e = r["email"].lower()
    if not valid(e):
        invalid += 1
        continue
    rec = {"customer_id": int(r["customer_id"]),
           "name": " ".join(w[:1].upper() + w[1:].lower() for w in r["name"].split()),
           "email": e, "signup_date": date(r["signup_date"]).isoformat(),
           "country": r["country"].upper()}
    cur = best.get(e)
    if cur is None or (rec["signup_date"], rec["customer_id"]) < (cur["signup_date"], cur["customer_id"]):
        best[e] = rec
out = sorted(best.values(), key=lambda r: r["customer_id"])
with open("/app/clean/customers.csv", "w", newline="") as f:
    w = csv.DictWriter(f, ["customer_id", "name", "email", "signup_date", "country"], lineterminator="\n")
    w.writeheader()
    w.writerows(out)
valid_n = len(rows) - invalid
json.dump({"input_rows": len(rows), "invalid_email": invalid,
           "duplicates_removed": valid_n - len(out), "output_rows": len(out)},
          open("/app/clean/report.json", "w"), indent=2)
PY
