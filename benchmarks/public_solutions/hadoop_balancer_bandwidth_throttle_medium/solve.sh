#!/bin/bash
# Find the balancer bandwidth property in the cluster's XML configuration (the datanode's
# balance bandwidth, bytes per second) and express 50 MB/s (MiB, as Hadoop counts) in bytes.
python3 - <<'PY'
import glob
import json
import os
import xml.etree.ElementTree as ET

found = None
for path in sorted(glob.glob("/opt/hadoop/etc/hadoop/*.xml")):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        continue
    for prop in root.iter("property"):
        name = (prop.findtext("name") or "").strip()
        low = name.lower()
        if "balanc" in low and "bandwidth" in low:
            found = (os.path.basename(path), name)
            break
    if found:
        break
if found is None:  # the Hadoop default's home
    found = ("hdfs-site.xml", "dfs.datanode.balance.bandwidthPerSec")
result = {"config_file": found[0], "property_name": found[1], "bandwidth_bytes": 50 * 1024 * 1024}
json.dump(result, open("/tmp/balancer_bandwidth.json", "w"), indent=2)
print(result)
PY
