#!/bin/bash
# Inventory of deployed AWS resources across Terraform v4 state files:
# count instances of managed aws_* resources, environment = state file stem.
cd /workspace
cat > /tmp/inventory.py <<'PY'
import glob
import json
import os

types = {}
total = 0
for path in sorted(glob.glob("/workspace/terraform/states/*.tfstate")):
    env = os.path.basename(path)[: -len(".tfstate")]
    with open(path) as f:
        state = json.load(f)
    for res in state.get("resources", []):
        if res.get("mode", "managed") != "managed":  # data sources are not deployed resources
            continue
        rtype = res.get("type", "")
        if not rtype.startswith("aws_"):
            continue
        n = len(res.get("instances", []))
        if n == 0:
            continue
        entry = types.setdefault(rtype, {"count": 0, "environments": []})
        entry["count"] += n
        if env not in entry["environments"]:
            entry["environments"].append(env)
        total += n

for entry in types.values():
    entry["environments"].sort()
inventory = {"total_resources": total, "resource_types": dict(sorted(types.items()))}
with open("/workspace/inventory.json", "w") as f:
    json.dump(inventory, f, indent=2)
print(json.dumps(inventory, indent=2))
PY
python3 /tmp/inventory.py
