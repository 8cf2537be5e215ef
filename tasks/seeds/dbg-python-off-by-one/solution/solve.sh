#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
p = "tsutil/series.py"
s = open(p).read()
for old, new in [
    ("range(0, len(seq) - size + 1, size)", "range(0, len(seq), size)"),
    ("for i in range(len(xs) - k)]", "for i in range(len(xs) - k + 1)]"),
    ("return s[math.ceil(p / 100 * len(s))]", "return s[math.ceil(p / 100 * len(s)) - 1]"),
    ("for i in range((d1 - d0).days)]", "for i in range((d1 - d0).days + 1)]"),
    ("d0 = d1 - datetime.timedelta(days=n)", "d0 = d1 - datetime.timedelta(days=n - 1)"),
]:
    assert old in s, old
    s = s.replace(old, new)
open(p, "w").write(s)
PY
python3 run_tests.py
