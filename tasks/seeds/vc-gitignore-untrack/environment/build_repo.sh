#!/bin/bash
# Builds /app/toolkit, a repo in which build outputs, caches, logs and secrets were committed.
set -euo pipefail
mkdir -p /app/toolkit && cd /app/toolkit
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
mkdir -p src/toolkit/__pycache__ src/__pycache__ build/obj build/bin dist logs/archive tests/__pycache__ docs
printf 'def add(a, b):\n    return a + b\n' > src/toolkit/core.py
printf 'from toolkit.core import add\nprint(add(2, 3))\n' > src/main.py
printf 'int fast_add(int a, int b) { return a + b; }\n' > src/fast.c
printf 'from toolkit.core import add\n\nassert add(1, 1) == 2\n' > tests/test_core.py
printf 'all:\n\tgcc -c src/fast.c -o build/obj/fast.o\n' > Makefile
printf '# toolkit\n\nCopy .env.example to .env and fill in the token.\n' > README.md
printf 'API_TOKEN=changeme\nDEBUG=0\n' > .env.example
printf 'API_TOKEN=tk_live_51c0ffee\nDEBUG=1\n' > .env
printf '# Design notes\n\nBuild logs live in logs/ (kept via logs/.gitkeep).\n' > docs/design.md
: > logs/.gitkeep
git add -A && git commit -q -m "initial import"
for f in src/toolkit/__pycache__/core.cpython-311.pyc src/__pycache__/main.cpython-311.pyc \
         tests/__pycache__/test_core.cpython-311.pyc build/obj/fast.o build/bin/toolkit \
         dist/toolkit-1.0.tar.gz; do
  head -c 64 /dev/urandom > "$f"
done
printf 'stray bytecode\n' > src/toolkit/legacy.pyc
printf '2024-03-01 build ok\n' > logs/build.log
printf '2023-12-31 build ok\n' > logs/archive/2023.log
printf 'swap\n' > src/.main.py.swp
printf 'swap\n' > docs/.design.md.swp
printf '\n## Usage\n\npython3 src/main.py\n' >> README.md
git add -A && git commit -q -m "add usage docs (and everything else in the tree)"
printf 'def sub(a, b):\n    return a - b\n' >> src/toolkit/core.py
printf '2024-03-02 build ok\n' >> logs/build.log
git add -A && git commit -q -m "core: add sub"
git config --unset user.email
git config --unset user.name
