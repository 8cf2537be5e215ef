#!/bin/bash
set -euo pipefail
cd /app
cat > indexes.sql <<'SQL'
CREATE INDEX IF NOT EXISTS idx_events_user_kind_created ON events(user_id, kind, created_at);
CREATE INDEX IF NOT EXISTS idx_events_kind_created ON events(kind, created_at);
CREATE INDEX IF NOT EXISTS idx_events_created ON events(created_at);
CREATE INDEX IF NOT EXISTS idx_users_email ON users(email);
CREATE INDEX IF NOT EXISTS idx_users_country_created ON users(country, created_at);
SQL
sqlite3 analytics.db < indexes.sql
sqlite3 analytics.db 'ANALYZE;'
while IFS= read -r q; do sqlite3 analytics.db "EXPLAIN QUERY PLAN $q"; done < workload.sql
sqlite3 analytics.db < workload.sql | diff - expected_results.txt
