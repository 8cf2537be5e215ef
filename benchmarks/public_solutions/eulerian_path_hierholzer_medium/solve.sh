#!/bin/bash
# Directed Eulerian path: check degree balance + connectivity, then Hierholzer.
cd /workspace
cat > /tmp/euler.py <<'PY'
import json
from collections import defaultdict

data = json.load(open("/workspace/network_topology.json"))
nodes, edges = [], []
if isinstance(data, dict):
    # documented format: {"nodes": [...], "edges": [{"from": .., "to": ..}]}
    nodes = [n if isinstance(n, str) else n.get("id") for n in data.get("nodes", [])]
    edges = [(e["from"], e["to"]) for e in data.get("edges", [])]
else:
    # shipped format: a flattened table of rows {"node_type", "node_id"}; node rows are
    # ("node", id); after the header row ("edge_from", "edge_to") each row is an edge
    # (from, to) stored in the same two columns.  Also accept explicit edge records.
    in_edges = False
    for row in data:
        if "from" in row and "to" in row:
            edges.append((row["from"], row["to"]))
            continue
        t, i = row.get("node_type"), row.get("node_id")
        if t == "edge_from" and i == "edge_to":
            in_edges = True
        elif t == "node" and not in_edges:
            nodes.append(i)
        elif in_edges:
            edges.append((t, i))

out_deg, in_deg = defaultdict(int), defaultdict(int)
adj = defaultdict(list)
for a, b in edges:
    out_deg[a] += 1
    in_deg[b] += 1
    adj[a].append(b)


def eulerian_path():
    if not edges:
        return None
    verts = set(out_deg) | set(in_deg)
    starts = [v for v in verts if out_deg[v] - in_deg[v] == 1]
    ends = [v for v in verts if in_deg[v] - out_deg[v] == 1]
    if any(abs(out_deg[v] - in_deg[v]) > 1 for v in verts):
        return None
    if not ((len(starts) == 0 and len(ends) == 0) or (len(starts) == 1 and len(ends) == 1)):
        return None
    start = starts[0] if starts else next(v for v in sorted(verts) if out_deg[v] > 0)
    # Hierholzer
    remaining = {v: list(reversed(sorted(adj[v]))) for v in adj}
    stack, path = [start], []
    while stack:
        v = stack[-1]
        if remaining.get(v):
            stack.append(remaining[v].pop())
        else:
            path.append(stack.pop())
    path.reverse()
    if len(path) != len(edges) + 1:  # not all edges reachable (disconnected)
        return None
    return path


p = eulerian_path()
result = {"path_exists": p is not None, "path": p or []}
json.dump(result, open("/workspace/solution.json", "w"), indent=2)
print(len(nodes), "nodes,", len(edges), "edges ->", result["path_exists"])
PY
python3 /tmp/euler.py
