#!/bin/bash
# Check each profile against the five criteria; a missing or unparseable file is invalid.
mkdir -p /solution
python3 - <<'PY'
import json, os

def valid(path):
    if not os.path.exists(path):
        return False
    try:
        doc = json.load(open(path))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    if not isinstance(doc, dict):
        return False
    c2 = doc.get("c2")
    if not isinstance(c2, list) or not c2:
        return False
    for server in c2:
        url = server.get("url") if isinstance(server, dict) else None
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "dns://")):
            return False
    interval, jitter = doc.get("callback_interval"), doc.get("jitter")
    if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
        return False
    return isinstance(jitter, int) and not isinstance(jitter, bool) and 0 <= jitter <= 100

result = {n: "VALID" if valid(f"/profiles/{n}.json") else "INVALID"
          for n in ("profile_red", "profile_blue", "profile_green")}
json.dump(result, open("/solution/validation.json", "w"), indent=2)
PY
