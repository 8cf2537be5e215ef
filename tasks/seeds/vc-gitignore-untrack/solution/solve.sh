#!/bin/bash
set -euo pipefail
cd /app/toolkit
git config user.email oracle@example.com
git config user.name Oracle
cat > .gitignore <<'GI'
/build/
/dist/
__pycache__/
*.pyc
/logs/**/*.log
!/logs/.gitkeep
/.env
*.swp
GI
git ls-files -ci --exclude-standard -z | xargs -0 -r git rm -q --cached --
git add .gitignore
git commit -q -m "chore: untrack build artefacts"
