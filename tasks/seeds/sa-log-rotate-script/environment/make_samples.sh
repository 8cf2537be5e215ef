#!/bin/bash
# Sample logs for the agent to experiment on.
set -euo pipefail
mkdir -p /app/logs && cd /app/logs
for i in $(seq 1 400); do echo "2024-05-01T10:00:$((i % 60)) INFO request $i served"; done > app.log
printf 'old rotation one\n' > app.log.1
printf 'old rotation two\n' | gzip -n > app.log.2.gz
echo "small" > quiet.log
for i in $(seq 1 300); do echo "worker tick $i"; done > "batch worker.log"
chmod 640 "batch worker.log"
