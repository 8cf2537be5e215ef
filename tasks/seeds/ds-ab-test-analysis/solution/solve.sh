#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import glob, json, math
assign, buys, spend = {}, set(), {}
for path in sorted(glob.glob("/app/events/*.jsonl")):
    for line in open(path):
        e = json.loads(line)
        u = e["user"]
        if e["type"] == "assign":
            assign.setdefault(u, set()).add(e["variant"])
        elif e["type"] == "purchase":
            buys.add(u)
            spend[u] = spend.get(u, 0.0) + e["amount"]
internal = {u for u in assign if u.startswith("qa-")} | {u for u in buys if u.startswith("qa-")}
both = {u for u, v in assign.items() if len(v) > 1 and u not in internal}
out = {"excluded_users": {"internal": len(internal), "both_variants": len(both)}}
for var in "AB":
    users = [u for u, v in assign.items() if v == {var} and u not in internal]
    conv = [u for u in users if u in buys]
    out[var] = {"users": len(users), "conversions": len(conv),
                "conversion_rate": len(conv) / len(users),
                "revenue": round(sum(spend.get(u, 0.0) for u in users), 2)}
nA, nB = out["A"]["users"], out["B"]["users"]
xA, xB = out["A"]["conversions"], out["B"]["conversions"]
p = (xA + xB) / (nA + nB)
z = (xB / nB - xA / nA) / math.sqrt(p * (1 - p) * (1 / nA + 1 / nB))
pv = math.erfc(abs(z) / math.sqrt(2))
out.update(absolute_lift=xB / nB - xA / nA, z=z, p_value=pv, significant=pv < 0.05)
json.dump(out, open("/app/ab_result.json", "w"), indent=2)
PY
