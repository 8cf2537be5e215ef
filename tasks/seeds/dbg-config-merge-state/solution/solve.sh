#!/bin/bash
set -euo pipefail
cd /app/cfgtool
python3 - <<'PY'
p = "merge.py"
s = open(p).read()
start = s.index("def deep_merge(")
end = s.index("def load(")
new = '''def deep_merge(base, override):
    result = copy.deepcopy(base)
    for k, v in override.items():
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict) and isinstance(result.get(k), dict):
            result[k] = deep_merge(result[k], v)
        else:
            result[k] = copy.deepcopy(v)
    return result


'''
s = s[:start] + new + s[end:]
s = s.replace("import json\n", "import copy\nimport json\n", 1)
open(p, "w").write(s)
PY
python3 merge.py --all --out /app/cfgtool/rendered
