#!/bin/bash
set -euo pipefail
cd /app/mqrelay
cat > config.json <<'JSON'
{
  "listen": {"host": "0.0.0.0", "port": 8443},
  "workers": 4,
  "log": {"level": "WARNING", "file": "/app/mqrelay/logs/relay.log"},
  "upstreams": {
    "api": {"url": "http://10.0.0.10:8080", "timeout_ms": 5000},
    "billing-v2": {"url": "http://10.0.0.12:9100", "timeout_ms": 8000},
    "auth": {"url": "https://auth.internal:8443", "timeout_ms": 3000},
    "cdn": {"url": "http://cdn.internal:80", "timeout_ms": 2000},
    "reporting": {"url": "http://10.0.0.20:7000", "timeout_ms": 10000}
  },
  "routes": [
    {"prefix": "/static", "upstream": "cdn"},
    {"prefix": "/billing", "upstream": "billing-v2"},
    {"prefix": "/auth", "upstream": "auth"},
    {"prefix": "/api", "upstream": "api"},
    {"prefix": "/reports", "upstream": "reporting"}
  ],
  "tls": {"enabled": true, "cert": "/app/mqrelay/tls/relay.crt", "key": "/app/mqrelay/tls/relay.key"}
}
JSON
mkdir -p logs
chmod 600 tls/relay.key
python3 validate.py
