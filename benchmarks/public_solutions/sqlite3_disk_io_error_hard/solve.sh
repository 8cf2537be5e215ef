#!/bin/bash
# Salvage a truncated/garbled SQLite dump: take the table schema from the dump's CREATE
# TABLE, then scan every line for a VALUES(...) tuple. A record is kept only when all of
# the schema's fields are present and complete (every quoted string closed, numbers
# well-formed, NOT NULL respected, values free of binary garbage); a missing ")" / ";"
# after the last complete field is tolerated (the data itself is intact). Garbage bytes
# (U+FFFD / control chars) in the "INSERT INTO ... VALUES" keyword prefix are ignored.
# Kept rows go into /recovery/employees.db with parameterised INSERTs; the summary
# count is read back from the database.
mkdir -p /recovery
cat > /tmp/recover.py <<'PY'
import json, os, re, sqlite3

DUMP = "/backup/employees_dump.sql"
DB = "/recovery/employees.db"
text = open(DUMP, encoding="utf-8", errors="replace").read()

m = re.search(r"CREATE TABLE\s+(\w+)\s*\((.*?)\);", text, re.S | re.I)
table, body = m.group(1), m.group(2)
cols = []
for part in body.split(","):
    part = part.strip()
    if not part or part.upper().startswith(("PRIMARY KEY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT")):
        continue
    name, ctype = part.split()[0], (part.split()[1].upper() if len(part.split()) > 1 else "")
    cols.append((name, ctype, "NOT NULL" in part.upper()))
create_sql = f"CREATE TABLE {table} (" + body.strip() + ")"
ncols = len(cols)
BAD = re.compile(r"[\ufffd\x00-\x08\x0b-\x1f\x7f]")


def parse_values(s):
    """Parse a VALUES( ... tail into (values, complete?)."""
    vals, i, n = [], 0, len(s)
    while True:
        while i < n and s[i] == " ":
            i += 1
        if i >= n:
            return vals, False
        if s[i] == "'":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    return vals, False          # unterminated string: truncated
                if s[j] == "'":
                    if j + 1 < n and s[j + 1] == "'":
                        buf.append("'"); j += 2; continue
                    break
                buf.append(s[j]); j += 1
            vals.append("".join(buf)); i = j + 1
        else:
            mm = re.match(r"(NULL|-?\d+(?:\.\d+)?)", s[i:], re.I)
            if not mm:
                return vals, False
            tok = mm.group(1)
            # a bare number is only known complete if a delimiter follows it
            end = i + len(tok)
            if end >= n:
                return vals, False
            vals.append(None if tok.upper() == "NULL" else (float(tok) if "." in tok else int(tok)))
            i = end
        while i < n and s[i] == " ":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            continue
        # end of the tuple: ")" or the line simply ends (closing paren lost)
        return vals, True


def typed(v, ctype, notnull):
    if v is None:
        return not notnull
    if isinstance(v, str) and BAD.search(v):
        return False
    if "INT" in ctype:
        return isinstance(v, int)
    if any(t in ctype for t in ("REAL", "FLOA", "DOUB", "NUM", "DEC")):
        return isinstance(v, (int, float))
    return isinstance(v, str) and (v != "" or not notnull)


rows, seen_ids, rejected = [], set(), 0
for line in text.splitlines():
    k = line.find("VALUES(")
    if k < 0:
        continue
    prefix = BAD.sub("", line[:k])
    if not re.search(r"INSERT\s+INTO\s+" + re.escape(table) + r"\s*$", prefix.strip() + " ", re.I) and \
       not re.match(r"\s*INSERT\s+INTO\s+" + re.escape(table) + r"\s+$", prefix, re.I):
        rejected += 1
        continue
    vals, complete = parse_values(line[k + len("VALUES("):])
    if not complete or len(vals) != ncols or not all(typed(v, c[1], c[2]) for v, c in zip(vals, cols)):
        rejected += 1
        continue
    if vals[0] in seen_ids:
        continue
    seen_ids.add(vals[0])
    rows.append(vals)

if os.path.exists(DB):
    os.remove(DB)
conn = sqlite3.connect(DB)
conn.execute(create_sql)
conn.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * ncols)})", rows)
conn.commit()
count = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
conn.close()
json.dump({"records_recovered": count, "database_created": ok and count > 0},
          open("/recovery/summary.json", "w"), indent=2)
print(f"schema {table}{[c[0] for c in cols]}; kept {count} rows, rejected {rejected} damaged lines")
print(open("/recovery/summary.json").read())
PY
python3 /tmp/recover.py
