#!/bin/bash
set -euo pipefail
cd /app/durations
git config user.email oracle@example.com
git config user.name Oracle
fix=$(git log main --grep=BUG-4711 --format=%H)
git checkout -q release/1.2
if ! git cherry-pick -x "$fix" >/dev/null 2>&1; then
  # Conflict in parser.py: take the fixed function body, keep release's UNITS and docstring.
  python3 - "$fix" <<'PY'
import subprocess, sys
fix = sys.argv[1]
rel = subprocess.run(["git", "show", "HEAD:parser.py"], capture_output=True, text=True, check=True).stdout
fixed = subprocess.run(["git", "show", f"{fix}:parser.py"], capture_output=True, text=True, check=True).stdout
head, _, _ = rel.partition('    total, num = 0, ""')
_, _, body = fixed.partition('into seconds."""\n')
open("parser.py", "w").write(head + body)
PY
  ./check.sh
  git add parser.py check.sh
  GIT_EDITOR=true git cherry-pick --continue >/dev/null
fi
./check.sh
