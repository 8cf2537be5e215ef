#!/bin/bash
# Some job scripts arrive without their executable bit (as after a careless copy).
set -euo pipefail
chmod 644 /app/jobs/cleanup.sh /app/jobs/snapshot.sh /app/jobs/quarterly.sh
mkdir -p /app/cron
