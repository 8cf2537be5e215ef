#!/bin/bash
# Take each register's value from the LAST register dump in the transcript (GDB's
# "info registers"/"info all-registers" table or OpenOCD's "monitor reg"), i.e. the
# state captured at the fault, not the earlier reset-halt banner.
cat > /tmp/regs.py <<'PY'
import json
import re

WANT = ("pc", "sp", "lr", "msp")
values = {}
gdb_row = re.compile(r"^(\w+)\s+(0x[0-9a-fA-F]+)\s+\S")           # sp  0x20004f18  0x20004f18
ocd_row = re.compile(r"^\(\d+\)\s+(\w+)\s+\(/\d+\):\s+(0x[0-9a-fA-F]+)")  # (13) sp (/32): 0x20004F18
for line in open("/workspace/gdb_session.txt", errors="replace"):
    line = line.strip()
    m = gdb_row.match(line) or ocd_row.match(line)
    if m and m.group(1).lower() in WANT:
        values[m.group(1).lower()] = int(m.group(2), 16)

missing = [r for r in WANT if r not in values]
assert not missing, f"registers not found in transcript: {missing}"
out = {r: "0x%08X" % values[r] for r in WANT}
with open("/tmp/registers.json", "w") as f:
    json.dump(out, f, indent=2)
print(out)
PY
python3 /tmp/regs.py
