#!/bin/bash
# Orphaned DKMS sources: /usr/src/<name>-<version>/ that are DKMS module trees (carry a
# dkms.conf; kernel headers and other non-DKMS content are ignored) with no
# /var/lib/dkms/<name>/<version>/ registration.  name/version are split at the last
# hyphen (versions have none), preferring PACKAGE_NAME/PACKAGE_VERSION from dkms.conf.
cat > /tmp/orphans.py <<'PY'
import os
import re

orphans = []
for entry in sorted(os.listdir("/usr/src")):
    path = os.path.join("/usr/src", entry)
    if not os.path.isdir(path) or "-" not in entry:
        continue
    conf = os.path.join(path, "dkms.conf")
    if not os.path.isfile(conf):
        continue  # not a DKMS module source tree (e.g. linux-headers-*)
    name, version = entry.rsplit("-", 1)
    text = open(conf, errors="replace").read()
    pn = re.search(r'^\s*PACKAGE_NAME\s*=\s*"?([^"\n]+)"?', text, re.M)
    pv = re.search(r'^\s*PACKAGE_VERSION\s*=\s*"?([^"\n]+)"?', text, re.M)
    if pn and pv and f"{pn.group(1).strip()}-{pv.group(1).strip()}" == entry:
        name, version = pn.group(1).strip(), pv.group(1).strip()
    if not os.path.isdir(os.path.join("/var/lib/dkms", name, version)):
        orphans.append(entry)

with open("/root/orphaned_modules.txt", "w") as f:
    f.write("".join(o + "\n" for o in sorted(orphans)))
print(sorted(orphans))
PY
python3 /tmp/orphans.py
