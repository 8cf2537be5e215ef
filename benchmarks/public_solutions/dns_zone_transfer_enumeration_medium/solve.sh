#!/bin/bash
# Records of the zone (the apex's SOA and NS left out), distinct owner names, MX records.
python3 - <<'PY'
import json, re
records = []
for line in open("/tmp/zone_transfer.txt"):
    m = re.match(r"^(\S+)\s+\d+\s+IN\s+([A-Z]+)\s+(.+)$", line.strip())
    if m:
        records.append((m.group(1).rstrip(".").lower(), m.group(2)))
apex = next((name for name, rtype in records if rtype == "SOA"), None)
counted = [(n, t) for n, t in records if not (n == apex and t in ("SOA", "NS"))]
json.dump({"total_records": len(counted), "unique_hosts": len({n for n, _ in counted if n != apex}),
           "mail_servers": sum(1 for _, t in counted if t == "MX")},
          open("/tmp/zone_analysis.json", "w"), indent=2)
PY
