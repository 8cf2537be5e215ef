#!/bin/bash
# Builds /app/ledger and then simulates three accidents: a dropped stash, a force-deleted
# branch and a `git reset --hard HEAD~2` on main.
set -euo pipefail
mkdir -p /app/ledger && cd /app/ledger
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
commit() { git add -A && git commit -q -m "$1"; }

cat > ledger.py <<'PY'
import csv


def load(path):
    with open(path, newline="") as f:
        return [dict(r, amount=float(r["amount"])) for r in csv.DictReader(f)]
PY
printf 'date,account,amount\n2024-01-02,cash,100.0\n2024-01-03,bank,-40.5\n' > entries.csv
echo "# Ledger" > README.md
commit "ledger: initial loader"
for i in 1 2 3 4 5; do echo "- change $i" >> README.md; commit "docs: changelog entry $i"; done

git checkout -q -b feature/report HEAD~2
cat > report.py <<'PY'
from ledger import load


def by_account(rows):
    out = {}
    for r in rows:
        out[r["account"]] = out.get(r["account"], 0.0) + r["amount"]
    return out
PY
commit "report: sum by account"
cat >> report.py <<'PY'


def render(totals):
    return "\n".join(f"{k}: {v:.2f}" for k, v in sorted(totals.items()))
PY
commit "report: text renderer"
echo "Run python3 report.py to print totals." >> README.md
commit "report: document usage"
cat >> report.py <<'PY'


def export_csv(totals, path):
    with open(path, "w") as f:
        f.write("account,total\n")
        for k, v in sorted(totals.items()):
            f.write(f"{k},{v:.2f}\n")
PY
commit "report: add CSV export"

# Work in progress that gets stashed and then dropped.
cat >> report.py <<'PY'


def export_json(totals, path):
    import json

    with open(path, "w") as f:
        json.dump({k: round(v, 2) for k, v in sorted(totals.items())}, f, indent=2)
PY
echo "JSON export: export_json(totals, 'totals.json')." >> README.md
git stash push -q -m "export json"
git stash drop -q

git checkout -q main
git branch -q -D feature/report

cat >> ledger.py <<'PY'


def totals(rows):
    return round(sum(r["amount"] for r in rows), 2)
PY
commit "ledger: add totals"
cat >> ledger.py <<'PY'


def balanced(rows):
    return abs(totals(rows)) < 1e-9
PY
commit "ledger: add balance check"
git reset -q --hard HEAD~2
git config --unset user.email
git config --unset user.name
