#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import hashlib, os
root = "/app/data"
groups = {}
for dp, dn, fn in os.walk(root):
    for n in fn:
        p = os.path.join(dp, n)
        if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) == 0:
            continue
        with open(p, "rb") as f:
            groups.setdefault(hashlib.sha256(f.read()).hexdigest(), []).append(os.path.relpath(p, root))
pairs, saved = [], 0
for paths in groups.values():
    paths.sort(key=str.encode)
    canon = paths[0]
    for dup in paths[1:]:
        full = os.path.join(root, dup)
        saved += os.path.getsize(full)
        tmp = full + ".dedupe-tmp"
        os.link(os.path.join(root, canon), tmp)
        os.replace(tmp, full)
        pairs.append((dup, canon))
pairs.sort(key=lambda x: x[0].encode())
with open("/app/dupes.tsv", "w") as f:
    f.writelines(f"{d}\t{c}\n" for d, c in pairs)
with open("/app/reclaimed.txt", "w") as f:
    f.write(f"{saved}\n")
PY
