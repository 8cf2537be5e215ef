import re
from collections import defaultdict

LOG = "/app/logs/access.log"
HEADER = "method,path,requests,errors,total_bytes,avg_ms"
LINE = re.compile(
    r'^(\S+) - - \[[^\]]+\] "([A-Z]+) (\S+) (HTTP/[\d.]+)" (\d{3}) (\d+|-) "[^"]*" "[^"]*" (\d+)$'
)


def expected():
    stats = defaultdict(lambda: [0, 0, 0, 0])
    skipped = 0
    with open(LOG) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                skipped += 1
                continue
            _, method, target, _, status, size, ms = m.groups()
            s = stats[(method, target.split("?", 1)[0])]
            s[0] += 1
            s[1] += int(status) >= 400
            s[2] += 0 if size == "-" else int(size)
            s[3] += int(ms)
    rows = {k: (v[0], v[1], v[2], v[3] // v[0]) for k, v in stats.items()}
    return rows, skipped


def report_lines():
    with open("/app/report.csv", newline="") as f:
        text = f.read()
    assert "\r" not in text, "use Unix newlines"
    return text.rstrip("\n").split("\n")


def parsed_rows():
    rows = {}
    for line in report_lines()[1:]:
        parts = line.split(",")
        assert len(parts) == 6, f"bad row {line!r}"
        rows[(parts[0], parts[1])] = tuple(int(x) for x in parts[2:])
    return rows


def test_header_exact():
    assert report_lines()[0] == HEADER


def test_one_row_per_method_path_pair():
    exp, _ = expected()
    got = parsed_rows()
    assert len(report_lines()) - 1 == len(got), "duplicate (method, path) rows"
    assert set(got) == set(exp), f"missing {set(exp) - set(got)}, extra {set(got) - set(exp)}"


def test_requests_and_errors_counts():
    exp, _ = expected()
    got = parsed_rows()
    bad = [k for k in exp if k not in got or got[k][:2] != exp[k][:2]]
    assert not bad, f"wrong requests/errors for {bad[:5]}"


def test_total_bytes_and_avg_ms():
    exp, _ = expected()
    got = parsed_rows()
    bad = [k for k in exp if k not in got or got[k][2:] != exp[k][2:]]
    assert not bad, f"wrong total_bytes/avg_ms for {bad[:5]}"


def test_sort_order():
    rows = [line.split(",") for line in report_lines()[1:]]
    keys = [(-int(r[2]), r[0], r[1]) for r in rows]
    assert keys == sorted(keys), "rows are not sorted by requests desc, method, path"


def test_skipped_count():
    _, skipped = expected()
    with open("/app/skipped.txt") as f:
        text = f.read()
    assert text == f"{skipped}\n", f"expected {skipped}, got {text!r}"
