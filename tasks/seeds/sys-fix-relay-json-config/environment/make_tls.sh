#!/bin/bash
# A self-signed certificate for the relay; the key is left world-readable on purpose.
set -euo pipefail
mkdir -p /app/mqrelay/tls && cd /app/mqrelay/tls
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=relay.internal" \
  -keyout relay.key -out relay.crt >/dev/null 2>&1
chmod 644 relay.key relay.crt
