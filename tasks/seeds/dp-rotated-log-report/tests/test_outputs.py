import gzip
import json
import os
import re
from collections import Counter, defaultdict

LOGS = "/app/logs"
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
FIELDS = ["request_id", "method", "path", "status", "duration_ms"]


def lines():
    for name in ("app.log", "app.log.1", "app.log.2.gz", "app.log.3.gz"):
        p = os.path.join(LOGS, name)
        data = gzip.open(p).read() if name.endswith(".gz") else open(p, "rb").read()
        text = data.decode("utf-8", "replace")
        yield from (text[:-1] if text.endswith("\n") else text).split("\n")


def parse_record(line):
    parts = line.split(" ", 3)
    if len(parts) < 4 or not TS.fullmatch(parts[0]) or parts[1] not in LEVELS:
        return None
    comp = parts[2]
    if not (comp.startswith("[") and comp.endswith("]") and re.fullmatch(r"[a-z]+", comp[1:-1])):
        return None
    return parts[0], parts[1], comp[1:-1], parts[3]


def parse_request(msg):
    kv = [f.split("=", 1) for f in msg.split(" ")]
    if [k[0] for k in kv] != FIELDS or any(len(k) != 2 or not k[1] for k in kv):
        return None
    d = dict(kv)
    if not (d["status"].isdigit() and d["duration_ms"].isdigit()):
        return None
    return d


def truth():
    t = {"records": 0, "malformed": 0, "levels": Counter({l: 0 for l in LEVELS}), "ts": [],
         "status": Counter(), "durs": defaultdict(list), "reqs": [], "errs": Counter()}
    for line in lines():
        if line[:1] in (" ", "\t"):
            continue
        rec = parse_record(line)
        if rec is None:
            t["malformed"] += 1
            continue
        ts, lvl, comp, msg = rec
        t["records"] += 1
        t["levels"][lvl] += 1
        t["ts"].append(ts)
        req = parse_request(msg) if comp == "http" else None
        if req:
            t["status"][req["status"]] += 1
            t["durs"][req["path"]].append(int(req["duration_ms"]))
            t["reqs"].append((int(req["duration_ms"]), req["request_id"]))
            if int(req["status"]) >= 500:
                t["errs"][ts[:13]] += 1
    return t


def report():
    with open("/app/report.json") as f:
        return json.load(f)


def test_record_and_malformed_counts():
    t, r = truth(), report()
    assert r["records"] == t["records"], (r["records"], t["records"])
    assert r["malformed_lines"] == t["malformed"], (r["malformed_lines"], t["malformed"])
    assert r["records_by_level"] == dict(t["levels"]), r["records_by_level"]


def test_time_range():
    t, r = truth(), report()
    assert (r["first_timestamp"], r["last_timestamp"]) == (min(t["ts"]), max(t["ts"]))


def test_requests_by_status():
    t, r = truth(), report()
    assert r["requests"] == len(t["reqs"]), r["requests"]
    assert r["requests_by_status"] == dict(t["status"]), r["requests_by_status"]


def test_p95_by_path():
    t, r = truth(), report()
    want = {}
    for p, ds in t["durs"].items():
        ds = sorted(ds)
        k = -(-95 * len(ds) // 100)  # ceil(0.95 * n), exact
        want[p] = ds[k - 1]
    assert r["p95_duration_ms_by_path"] == want, r["p95_duration_ms_by_path"]


def test_slowest_requests():
    t, r = truth(), report()
    want = [rid for _, rid in sorted(t["reqs"], key=lambda x: (-x[0], x[1]))[:5]]
    assert r["slowest_requests"] == want, r["slowest_requests"]


def test_server_errors_by_hour():
    t, r = truth(), report()
    assert r["server_errors_by_hour"] == dict(t["errs"]), r["server_errors_by_hour"]
    assert set(r) == {"records", "malformed_lines", "records_by_level", "first_timestamp",
                      "last_timestamp", "requests", "requests_by_status", "p95_duration_ms_by_path",
                      "slowest_requests", "server_errors_by_hour"}, sorted(r)
