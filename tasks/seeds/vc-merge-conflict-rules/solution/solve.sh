#!/bin/bash
set -euo pipefail
cd /app/webapp
git config user.email oracle@example.com
git config user.name Oracle
git checkout -q main
git merge --no-ff --no-commit feature/rate-limits >/dev/null 2>&1 || true
python3 - <<'PY'
import configparser, subprocess

def show(rev, path):
    return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout

def parse(text):
    c = configparser.ConfigParser()
    c.read_string(text)
    return c

main, feat = parse(show("main", "config.ini")), parse(show("feature/rate-limits", "config.ini"))
out = configparser.ConfigParser()
for sec in main.sections():
    out[sec] = dict((feat if sec == "rates" else main)[sec])
with open("config.ini", "w") as f:
    out.write(f)

def unreleased(text):
    lines = text.splitlines()
    i = lines.index("## Unreleased")
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("## "))
    return lines, i, j, [l for l in lines[i + 1:j] if l.startswith("- ")]

base = subprocess.run(["git", "merge-base", "main", "feature/rate-limits"], capture_output=True, text=True).stdout.strip()
_, _, _, base_e = unreleased(show(base, "CHANGELOG.md"))
_, _, _, feat_e = unreleased(show("feature/rate-limits", "CHANGELOG.md"))
lines, i, j, main_e = unreleased(show("main", "CHANGELOG.md"))
entries = main_e + [e for e in feat_e if e not in base_e and e not in main_e]
new = lines[: i + 1] + [""] + entries + [""] + lines[j:]
with open("CHANGELOG.md", "w") as f:
    f.write("\n".join(new) + "\n")
PY
git add config.ini CHANGELOG.md
git commit -q --no-edit
