#!/bin/bash
# Every customer Id over all pages, once, sorted numerically.
python3 - <<'PY'
import glob, json
ids = set()
for path in glob.glob("/workspace/qbo_exports/*.json"):
    doc = json.load(open(path))
    for c in doc.get("QueryResponse", {}).get("Customer", []) or []:
        ids.add(int(c["Id"]))
open("/tmp/all_customers.txt", "w").write("\n".join(str(i) for i in sorted(ids)) + "\n")
PY
