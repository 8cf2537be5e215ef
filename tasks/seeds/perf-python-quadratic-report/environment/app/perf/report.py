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
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            ts, user, page = line.rstrip("\n").split(",")
            rows.append((int(ts), user, page))

    users = []
    for _, user, _ in rows:
        if user not in users:
            users.append(user)

    counts = [0] * len(users)
    first = [None] * len(users)
    last = [None] * len(users)
    pages = [[] for _ in users]
    visits = [[] for _ in users]
    for ts, user, page in rows:
        i = users.index(user)
        counts[i] += 1
        if first[i] is None or ts < first[i]:
            first[i] = ts
        if last[i] is None or ts > last[i]:
            last[i] = ts
        if page not in pages[i]:
            pages[i].append(page)
        visits[i].append(page)

    out = ""
    for i, user in enumerate(users):
        best, best_n = None, -1
        for p in pages[i]:
            n = visits[i].count(p)
            if n > best_n:
                best, best_n = p, n
        out += f"{user},{counts[i]},{first[i]},{last[i]},{len(pages[i])},{best}\n"
    out += f"TOTAL users={len(users)} events={len(rows)}\n"
    sys.stdout.write(out)


if __name__ == "__main__":
    main(sys.argv[1])
