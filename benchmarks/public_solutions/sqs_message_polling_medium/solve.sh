#!/bin/bash
# One line per order (the instruction's first line names the fields). Each message file holds
# one order object or a list of them: every order is written once
# (first occurrence of its order_id), and a message file is deleted once its orders are out.
python3 - <<'PY'
import glob, json, os

QUEUE, OUT = "/var/queue/messages", "/tmp/processed_orders.txt"
seen = set()
with open(OUT, "w") as out:
    for path in sorted(glob.glob(os.path.join(QUEUE, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for order in data if isinstance(data, list) else [data]:
            oid = order.get("order_id")
            if oid is None or oid in seen:
                continue
            seen.add(oid)
            out.write(f"{oid},{order.get('customer_name')},{order.get('amount')}\n")
        out.flush()
        os.remove(path)  # acknowledged: deleted once processed
PY
