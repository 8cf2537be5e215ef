#!/bin/bash
set -euo pipefail
cd /app/notes
mkdir -p var/attachments
sed -e 's|^path = .*|path = /app/notes/var/notes.db|' \
    -e 's|^attachments_dir = .*|attachments_dir = /app/notes/var/attachments|' \
    -e 's|^port = .*|port = 8085|' settings.ini.example > settings.ini
rm -f var/notes.db
sqlite3 var/notes.db 'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL);'
for f in $(ls migrations | grep -E '^[0-9]+_[A-Za-z0-9_-]+\.sql$' | sort -t_ -k1,1n); do
  n=${f%%_*}
  { echo "BEGIN;"; cat "migrations/$f"; echo "INSERT INTO schema_migrations VALUES ($((10#$n)), '$f');"; echo "COMMIT;"; } \
    | sqlite3 -bail var/notes.db
done
python3 app.py check
