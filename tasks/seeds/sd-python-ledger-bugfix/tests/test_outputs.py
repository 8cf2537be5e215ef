import csv
import hashlib
import os
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal

PROJ = "/app/ledger"
PRISTINE = {
    "tests/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "tests/test_journal.py": "2487b755a225e926db7220a65ee590f8acd14fa4e0cfdd062bc90aeec9e1dc99",
    "tests/test_money.py": "5524abc3c390a8d0b758f450aedd448f2e11b2abd0627684fd404db98706ad33",
    "tests/test_report.py": "f8b3b854ff0dc1ba181c310efed71351046f501fefe117c282b4fb2971ea93bc",
}
ACCOUNTS = ["assets:bank", "Expenses:Rent", "expenses:food", "income:salary", "Zeta", "alpha"]


def journal():
    """Rows (date, account, amount_text, exact_value, memo), deterministic."""
    rows = []
    for i in range(400):
        d = hashlib.sha256(str(i).encode()).digest()
        cents = int.from_bytes(d[:4], "big") % 500000 + 1
        whole, frac = divmod(cents, 100)
        mills = d[9] % 10
        txt = f"{whole}.{frac:02d}{mills}" if mills else f"{whole}.{frac:02d}"
        value = Decimal(txt).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        if whole >= 1000 and d[4] % 2:
            txt = f"{whole:,}.{frac:02d}"
            value = Decimal(f"{whole}.{frac:02d}")
        if d[5] % 3 == 0:
            txt = "$" + txt
        neg = d[6] % 2
        if neg:
            txt = f"({txt})" if d[7] % 2 or txt.startswith("$") else "-" + txt
            value = -value
        date = f"2024-{1 + d[8] % 6:02d}-{1 + d[10] % 28:02d}"
        memo = ["", "coffee, beans", 'said "hi"', "rent"][d[11] % 4]
        rows.append((date, ACCOUNTS[d[12] % len(ACCOUNTS)], " " + txt if d[13] % 5 == 0 else txt,
                     value, memo))
    return rows


def write_journal(rows):
    path = os.path.join(tempfile.mkdtemp(), "journal.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["date", "account", "amount", "memo"])
        for i, (date, acct, txt, _, memo) in enumerate(rows):
            w.writerow([date, acct, txt, memo])
            if i % 50 == 0:
                f.write("\n")
    return path


def expected(rows, since=None, until=None):
    bal = {}
    for date, acct, _, value, _ in rows:
        if (since and date < since) or (until and date > until):
            continue
        bal[acct] = bal.get(acct, Decimal(0)) + value
    lines = [f"{a}  {bal[a]:.2f}" for a in sorted(bal)]
    lines.append(f"TOTAL  {sum(bal.values(), Decimal(0)):.2f}")
    return "\n".join(lines) + "\n"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "ledger", "report", *args], cwd=PROJ,
                          capture_output=True, text=True, timeout=60)


def test_unit_tests_pass():
    r = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                       cwd=PROJ, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]


def test_tests_unchanged():
    for rel, digest in PRISTINE.items():
        with open(os.path.join(PROJ, rel), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, f"{rel} was modified"


def test_parse_amount_spec():
    code = ("from ledger.money import parse_amount as p; "
            "print(p('  ($12,345.675) '), p('$0.005'), p('-7'), p('1,000'), p('(3)'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=PROJ, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stdout.split() == ["-12345.68", "0.01", "-7.00", "1000.00", "-3.00"], r.stdout


def test_cli_full_report():
    rows = journal()
    r = cli(write_journal(rows))
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout == expected(rows), r.stdout[:500]


def test_cli_inclusive_date_filters():
    rows = journal()
    path = write_journal(rows)
    r = cli(path, "--since", "2024-02-15", "--until", "2024-04-03")
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout == expected(rows, "2024-02-15", "2024-04-03"), r.stdout[:500]
