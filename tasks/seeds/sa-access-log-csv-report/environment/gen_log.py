#!/usr/bin/env python3
"""Writes /app/logs/access.log: ~6000 combined-format lines plus some corrupt ones."""
import hashlib
import os

os.makedirs("/app/logs", exist_ok=True)


def h(*parts):
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest(), 16)


paths = ["/", "/login", "/api/users", "/api/orders", "/api/orders/export", "/static/app.js",
         "/static/site.css", "/health", "/api/search", "/admin"]
methods = ["GET", "GET", "GET", "POST", "GET", "PUT", "DELETE", "GET"]
statuses = [200] * 12 + [201, 204, 301, 304, 400, 401, 403, 404, 404, 500, 502, 503]
agents = ["curl/8.4.0", "Mozilla/5.0 (X11; Linux x86_64)", "python-requests/2.31"]
months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
lines = []
for i in range(6000):
    p = paths[h(i, "p") % len(paths)]
    if h(i, "q") % 4 == 0:
        p += f"?page={h(i, 'pg') % 9}&sort=desc"
    m = methods[h(i, "m") % len(methods)]
    st = statuses[h(i, "s") % len(statuses)]
    size = "-" if st in (204, 304) else str(h(i, "b") % 50000)
    ms = h(i, "t") % 900 + 1
    ip = f"10.{h(i, 'a') % 4}.{h(i, 'b1') % 250}.{h(i, 'c') % 250}"
    ts = f"{1 + i // 500:02d}/{months[4]}/2024:{(i // 60) % 24:02d}:{i % 60:02d}:{h(i, 'sec') % 60:02d} +0000"
    ua = agents[h(i, "u") % len(agents)]
    line = f'{ip} - - [{ts}] "{m} {p} HTTP/1.1" {st} {size} "-" "{ua}" {ms}'
    k = h(i, "corrupt") % 97
    if k == 0:
        line = line[: 8 + h(i, "cut") % 30]
    elif k == 1:
        line = "#### log writer restarted ####"
    elif k == 2:
        line = ""
    lines.append(line)
with open("/app/logs/access.log", "w") as f:
    f.write("\n".join(lines) + "\n")
