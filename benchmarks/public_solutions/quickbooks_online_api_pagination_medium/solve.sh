#!/bin/bash
# Every customer Id over all pages, once, sorted numerically.
python3 - <<'PY'
import glob, json
ids = set()
for path in glob.glob("/workspace/qbo_exports/*.json"):
    doc = json.load(open(path))
    # a page is the API's response object, or its bare list of customers
    customers = doc.get("QueryResponse", {}).get("Customer", []) if isinstance(doc, dict) else doc
    for c in customers or []:
        ids.add(int(c["Id"]))
open("/tmp/all_customers.txt", "w").write("\n".join(str(i) for i in sorted(ids)) + "\n")
PY
