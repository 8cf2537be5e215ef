#!/bin/bash
set -euo pipefail
cd /app/service
leaked=$(sed -n 's/^PAYMENT_API_KEY=//p' secrets.env)
want=$(awk '/issued prod-2024-01/ {sub("sha256=", "", $4); print $4}' /app/keyring/audit.log)
test "$(printf '%s' "$leaked" | sha256sum | cut -d' ' -f1)" = "$want"
echo "$leaked" > /app/leaked_key.txt

new="sk_live_$(openssl rand -hex 16)"
umask 077
printf 'PAYMENT_API_KEY=%s\n' "$new" > secrets.env
chmod 600 secrets.env
python3 - "$new" <<'PY'
import hashlib, json, sys
new = sys.argv[1]
path = "/app/keyring/keys.json"
keys = json.load(open(path))
for k in keys:
    if k["id"] == "prod-2024-01":
        k["status"] = "revoked"
keys.append({"id": "prod-2024-02", "sha256": hashlib.sha256(new.encode()).hexdigest(), "status": "active"})
json.dump(keys, open(path, "w"), indent=2)
PY
umask 022
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) issued prod-2024-02 sha256=$(printf '%s' "$new" | sha256sum | cut -d' ' -f1)" >> /app/keyring/audit.log
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) revoked prod-2024-01" >> /app/keyring/audit.log

export FILTER_BRANCH_SQUELCH_WARNING=1
git filter-branch -f --tree-filter \
  "grep -rlF '$leaked' . 2>/dev/null | xargs -r sed -i 's/$leaked/REDACTED/g'; true" \
  --tag-name-filter cat -- --all >/dev/null 2>&1
git for-each-ref --format='%(refname)' refs/original | xargs -r -n1 git update-ref -d
git reflog expire --expire=now --all
git gc -q --prune=now
git checkout -q main
! git cat-file --batch-all-objects --batch | grep -qF "$leaked"
