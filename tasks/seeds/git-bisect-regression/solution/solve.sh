#!/bin/bash
set -euo pipefail
cd /app/calc
git config user.email oracle@example.com
git config user.name Oracle
good=$(git rev-list --max-parents=0 HEAD)
git bisect start HEAD "$good" >/dev/null
git bisect run ./check.sh >/tmp/bisect.log 2>&1
bad=$(git rev-parse refs/bisect/bad)
git bisect reset >/dev/null 2>&1
echo "$bad" > /app/first_bad_commit.txt
git show "${bad}^:calc.py" > calc.py
./check.sh
git commit -q -am "fix: restore true division in mean"
