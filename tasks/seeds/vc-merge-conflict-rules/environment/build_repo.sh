#!/bin/bash
# Builds /app/webapp: main and feature/rate-limits diverge from a common base and conflict
# in config.ini and CHANGELOG.md.
set -euo pipefail
mkdir -p /app/webapp && cd /app/webapp
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
commit() { git add -A && git commit -q -m "$1"; }

cat > config.ini <<'INI'
[server]
host = 0.0.0.0
port = 8080
workers = 4
timeout = 30

[rates]
limit_per_minute = 120
burst = 20
window_seconds = 60
INI
cat > CHANGELOG.md <<'MD'
# Changelog

## Unreleased

- Initial service skeleton.

## 0.9.0

- Internal preview.
MD
cat > app.py <<'PY'
import configparser


def load(path="config.ini"):
    cfg = configparser.ConfigParser()
    cfg.read(path)
    return cfg
PY
commit "base: service skeleton"

git checkout -q -b feature/rate-limits
cat > ratelimit.py <<'PY'
import time


class TokenBucket:
    def __init__(self, rate, burst):
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = burst, time.monotonic()

    def allow(self):
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
PY
commit "rates: add token bucket"
sed -i 's/^limit_per_minute = 120/limit_per_minute = 300/; s/^burst = 20/burst = 50/' config.ini
sed -i 's/^- Initial service skeleton.$/- Initial service skeleton.\n- Add token-bucket rate limiter./' CHANGELOG.md
commit "rates: raise limits"
sed -i 's/^window_seconds = 60/window_seconds = 30/; s/^workers = 4/workers = 6/' config.ini
sed -i 's/^- Add token-bucket rate limiter.$/- Add token-bucket rate limiter.\n- Shorten the rate window to 30 s./' CHANGELOG.md
commit "rates: shorter window, more workers"

git checkout -q main
sed -i 's/^port = 8080/port = 8443/' config.ini
sed -i 's/^- Initial service skeleton.$/- Initial service skeleton.\n- Serve on port 8443 (TLS)./' CHANGELOG.md
commit "server: move to 8443"
sed -i 's/^workers = 4/workers = 8/; s/^burst = 20/burst = 10/; s/^timeout = 30/timeout = 45/' config.ini
sed -i 's/^- Serve on port 8443 (TLS).$/- Serve on port 8443 (TLS).\n- Tune worker count and timeout./' CHANGELOG.md
cat >> app.py <<'PY'


def bind_address(cfg):
    return cfg["server"]["host"], int(cfg["server"]["port"])
PY
commit "server: tune workers, add bind_address"
git config --unset user.email
git config --unset user.name
