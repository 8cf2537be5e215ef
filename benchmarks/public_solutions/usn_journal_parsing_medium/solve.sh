#!/bin/bash
# Events in the incident window, on executables and scripts, of the three operations, by time.
mkdir -p /forensics/output
python3 - <<'PY'
import csv
from datetime import datetime, timezone
start = datetime(2024, 1, 15, 14, 0, tzinfo=timezone.utc)
end = datetime(2024, 1, 15, 16, 30, tzinfo=timezone.utc)
exts = (".exe", ".dll", ".bat", ".ps1", ".vbs")
ops = {"FILE_CREATE", "DATA_OVERWRITE", "RENAME_NEW_NAME"}
rows = []
with open("/forensics/data/usn_entries.csv", newline="") as f:
    for r in csv.DictReader(f):
        t = datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))
        if start <= t <= end and r["file_path"].lower().endswith(exts) and r["operation"] in ops:
            rows.append((t, r["timestamp"], r["file_path"], r["operation"]))
seen, out = set(), []
for _, ts, path, op in sorted(rows):
    line = f"{ts}|{path}|{op}"
    if line not in seen:
        seen.add(line)
        out.append(line)
open("/forensics/output/timeline.txt", "w").write("\n".join(out) + "\n")
PY
