#!/bin/bash
set -euo pipefail
mkdir -p /app/logs
chmod +x /app/jobs/*.sh
cat > /app/cron/app.crontab <<'CRON'
SHELL=/bin/bash
MAILTO=ops@example.com
# m    h     dom   mon          dow  command
*/15   8-17  *     *            1-5  /app/jobs/rotate.sh
30     6     *     *            1    /app/jobs/report.sh --weekly
0      3     1,15  *            *    /app/jobs/cleanup.sh
*/5    *     *     *            *    /app/jobs/sync.sh >> /app/logs/sync.log 2>&1
0      12    1     *            6,0  /app/jobs/snapshot.sh
5      0     1     1,4,7,10     *    /app/jobs/quarterly.sh
CRON
