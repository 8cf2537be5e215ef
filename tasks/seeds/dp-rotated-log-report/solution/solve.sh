#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import gzip, json, math, re
from collections import Counter, defaultdict

REC = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z) (DEBUG|INFO|WARN|ERROR) \[([a-z]+)\] (.*)")
REQ = re.compile(r"request_id=(\S+) method=(\S+) path=(\S+) status=(\d+) duration_ms=(\d+)")
files = ["app.log.3.gz", "app.log.2.gz", "app.log.1", "app.log"]
records = malformed = 0
levels = Counter({l: 0 for l in ("DEBUG", "INFO", "WARN", "ERROR")})
stamps, status, durs, reqs, errs = [], Counter(), defaultdict(list), [], Counter()
for name in files:
    path = "/app/logs/" + name
    raw = gzip.open(path).read() if name.endswith(".gz") else open(path, "rb").read()
    for line in raw.decode("utf-8", "replace").split("\n")[:-1]:
        if line[:1] in (" ", "\t"):
            continue
        m = REC.fullmatch(line)
        if not m:
            malformed += 1
            continue
        ts, lvl, comp, msg = m.groups()
        records += 1
        levels[lvl] += 1
        stamps.append(ts)
        r = REQ.fullmatch(msg) if comp == "http" else None
        if r:
            rid, _, p, st, d = r.groups()
            status[st] += 1
            durs[p].append(int(d))
            reqs.append((int(d), rid))
            if int(st) >= 500:
                errs[ts[:13]] += 1
p95 = {}
for p, ds in durs.items():
    ds.sort()
    p95[p] = ds[math.ceil(0.95 * len(ds)) - 1]
out = {
    "records": records, "malformed_lines": malformed, "records_by_level": dict(levels),
    "first_timestamp": min(stamps), "last_timestamp": max(stamps),
    "requests": len(reqs), "requests_by_status": dict(status),
    "p95_duration_ms_by_path": p95,
    "slowest_requests": [rid for _, rid in sorted(reqs, key=lambda x: (-x[0], x[1]))[:5]],
    "server_errors_by_hour": dict(errs),
}
json.dump(out, open("/app/report.json", "w"), indent=2)
PY
