#!/bin/bash
# Code review: find functions that open a MongoClient per call and never close it
# (each request leaks a client with its own pool => "too many connections").
mkdir -p /solution
cat > /tmp/review.py <<'PY'
import json
import re

FILES = ["/workspace/app/database.js", "/workspace/app/server.js", "/workspace/app/routes/users.js"]
findings = []
for path in FILES:
    try:
        lines = open(path).read().split("\n")
    except FileNotFoundError:
        continue
    # split into top-level functions: "async function name(" / "function name(" ... matching braces
    i = 0
    while i < len(lines):
        m = re.match(r"\s*(?:async\s+)?function\s+(\w+)\s*\(", lines[i])
        if not m:
            i += 1
            continue
        start, depth, j, seen = i, 0, i, False
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            seen = seen or "{" in lines[j]
            if seen and depth <= 0:
                break
            j += 1
        body = "\n".join(lines[start : j + 1])
        opens_client = re.search(r"new\s+MongoClient\s*\(", body) or re.search(r"MongoClient\.connect\s*\(", body)
        closes = re.search(r"\.close\s*\(", body)
        if opens_client and not closes:
            findings.append((path, m.group(1), start + 1, j + 1))
        i = j + 1

by_file = {}
for path, name, s, e in findings:
    by_file.setdefault(path, []).append((name, s, e))
path, funcs = max(by_file.items(), key=lambda kv: len(kv[1]))
start = min(s for _, s, _ in funcs)
end = max(e for _, _, e in funcs)
analysis = {
    "problematic_file": path,
    "issue_type": "connection leak: each database function (" + ", ".join(n for n, _, _ in funcs)
    + ") creates and connects a new MongoClient per call and never closes it, instead of reusing one "
    "shared client/connection pool, so connections accumulate until the pool/server limit is exhausted",
    "line_range": f"{start}-{end}",
}
json.dump(analysis, open("/solution/analysis.json", "w"), indent=2)
print(json.dumps(analysis, indent=2))
PY
python3 /tmp/review.py
