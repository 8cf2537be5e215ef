import csv
import json
import re

MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
HEADER = ["customer_id", "name", "email", "signup_date", "country"]


def iso(s):
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", s)
    if m:
        return s
    m = re.fullmatch(r"(\d{2})/(\d{2})/(\d{4})", s)
    if m:
        return f"{m[3]}-{m[2]}-{m[1]}"
    m = re.fullmatch(r"([A-Z][a-z]{2}) (\d{1,2}), (\d{4})", s)
    if m:
        return f"{m[3]}-{MONTHS.index(m[1]) + 1:02d}-{int(m[2]):02d}"
    m = re.fullmatch(r"(\d{4})(\d{2})(\d{2})", s)
    assert m, f"unexpected date {s!r}"
    return f"{m[1]}-{m[2]}-{m[3]}"


def expected():
    with open("/app/raw/customers.csv", encoding="utf-8", newline="") as f:
        raw = list(csv.reader(f))[1:]
    invalid = 0
    keep = {}
    for cid, name, email, date, country in raw:
        email = email.strip().lower()
        local, at, dom = email.partition("@")
        if email.count("@") != 1 or not local or "." not in dom:
            invalid += 1
            continue
        rec = [int(cid.strip()), " ".join(w.capitalize() for w in name.split()), email,
               iso(date.strip()), country.strip().upper()]
        if email not in keep or (rec[3], rec[0]) < (keep[email][3], keep[email][0]):
            keep[email] = rec
    rows = sorted(keep.values())
    return len(raw), invalid, rows


def output():
    with open("/app/clean/customers.csv", encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def test_header_and_sorted_ids():
    out = output()
    assert out[0] == HEADER, out[0]
    ids = [int(r[0]) for r in out[1:]]
    assert ids == sorted(ids), "not sorted by customer_id"


def test_deduplicated_rows_selected():
    _, _, rows = expected()
    got = [int(r[0]) for r in output()[1:]]
    assert got == [r[0] for r in rows], f"{len(got)} rows vs {len(rows)} expected (wrong rows kept)"


def test_fields_normalized():
    _, _, rows = expected()
    want = {r[0]: [str(r[0])] + r[1:] for r in rows}
    for r in output()[1:]:
        assert r == want.get(int(r[0])), f"{r} != {want.get(int(r[0]))}"


def test_report_counts():
    n, invalid, rows = expected()
    rep = json.load(open("/app/clean/report.json"))
    assert rep == {"input_rows": n, "invalid_email": invalid,
                   "duplicates_removed": n - invalid - len(rows), "output_rows": len(rows)}, rep
