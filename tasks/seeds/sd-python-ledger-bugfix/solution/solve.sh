#!/bin/bash
set -euo pipefail
cd /app/ledger
cat > ledger/money.py <<'PY'
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def parse_amount(text):
    """Parse an amount such as '12.5', '-3', '$1,234.50' or '(12.00)' into a Decimal."""
    s = text.strip()
    negative = False
    if s.startswith("(") and s.endswith(")"):
        negative, s = True, s[1:-1].strip()
    if s.startswith("$"):
        s = s[1:]
    value = Decimal(s.replace(",", "")).quantize(CENT, rounding=ROUND_HALF_UP)
    return -value if negative else value


def format_amount(value):
    """Format a Decimal with exactly two decimals, e.g. Decimal('-3') -> '-3.00'."""
    return str(Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP))
PY
cat > ledger/journal.py <<'PY'
import csv
import datetime
from dataclasses import dataclass
from decimal import Decimal

from ledger.money import parse_amount


@dataclass
class Txn:
    date: datetime.date
    account: str
    amount: Decimal
    memo: str


def load_csv(path):
    """Read a journal CSV (header: date,account,amount,memo) into a list of Txn."""
    txns = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("date"):
                continue
            txns.append(Txn(datetime.date.fromisoformat(row["date"].strip()), row["account"],
                            parse_amount(row["amount"]), row.get("memo") or ""))
    return txns
PY
cat > ledger/report.py <<'PY'
from decimal import Decimal

from ledger.money import format_amount


def balances(txns, since=None, until=None):
    """Sum amounts per account for transactions with since <= date <= until."""
    out = {}
    for t in txns:
        if since is not None and t.date < since:
            continue
        if until is not None and t.date > until:
            continue
        out[t.account] = out.get(t.account, Decimal("0")) + t.amount
    return out


def render(bal):
    """One 'ACCOUNT  AMOUNT' line per account sorted by account, then a TOTAL line."""
    lines = [f"{acct}  {format_amount(bal[acct])}" for acct in sorted(bal)]
    total = sum(bal.values(), Decimal("0"))
    lines.append(f"TOTAL  {format_amount(total)}")
    return "\n".join(lines) + "\n"
PY
python3 -m unittest discover -s tests -t .
