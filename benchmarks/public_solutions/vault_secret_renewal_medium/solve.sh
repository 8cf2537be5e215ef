#!/bin/bash
# Leases that have used 70% or more of their TTL.
python3 - <<'PY'
import json
leases = json.load(open("/home/agent/vault_state.json"))
due = [l["lease_id"] for l in leases if (l["ttl"] - l["expire_time"]) >= 0.7 * l["ttl"]]
json.dump({"lease_ids": due, "count": len(due)}, open("/home/agent/renewal_request.json", "w"), indent=2)
PY
