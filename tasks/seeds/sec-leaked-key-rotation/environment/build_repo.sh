#!/bin/bash
# Builds /app/service (a git repo whose history leaks a live API key on two branches and a
# tag), the key registry /app/keyring/ and the deployed secrets file.
set -euo pipefail
key="sk_live_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
old="sk_live_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

mkdir -p /app/keyring
cat > /app/keyring/keys.json <<JSON
[
  {"id": "prod-2023-07", "sha256": "$(sha "$old")", "status": "revoked"},
  {"id": "prod-2024-01", "sha256": "$(sha "$key")", "status": "active"}
]
JSON
cat > /app/keyring/audit.log <<LOG
2023-07-01T09:00:00Z issued prod-2023-07 sha256=$(sha "$old")
2024-01-05T09:00:00Z issued prod-2024-01 sha256=$(sha "$key")
2024-01-05T09:00:10Z revoked prod-2023-07
LOG

mkdir -p /app/service && cd /app/service
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
commit() { git add -A && git commit -q -m "$1"; }
cat > app.py <<'PY'
import os


def api_key():
    with open(os.path.join(os.path.dirname(__file__), "secrets.env")) as f:
        for line in f:
            if line.startswith("PAYMENT_API_KEY="):
                return line.split("=", 1)[1].strip()
    raise RuntimeError("PAYMENT_API_KEY missing")
PY
mkdir -p config
printf 'LOG_LEVEL=info\nREGION=eu-west-1\n' > config/settings.env
commit "service skeleton"
printf 'LOG_LEVEL=info\nREGION=eu-west-1\nPAYMENT_API_KEY=%s\nPAYMENT_TIMEOUT=15\n' "$key" > config/settings.env
commit "configure payment provider"
printf '# Payments\n\nSmoke test:\n\n    curl -H "Authorization: Bearer %s" https://pay.example/v1/ping\n' "$key" > PAYMENTS.md
commit "document payment smoke test"
git tag -a v1.0 -m "release 1.0"
git checkout -q -b feature/metrics
printf 'def count(name):\n    return name\n' > metrics.py
commit "metrics: counter stub"
printf 'METRICS_PORT=9100\n' >> config/settings.env
commit "metrics: expose port"
git checkout -q main
printf 'LOG_LEVEL=info\nREGION=eu-west-1\nPAYMENT_TIMEOUT=15\n' > config/settings.env
sed -i "s/$key/\$PAYMENT_API_KEY/" PAYMENTS.md
printf 'secrets.env\n' > .gitignore
commit "move payment key out of the repo"
printf '\ndef healthy():\n    return bool(api_key())\n' >> app.py
commit "add health check"
printf 'PAYMENT_API_KEY=%s\n' "$key" > secrets.env
chmod 644 secrets.env
git config --unset user.email
git config --unset user.name
