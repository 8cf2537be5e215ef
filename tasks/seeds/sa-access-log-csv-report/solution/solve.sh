#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import re
from collections import defaultdict

pat = re.compile(r'^(\S+) - - \[[^\]]+\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+|-) "[^"]*" "[^"]*" (\d+)$')
stats = defaultdict(lambda: [0, 0, 0, 0])
skipped = 0
with open("/app/logs/access.log") as f:
    for line in f:
        m = pat.match(line.rstrip("\n"))
        if not m:
            skipped += 1
            continue
        _, method, target, _, status, size, ms = m.groups()
        s = stats[(method, target.split("?", 1)[0])]
        s[0] += 1
        s[1] += int(status) >= 400
        s[2] += 0 if size == "-" else int(size)
        s[3] += int(ms)
rows = sorted(stats.items(), key=lambda kv: (-kv[1][0], kv[0][0], kv[0][1]))
with open("/app/report.csv", "w") as out:
    out.write("method,path,requests,errors,total_bytes,avg_ms\n")
    for (method, path), (n, err, b, ms) in rows:
        out.write(f"{method},{path},{n},{err},{b},{ms // n}\n")
with open("/app/skipped.txt", "w") as out:
    out.write(f"{skipped}\n")
PY
