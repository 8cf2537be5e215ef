#!/bin/bash
# The breach: an accepted SSH login from outside the office network (10.50.0.0/16), from an
# address that failed before, followed in syslog by root commands (sudo) of that user.
# The logs carry no year, so the timestamp is given exactly as the log writes it.
mkdir -p /home/agent
python3 - <<'PY'
import ipaddress
import json
import re
from collections import Counter
from datetime import datetime

office = ipaddress.ip_network("10.50.0.0/16")
stamp = re.compile(r"^([A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2})")
t = lambda s: datetime.strptime(" ".join(s.split()), "%b %d %H:%M:%S")

failed = Counter()
accepted = []
for line in open("/var/log/incident/auth.log", errors="replace"):
    m = stamp.match(line)
    if not m:
        continue
    f = re.search(r"Failed password for (?:invalid user )?(\S+) from (\S+)", line)
    if f:
        failed[f.group(2)] += 1
    a = re.search(r"Accepted (\w+) for (\S+) from (\S+)", line)
    if a:
        accepted.append((m.group(1), a.group(2), a.group(3)))

sudo = []
for line in open("/var/log/incident/syslog", errors="replace"):
    m = stamp.match(line)
    s = re.search(r"sudo\[\d+\]:\s+(\S+) : .*COMMAND=(.*)$", line)
    if m and s:
        sudo.append((t(m.group(1)), s.group(1), s.group(2)))

candidates = []
for ts, user, ip in accepted:
    if ipaddress.ip_address(ip) in office:
        continue
    after = [c for when, u, c in sudo if u == user and 0 <= (when - t(ts)).total_seconds() <= 3600]
    candidates.append((-len(after), -failed[ip], t(ts), ts, user, ip))
candidates.sort()
_, _, _, ts, user, ip = candidates[0]
report = {"attacker_ip": ip, "compromised_account": user, "breach_timestamp": " ".join(ts.split())}
json.dump(report, open("/home/agent/breach_report.json", "w"), indent=2)
print(report)
PY
