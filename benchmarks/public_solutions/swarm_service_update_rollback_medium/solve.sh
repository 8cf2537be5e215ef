#!/bin/bash
# The most recent deployment (by timestamp) whose status is success.
mkdir -p /solution
python3 - <<'PY'
import json
history = json.load(open("/var/log/service_history.json"))
ok = [d for d in history if d.get("status") == "success"]
last = max(ok, key=lambda d: d["timestamp"])
json.dump({"image": last["image"], "replicas": last["replicas"], "version": last["version"]},
          open("/solution/recovery_config.json", "w"), indent=2)
PY
