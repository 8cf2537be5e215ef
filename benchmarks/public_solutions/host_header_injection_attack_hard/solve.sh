#!/bin/bash
# Host header injection forensics. Legitimate hosts come from nginx's server_name lines;
# every access.log request of 2024-01-15 whose Host is not one of them is an attack request
# (IP|time|host), and those hosts are the attacker domains. The vulnerable file is the
# /opt/webapp Python file that builds the reset link from request.headers['Host'].
# /var/backups/sessions.db does not open with SQLite (its bytes went through a text
# round-trip), so its users and reset_tokens rows are carved from the raw bytes (read only):
# accounts whose reset_link points at an attacker domain are the compromised accounts.
# The timeline merges the attack requests and the poisoned reset tokens, sorted by time.
cat > /tmp/investigate.py <<'PY'
import glob, json, os, re, sqlite3
from datetime import datetime

ACCESS = "/var/log/webapp/access.log"
NGINX = "/etc/nginx/sites-available/webapp.conf"
DB = "/var/backups/sessions.db"
APP = "/opt/webapp"
DAY_START, DAY_END = datetime(2024, 1, 15, 0, 0, 0), datetime(2024, 1, 15, 23, 59, 59)

legit = set()
for line in open(NGINX):
    m = re.match(r"\s*server_name\s+([^;]+);", line)
    if m:
        legit.update(h.lower() for h in m.group(1).split())
legit.update({"localhost", "127.0.0.1"})

def bare(host):
    host = host.strip().lower()
    return host.rsplit(":", 1)[0] if re.search(r":\d+$", host) else host

LOG = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+)[^"]*" (\d{3}) \S+ "[^"]*" "[^"]*"\s*Host:\s*(\S+)')
attack_requests, domains, events = [], [], []
for line in open(ACCESS, errors="replace"):
    m = LOG.match(line)
    if not m:
        continue
    ip, ts, method, path, status, host = m.groups()
    t = datetime.strptime(ts.split()[0], "%d/%b/%Y:%H:%M:%S")
    if not (DAY_START <= t <= DAY_END) or bare(host) in legit:
        continue
    stamp = t.strftime("%Y-%m-%d %H:%M:%S")
    attack_requests.append((t, f"{ip}|{stamp}|{host}"))
    if bare(host) not in domains:
        domains.append(bare(host))
    events.append((t, f"{stamp}|{method} {path} from {ip} with injected Host header {host}"))
attack_requests.sort()

# ---- sessions.db: SQLite if it opens, else carve ----
def load_tokens():
    try:
        c = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
        rows = c.execute("SELECT username, token, requested_at, requested_from_ip, reset_link FROM reset_tokens").fetchall()
        c.close()
        return rows
    except sqlite3.DatabaseError:
        pass
    raw = open(DB, "rb").read()
    users = {m.group(1).decode() for m in re.finditer(rb"([A-Za-z0-9._-]+)\1@[A-Za-z0-9.-]+\.[a-z]+\d{4}-\d\d-\d\d", raw)}
    rows = []
    pat = re.compile(rb"([A-Za-z0-9._-]{1,64}?)(tok_[A-Za-z0-9]+?)(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"
                     rb"(\d{1,3}(?:\.\d{1,3}){3})[^h]{0,4}(https?://[^/\s]+/\S*?token=tok_[A-Za-z0-9]{12})")
    for m in pat.finditer(raw):
        prefix, token, at, ip, link = (g.decode("utf-8", "replace") for g in m.groups())
        # the username is the longest known username ending the prefix (header bytes before it)
        user = next((prefix[i:] for i in range(len(prefix)) if prefix[i:] in users), prefix)
        rows.append((user, token, at, ip, link))
    return rows

compromised = []
for user, token, at, ip, link in sorted(load_tokens(), key=lambda r: r[2]):
    host = bare(re.match(r"https?://([^/]+)", link).group(1))
    t = datetime.strptime(at, "%Y-%m-%d %H:%M:%S")
    if host in legit or not (DAY_START <= t <= DAY_END):
        continue
    if host not in domains:
        domains.append(host)
    if user not in compromised:
        compromised.append(user)
    events.append((t, f"{at}|Password reset token for {user} issued from {ip} with reset link poisoned to {host}"))

# ---- vulnerable code: reset link built from the Host header ----
vuln = None
for path in sorted(glob.glob(os.path.join(APP, "**", "*.py"), recursive=True)):
    src = open(path, errors="replace").read()
    if re.search(r"headers\.get\(\s*['\"]Host['\"]|request\.host\b|headers\[\s*['\"]Host['\"]", src) and "reset" in src.lower():
        vuln = os.path.relpath(path, APP)
        break

events.sort(key=lambda e: e[0])
report = {
    "attack_requests": [r for _, r in attack_requests],
    "compromised_accounts": compromised,
    "attacker_domains": domains,
    "vulnerable_code_file": vuln,
    "attack_timeline": [e for _, e in events],
}
json.dump(report, open("/root/investigation_report.json", "w"), indent=2)
print(json.dumps({k: (v if not isinstance(v, list) else f"{len(v)} items") for k, v in report.items()}))
print(report["compromised_accounts"], report["attacker_domains"])
PY
python3 /tmp/investigate.py
