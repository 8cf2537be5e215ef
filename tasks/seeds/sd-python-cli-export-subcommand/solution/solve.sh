#!/bin/bash
set -euo pipefail
cd /app/todo
python3 - <<'PY'
p = "todo.py"
s = open(p).read()
s = s.replace("import argparse\n", "import argparse\nimport csv\nimport json\n", 1)
s = s.replace('''def main(argv=None):''', '''def cmd_export(db, args):
    where, params = [], []
    if args.status == "open":
        where.append("done = 0")
    elif args.status == "done":
        where.append("done = 1")
    if args.tag is not None:
        where.append("id IN (SELECT task_id FROM tags WHERE tag = ?)")
        params.append(args.tag)
    sql = "SELECT id, title, due, done FROM tasks"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = []
    for tid, title, due, done in db.execute(sql + " ORDER BY id", params).fetchall():
        tags = sorted(t for (t,) in db.execute("SELECT tag FROM tags WHERE task_id = ?", (tid,)))
        rows.append({"id": tid, "title": title, "due": due or None,
                     "status": "done" if done else "open", "tags": tags})
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\\n")
    else:
        w = csv.writer(sys.stdout, lineterminator="\\n")
        w.writerow(["id", "title", "due", "status", "tags"])
        for r in rows:
            w.writerow([r["id"], r["title"], r["due"] or "", r["status"], ";".join(r["tags"])])


def main(argv=None):''')
s = s.replace('''    sub.add_parser("list")
''', '''    sub.add_parser("list")
    e = sub.add_parser("export")
    e.add_argument("--format", required=True, choices=["csv", "json"])
    e.add_argument("--status", choices=["open", "done", "all"], default="all")
    e.add_argument("--tag")
''')
s = s.replace('''"list": cmd_list}''', '''"list": cmd_list, "export": cmd_export}''')
open(p, "w").write(s)
PY
