#!/bin/bash
# Early-exit comparison => time grows with the length of the correct prefix.
# Recover the password one position at a time: given the known prefix P, group the
# attempts that start with P by their next character and keep the character whose
# attempts are slowest on average (median-robust mean over repeated samples).
cat > /tmp/timing.py <<'PY'
import csv
import re
import statistics
from collections import defaultdict

samples = defaultdict(list)
with open("/var/data/timing_measurements.csv", newline="") as f:
    for row in csv.DictReader(f):
        pw = (row.get("password") or "").strip()
        try:
            t = float(row.get("time_us"))
        except (TypeError, ValueError):
            continue
        if re.fullmatch(r"[a-z]{8}", pw):
            samples[pw].append(t)

# one robust value per distinct attempt
timing = {pw: statistics.median(v) for pw, v in samples.items()}

prefix = ""
for pos in range(8):
    groups = defaultdict(list)
    for pw, t in timing.items():
        if pw.startswith(prefix):
            groups[pw[pos]].append(t)
    if not groups:
        break
    # score: mean time of attempts continuing with c (ties -> more evidence)
    best = max(groups, key=lambda c: (statistics.mean(groups[c]), len(groups[c])))
    prefix += best
    print(pos, best, round(statistics.mean(groups[best]), 1), len(groups[best]))

assert len(prefix) == 8, prefix
with open("/tmp/solution.txt", "w") as f:
    f.write(prefix + "\n")
print(prefix)
PY
python3 /tmp/timing.py
