#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json, os, re, shutil
inbox, lib = "/app/inbox", "/app/library"
used, rows = set(), []
for jpg in sorted((n for n in os.listdir(inbox) if n.endswith(".jpg")), key=str.encode):
    base = jpg[:-4]
    meta = json.load(open(os.path.join(inbox, base + ".json")))
    if "taken" in meta:
        t = meta["taken"]
        slug = re.sub(r"[^a-z0-9]+", "-", meta["camera"].lower()).strip("-")
        stem = f"{t[0:4]}/{t[5:7]}/{t[0:4]}{t[5:7]}{t[8:10]}-{t[11:13]}{t[14:16]}{t[17:19]}_{slug}"
        dest, k = stem + ".jpg", 0
        while dest in used:
            k += 1
            dest = f"{stem}-{k}.jpg"
    else:
        dest = f"unsorted/{jpg}"
    used.add(dest)
    os.makedirs(os.path.dirname(os.path.join(lib, dest)), exist_ok=True)
    shutil.move(os.path.join(inbox, jpg), os.path.join(lib, dest))
    rows.append((jpg, dest))
with open(os.path.join(lib, "index.csv"), "w") as f:
    f.write("original,destination\n")
    for o, d in rows:
        f.write(f"{o},{d}\n")
PY
