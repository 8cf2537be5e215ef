#!/bin/bash
set -euo pipefail
cd /app/ledger
git config user.email oracle@example.com
git config user.name Oracle
# 1. main before the reset: the reflog entry just below "reset: moving to HEAD~2".
pre_reset=$(git reflog show --format='%H %gs' main | grep -A1 '^[0-9a-f]* reset: moving to HEAD~2' | tail -1 | cut -d' ' -f1)
git reset -q --hard "$pre_reset"
# 2. old feature tip: the HEAD position just before "checkout: moving from feature/report to main".
old_tip=$(git reflog show --format='%H %gs' HEAD | grep -A1 'checkout: moving from feature/report to main' | tail -1 | cut -d' ' -f1)
git branch feature/report "$old_tip"
# 3. the dropped stash is an unreachable commit whose message is "On feature/report: export json".
stash=""
for c in $(git fsck --unreachable --no-reflogs 2>/dev/null | awk '$2 == "commit" {print $3}'); do
  if [ "$(git log -1 --format=%s "$c")" = "On feature/report: export json" ]; then stash=$c; fi
done
test -n "$stash"
git checkout -q feature/report
git stash apply -q "$stash"
git add -A
git commit -q -m "wip: recovered stash"
git checkout -q main
