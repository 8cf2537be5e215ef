#!/bin/bash
# TCP sockets in LISTEN on ports 8000-9000, with their pid and program name, by port.
python3 - <<'PY'
import json, re
entries = []
for line in open("/tmp/network_connections.txt"):
    parts = line.split()
    if len(parts) < 5 or not parts[0].startswith("tcp") or "LISTEN" not in parts:
        continue
    port = parts[1].rsplit(":", 1)[-1]
    prog = parts[-1]
    m = re.match(r"(\d+)/(.+)", prog)
    if not port.isdigit() or m is None:
        continue
    if 8000 <= int(port) <= 9000:
        entries.append({"port": int(port), "pid": int(m.group(1)), "command": m.group(2).rsplit("/", 1)[-1]})
entries.sort(key=lambda e: (e["port"], e["pid"]))
json.dump({"listening_ports": entries}, open("/tmp/port_report.json", "w"), indent=2)
PY
