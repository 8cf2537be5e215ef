#!/bin/bash
set -euo pipefail
cd /app/deploy/units
cat > webapp.service <<'U'
[Unit]
Description=Web application
After=network.target network-online.target
Wants=network-online.target

[Service]
Type=simple
User=webapp
WorkingDirectory=/srv/webapp
ExecStart=/srv/webapp/venv/bin/gunicorn app:wsgi --bind 127.0.0.1:8000
Restart=on-failure
RestartSec=5s
Environment=APP_ENV=production
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
U
mkdir -p webapp.service.d
printf '[Service]\nEnvironment=APP_WORKERS=4\n' > webapp.service.d/override.conf
cat > backup.service <<'U'
[Unit]
Description=Nightly full backup

[Service]
Type=oneshot
User=root
Nice=10
ExecStart=/usr/local/bin/backup.sh --full
U
cat > backup.timer <<'U'
[Unit]
Description=Run the nightly full backup at 02:30

[Timer]
OnCalendar=*-*-* 02:30:00
Persistent=true
Unit=backup.service

[Install]
WantedBy=timers.target
U
python3 /app/deploy/unitcheck.py /app/deploy/units
