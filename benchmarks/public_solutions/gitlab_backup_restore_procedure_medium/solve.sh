#!/bin/bash
# Restore the webapp from /var/backups/webapp/: copy the database, settings.conf and the
# public/ asset tree into /opt/webapp/{data,config,public} (replacing whatever partial files
# are there), create the parent directories, set ownership/permissions (db rw for webapp,
# config 0640 webapp-readable and not world-readable, assets world-readable), then verify
# each component: byte-identical to the backup, permissions checked as the webapp user /
# as nobody. The report says yes/no per component from those checks (the instruction's
# definition: restored to its target location with correct permissions). The database is
# also put through SQLite's integrity check; its result is printed as a warning only,
# because the backup's app.db is itself damaged (not a valid SQLite file) and restoring a
# backup cannot fix its content.
cd /root
SRC=/var/backups/webapp/
DST=/opt/webapp
id webapp >/dev/null 2>&1 || useradd -r -s /bin/false webapp

install -d -m 0755 -o root -g root /opt "$DST"
install -d -m 0750 -o webapp -g webapp "$DST/data"
install -d -m 0750 -o webapp -g webapp "$DST/config"
install -d -m 0755 -o root -g root "$DST/public"

# database: the backup's db file (first SQLite-looking file in the backup root)
DB_SRC=$(find "$SRC" -maxdepth 1 -type f \( -name '*.db' -o -name '*.sqlite' -o -name '*.sqlite3' \) | head -n1)
rm -f "$DST/data/app.db" "$DST/data/app.db-journal" "$DST/data/app.db-wal" "$DST/data/app.db-shm"
install -m 0660 -o webapp -g webapp "$DB_SRC" "$DST/data/app.db"

# configuration
CONF_SRC=$(find "$SRC" -maxdepth 1 -type f -name '*.conf' | head -n1)
install -m 0640 -o webapp -g webapp "$CONF_SRC" "$DST/config/settings.conf"

# assets
rm -rf "$DST/public"
cp -a "$SRC/public" "$DST/public"
chown -R root:root "$DST/public"
find "$DST/public" -type d -exec chmod 0755 {} +
find "$DST/public" -type f -exec chmod 0644 {} +

as_webapp() { su -s /bin/sh webapp -c "cd / && $1" 2>/dev/null || runuser -u webapp -- sh -c "cd / && $1" 2>/dev/null; }

# ---- verification ----
DB_OK=no
if cmp -s "$DB_SRC" "$DST/data/app.db" \
   && as_webapp "test -r $DST/data/app.db && test -w $DST/data/app.db"; then
  DB_OK=yes
fi
integ=$(python3 - "$DST/data/app.db" <<'PY'
import sqlite3, sys
try:
    c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    print(c.execute("PRAGMA integrity_check").fetchone()[0])
except Exception as e:
    print(f"error: {e}")
PY
)
[ "$integ" = "ok" ] || echo "WARNING: restored app.db (identical to the backup) fails SQLite's integrity check: $integ" >&2

CONF_OK=no
perm=$(stat -c %a "$DST/config/settings.conf")
if cmp -s "$CONF_SRC" "$DST/config/settings.conf" \
   && as_webapp "test -r $DST/config/settings.conf" \
   && [ $(( 0$perm & 04 )) -eq 0 ]; then
  CONF_OK=yes
fi

ASSETS_OK=no
if diff -r "$SRC/public" "$DST/public" >/dev/null \
   && [ -z "$(find "$DST/public" \( -type f ! -perm -0004 \) -o \( -type d ! -perm -0005 \))" ] \
   && su -s /bin/sh nobody -c "cd / && find $DST/public -type f -exec cat {} + >/dev/null" 2>/dev/null; then
  ASSETS_OK=yes
fi

printf 'BACKUP_SOURCE=%s\nDATABASE_RESTORED=%s\nCONFIG_RESTORED=%s\nASSETS_RESTORED=%s\n' \
  "$SRC" "$DB_OK" "$CONF_OK" "$ASSETS_OK" > /root/restore_report.txt
cat /root/restore_report.txt
