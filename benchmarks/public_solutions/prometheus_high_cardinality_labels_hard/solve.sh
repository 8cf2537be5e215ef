#!/bin/bash
# Sum the series counts per metric name; the largest total.
mkdir -p /solution
python3 - <<'PY'
totals = {}
for line in open("/data/prometheus_metrics.txt"):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    head, _, count = line.rpartition(" ")
    name = head.split("{", 1)[0]
    totals[name] = totals.get(name, 0) + int(count)
name = max(totals, key=totals.get)
open("/solution/result.txt", "w").write(f"{name}\n{totals[name]}\n")
PY
