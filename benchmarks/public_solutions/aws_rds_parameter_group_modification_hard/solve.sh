#!/bin/bash
# Review the exported parameter group against MySQL 8.0 best practice for ~500
# concurrent users and emit only parameters whose current value violates a rule.
cd /opt/rds
cat > /tmp/review_params.py <<'PY'
import json

raw = json.load(open("/opt/rds/current_params.json"))
# export is either {"name": "value"} or [{"parameter_name": .., "parameter_value": ..}]
if isinstance(raw, dict):
    params = {k: str(v) for k, v in raw.items()}
else:
    params = {p["parameter_name"]: str(p["parameter_value"]) for p in raw}

MB, GB = 1024 ** 2, 1024 ** 3
USERS = 500


def num(name):
    try:
        return int(float(params[name]))
    except (KeyError, ValueError):
        return None


# (parameter, predicate on the current value meaning "problem", recommended value, why)
RULES = [
    ("max_connections", lambda v: v is not None and v < USERS,
     str(int(USERS * 1.2)), "below the 500 concurrent users (+20% headroom) -> connection failures"),
    ("innodb_buffer_pool_size", lambda v: v is not None and v < 1 * GB,
     str(8 * GB), "128MB pool cannot cache a production working set -> slow queries, disk I/O"),
    ("query_cache_type", lambda v: params.get("query_cache_type") not in (None, "0", "OFF"),
     "0", "query cache was removed in MySQL 8.0; setting it is invalid/inconsistent"),
    ("innodb_flush_log_at_trx_commit", lambda v: v is not None and v != 1,
     "1", "0 loses up to a second of committed transactions on crash (stability/durability)"),
    ("wait_timeout", lambda v: v is not None and v < 300,
     "28800", "30s idle timeout drops pooled application connections -> connection errors"),
    ("max_allowed_packet", lambda v: v is not None and v < 16 * MB,
     str(64 * MB), "4MB packets fail on large result sets / rows"),
    ("innodb_log_file_size", lambda v: v is not None and v < 256 * MB,
     str(512 * MB), "48MB redo log forces frequent checkpoints under write-heavy traffic"),
    ("tmp_table_size", lambda v: v is not None and v < 64 * MB,
     str(64 * MB), "16MB in-memory temp tables spill large sorts/group-bys to disk"),
    ("max_heap_table_size", lambda v: v is not None and v < 64 * MB,
     str(64 * MB), "must match tmp_table_size (the smaller of the two is the effective limit)"),
]

fixes = {}
for name, bad, rec, why in RULES:
    if name not in params:
        continue
    if bad(num(name)) and params[name] != rec:
        fixes[name] = rec
        print(f"{name}: {params[name]} -> {rec}  ({why})")

json.dump({"count": len(fixes), "fixes": fixes}, open("/opt/rds/fix_params.json", "w"), indent=2)
PY
python3 /tmp/review_params.py
cat /opt/rds/fix_params.json
