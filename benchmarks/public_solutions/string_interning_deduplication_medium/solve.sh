#!/bin/bash
# Split each "[TIMESTAMP] LEVEL: message | user_id | endpoint" entry into its string
# fields, intern them in a dict, and compare memory before/after:
#   before = sum(len(s) + 8) over every instance
#   after  = sum(len(s) + 8) over unique strings + 4 bytes per reference (instance)
cd /workspace
cat > /workspace/dedup.py <<'PY'
import json
import re

LINE = re.compile(r"^\[(?P<ts>[^\]]*)\]\s*(?P<level>[A-Za-z]+):\s*(?P<rest>.*)$")

pool = {}          # the intern table: string -> the single stored instance
instances = []     # references into the pool, one per string occurrence

with open("/workspace/application.log", encoding="utf-8", errors="replace") as f:
    for raw in f:
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        m = LINE.match(line)
        if m:
            fields = [m["ts"], m["level"]] + [p.strip() for p in m["rest"].split("|")]
        else:
            fields = [p.strip() for p in line.split("|")]
        for s in fields:
            instances.append(pool.setdefault(s, s))

total = len(instances)
unique = len(pool)
before = sum(len(s) + 8 for s in instances)
after = sum(len(s) + 8 for s in pool) + 4 * total
report = {"total_strings": total, "unique_strings": unique, "memory_saved_bytes": before - after}
json.dump(report, open("/workspace/dedup_report.json", "w"), indent=2)
print(report)
PY
python3 /workspace/dedup.py
