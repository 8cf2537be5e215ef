#!/bin/bash
set -euo pipefail
cat > /app/perf/report.py <<'PY'
#!/usr/bin/env python3
"""Per-user activity report.

usage: report.py EVENTS_CSV    (CSV header: ts,user,page; ts is an integer)
Prints one line per user, in order of the user's first event in the file:
    user,events,first_ts,last_ts,distinct_pages,top_page
top_page is the user's most visited page; ties go to the page that user visited first.
Then a final line: TOTAL users=<U> events=<N>
"""
import sys


def main(path):
    stats = {}  # dicts keep insertion order = first appearance
    n = 0
    with open(path) as f:
        next(f)
        for line in f:
            ts, user, page = line.rstrip("\n").split(",")
            ts = int(ts)
            n += 1
            s = stats.get(user)
            if s is None:
                stats[user] = [1, ts, ts, {page: 1}]
                continue
            s[0] += 1
            if ts < s[1]:
                s[1] = ts
            if ts > s[2]:
                s[2] = ts
            s[3][page] = s[3].get(page, 0) + 1
    out = []
    for user, (count, first, last, pages) in stats.items():
        best, best_n = None, -1
        for p, c in pages.items():
            if c > best_n:
                best, best_n = p, c
        out.append(f"{user},{count},{first},{last},{len(pages)},{best}\n")
    out.append(f"TOTAL users={len(stats)} events={n}\n")
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
PY
chmod +x /app/perf/report.py
