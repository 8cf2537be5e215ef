#!/bin/bash
# Each node's view of the running nodes; disagreeing views are a partition, the smaller side
# is the minority.
python3 - <<'PY'
import glob, json, re
views = {}
for path in sorted(glob.glob("/var/log/rabbitmq/partition_event/*_status.txt")):
    text = open(path).read()
    node = re.search(r"Status of node (rabbit@[\w.-]+)", text).group(1)
    # the block after "Running Nodes" (with or without a colon, bullets or none), up to the
    # next heading
    block = re.search(r"Running Nodes:?\s*\n(.*?)\n\s*\n\s*[A-Z][A-Za-z ]+:?\s*\n", text, re.S)
    names = re.findall(r"rabbit@[\w.-]+", block.group(1)) if block else []
    views[node] = frozenset(names or [node])
sides = {}
for node, view in views.items():
    sides.setdefault(view, set()).add(node)
groups = sorted((sorted(s) for s in sides.values()), key=len)
partition = len(groups) > 1
if not partition:
    out = {"partition_occurred": False, "minority_nodes": [], "recommended_action": "no_action_needed"}
elif len(groups[0]) < len(groups[-1]):
    out = {"partition_occurred": True, "minority_nodes": groups[0], "recommended_action": "restart_minority"}
else:
    out = {"partition_occurred": True, "minority_nodes": [], "recommended_action": "restart_all"}
json.dump(out, open("/tmp/partition_analysis.json", "w"), indent=2)
PY
