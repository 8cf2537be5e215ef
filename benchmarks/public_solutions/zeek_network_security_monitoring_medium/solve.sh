#!/bin/bash
# Parse the Zeek conn.log by its #fields header; among outbound connections (private source,
# public destination) score each by how far its duration and bytes sit from the rest
# (robust z-scores of the logs) and how rare its destination port is; report the top one.
python3 - <<'PY'
import ipaddress
import json
import math
import statistics
from collections import Counter

fields, rows = None, []
for line in open("/home/agent/conn.log", errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("#fields"):
        fields = line.split("\t")[1:]
        continue
    if not line or line.startswith("#"):
        continue
    rows.append(dict(zip(fields, line.split("\t"))))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def private(ip):
    try:
        return ipaddress.ip_address(ip).is_private
    except ValueError:
        return False


out = [r for r in rows if private(r["id.orig_h"]) and not private(r["id.resp_h"])]
feats = {
    "duration": [math.log1p(num(r.get("duration"))) for r in out],
    "bytes": [math.log1p(num(r.get("orig_bytes")) + num(r.get("resp_bytes"))) for r in out],
}


def robust_z(xs):
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs) or 1e-9
    return [(x - med) / (1.4826 * mad) for x in xs]


z = {k: robust_z(v) for k, v in feats.items()}
ports = Counter(r["id.resp_p"] for r in out)
best, best_score = None, -1
for i, r in enumerate(out):
    score = max(z["duration"][i], 0) + max(z["bytes"][i], 0) + 3 * (1 - ports[r["id.resp_p"]] / len(out))
    if score > best_score:
        best, best_score = r, score

dur = num(best.get("duration"))
sent, recv = int(num(best.get("orig_bytes"))), int(num(best.get("resp_bytes")))
typical = statistics.median(num(r.get("duration")) for r in out)
reason = (f"Long-lived {best.get('proto', 'tcp')} session of {dur / 3600:.1f} hours "
          f"(typical outbound connection: {typical:.1f} s) to an external host on uncommon port "
          f"{best['id.resp_p']}, moving {sent} bytes out and {recv} bytes in, consistent with a "
          f"persistent command-and-control or exfiltration channel.")
result = {
    "source_ip": best["id.orig_h"],
    "destination_ip": best["id.resp_h"],
    "destination_port": int(best["id.resp_p"]),
    "reason": reason,
}
json.dump(result, open("/home/agent/suspicious_connection.json", "w"), indent=2)
print(json.dumps(result, indent=2))
PY
