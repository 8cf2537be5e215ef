#!/bin/bash
# Diagnose the growing queue from the captured data: final depth from queue_stats,
# the point where the ack rate collapsed, and the dominant consumer-side error.
cat > /tmp/diagnose.py <<'PY'
import json
import re
from collections import Counter

D = "/var/log/rabbitmq_diagnostics/"
stats = json.load(open(D + "queue_stats.json"))
stats.sort(key=lambda s: s["timestamp"])
final = stats[-1]
depth = final["messages"]

# Where did consumption fall behind publishing?  (ack rate drop vs. the first sample)
base_ack = stats[0]["ack_rate"]
drop = next((s for s in stats if s["ack_rate"] < 0.5 * base_ack), None)

# Consumer log: most frequent ERROR message and when it first appeared
line_re = re.compile(r"^(\S+ \S+) \[(\w+)\] (.*)$")
errors, first_seen, warns = Counter(), {}, Counter()
for line in open(D + "consumer_logs.txt"):
    m = line_re.match(line.strip())
    if not m:
        continue
    ts, level, msg = m.groups()
    key = re.sub(r"\d+", "N", msg)
    if level == "ERROR":
        errors[msg] += 1
        first_seen.setdefault(msg, ts)
    elif level in ("WARN", "WARNING"):
        warns[key] += 1
        first_seen.setdefault(key, ts)

top_err, top_n = errors.most_common(1)[0] if errors else (None, 0)
consumers = final.get("consumers")

if top_err and "pool exhausted" in top_err.lower():
    pool = re.search(r"All (\d+) database connections in use", open(D + "consumer_logs.txt").read())
    size = f" ({pool.group(1)} connections)" if pool else ""
    slow = next((k for k in warns if "slow" in k.lower()), None)
    cause = (f"Consumer database connection pool{size} exhausted - slow DB queries hold every connection, "
             f"so consumers block waiting for a connection and ack only ~{final['ack_rate']}/s vs "
             f"{final['publish_rate']}/s published")
    evidence = (f"consumer_logs.txt shows \"{top_err}\" {top_n} times from {first_seen[top_err]}"
                + (f" after slow-query warnings from {first_seen[slow]}" if slow else "")
                + (f"; queue_stats.json ack_rate fell from {base_ack} to {drop['ack_rate']} at {drop['timestamp']}"
                   f" with {consumers} consumers still attached, consumer_utilisation {final['consumer_utilisation']}" if drop else ""))
elif top_err:
    cause = f"Consumers failing with: {top_err}"
    evidence = f"consumer_logs.txt shows \"{top_err}\" {top_n} times from {first_seen[top_err]}"
else:
    cause = f"Consumers ack {final['ack_rate']}/s while {final['publish_rate']}/s are published"
    evidence = f"queue_stats.json ack_rate {final['ack_rate']} vs publish_rate {final['publish_rate']}"

with open("/root/diagnosis.txt", "w") as f:
    f.write(f"QUEUE_DEPTH: {depth}\nROOT_CAUSE: {cause}\nEVIDENCE: {evidence}\n")
print(open("/root/diagnosis.txt").read())
PY
python3 /tmp/diagnose.py
