#!/bin/bash
# Parse the JSONL audit log (flat records or real audit.k8s.io Events), count 401/403
# responses, Secret accesses, the user with most failures, and the earliest failure.
mkdir -p /home/agent
cat > /tmp/k8s_audit.py <<'PY'
import json
from collections import Counter
from datetime import datetime


def field(ev, *paths):
    for path in paths:
        cur = ev
        for key in path.split("."):
            cur = cur.get(key) if isinstance(cur, dict) else None
        if cur is not None:
            return cur
    return None


def parse_ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


failed, secret = 0, 0
fails_by_user = Counter()
first = None
for line in open("/var/log/kubernetes/audit.log", errors="replace"):
    line = line.strip()
    if not line:
        continue
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        continue
    status = field(ev, "responseStatus.code", "responseStatus", "code", "status")
    try:
        status = int(status)
    except (TypeError, ValueError):
        status = None
    user = field(ev, "user.username", "user", "username")
    resource = field(ev, "objectRef.resource", "resource", "kind") or ""
    ts = field(ev, "requestReceivedTimestamp", "stageTimestamp", "timestamp")

    if str(resource).lower() in ("secret", "secrets"):
        secret += 1
    if status in (401, 403):
        failed += 1
        fails_by_user[str(user)] += 1
        if ts and (first is None or parse_ts(ts) < parse_ts(first)):
            first = ts

most = max(fails_by_user.items(), key=lambda kv: (kv[1], kv[0]))[0] if fails_by_user else ""
report = {
    "failed_auth_count": failed,
    "secret_access_attempts": secret,
    "most_suspicious_user": most,
    "first_incident_time": first or "",
}
json.dump(report, open("/home/agent/security_report.json", "w"), indent=2)
print(report, dict(fails_by_user))
PY
python3 /tmp/k8s_audit.py
