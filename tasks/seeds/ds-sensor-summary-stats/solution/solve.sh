#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json, statistics

def num(s):
    try:
        return float(s)
    except ValueError:
        return None

rows = list(csv.DictReader(open("/app/data/readings.csv", newline="")))
by = {}
pairs = []
bad = 0
for r in rows:
    t, h = num(r["temperature"]), num(r["humidity"])
    if t is None:
        bad += 1
    else:
        by.setdefault(r["sensor_id"], []).append(t)
        if h is not None:
            pairs.append((t, h))
out = {"rows": len(rows), "invalid_temperature": bad, "sensors": {}}
for sid, v in sorted(by.items()):
    out["sensors"][sid] = {
        "count": len(v), "mean": round(statistics.mean(v), 3),
        "median": round(statistics.median(v), 3), "stdev": round(statistics.stdev(v), 3),
        "min": round(min(v), 3), "max": round(max(v), 3),
    }
xs, ys = zip(*pairs)
out["temp_humidity_correlation"] = round(statistics.correlation(xs, ys), 3)
json.dump(out, open("/app/summary.json", "w"), indent=2)
PY
