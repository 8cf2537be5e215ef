#!/bin/bash
# Authorization-code grant against the mock token endpoint (started from the provided
# script when nothing is listening on :9090).
cd /workspace
if ! curl -s -o /dev/null http://localhost:9090/health 2>/dev/null && \
   ! python3 -c "import urllib.request; urllib.request.urlopen('http://localhost:9090/health', timeout=2)" 2>/dev/null; then
    nohup python3 /opt/oauth2_mock/server.py > /tmp/oauth2_mock.log 2>&1 &
    for _ in $(seq 1 50); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://localhost:9090/health', timeout=1)" 2>/dev/null && break
        sleep 0.2
    done
fi
python3 - <<'PY'
import json
import urllib.error
import urllib.parse
import urllib.request

lines = [l.strip() for l in open("/workspace/client_credentials.txt") if l.strip()]
client_id, client_secret = lines[0], lines[1]
code = open("/workspace/auth_code.txt").read().strip()
body = urllib.parse.urlencode({
    "grant_type": "authorization_code",
    "code": code,
    "client_id": client_id,
    "client_secret": client_secret,
}).encode()
req = urllib.request.Request("http://localhost:9090/token", data=body,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
result = {"access_token": "", "success": False}
try:
    with urllib.request.urlopen(req, timeout=10) as resp:
        payload = json.load(resp)
    token = payload.get("access_token") or ""
    result = {"access_token": token, "success": bool(token)}
except urllib.error.HTTPError as e:
    print("token endpoint error:", e.code, e.read().decode(errors="replace"))
except Exception as e:
    print("request failed:", e)
json.dump(result, open("/tmp/oauth_result.json", "w"))
print("success:", result["success"])
PY
