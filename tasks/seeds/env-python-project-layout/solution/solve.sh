#!/bin/bash
set -euo pipefail
P=/app/tconv
mkdir -p "$P/src/tconv" "$P/bin" "$P/etc"
cp /app/incoming/units.py /app/incoming/fmt.py "$P/src/tconv/"
echo '"""tconv - temperature converter."""' > "$P/src/tconv/__init__.py"
cat > "$P/src/tconv/cli.py" <<'PY'
"""tconv VALUE FROM [TO] - convert a temperature between C, F and K."""
import json
import os
import sys

from tconv import fmt, units

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def config_path():
    return os.environ.get("TCONV_CONFIG") or os.path.join(PROJECT_ROOT, "etc", "tconv.json")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    with open(config_path()) as f:
        config = json.load(f)
    value, src = float(argv[0]), argv[1].upper()
    dst = argv[2].upper() if len(argv) == 3 else config["default_to"]
    result = units.from_kelvin(units.to_kelvin(value, src), dst)
    print(fmt.format_temp(result, dst, config["precision"]))
    return 0
PY
cat > "$P/src/tconv/__main__.py" <<'PY'
import sys

from tconv.cli import main

sys.exit(main())
PY
cat > "$P/bin/tconv" <<'SH'
#!/bin/sh
# Run tconv from the project this script belongs to (works after relocation).
here=$(cd "$(dirname "$0")" && pwd -P)
PYTHONPATH="$here/../src${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m tconv "$@"
SH
chmod +x "$P/bin/tconv"
printf '{\n  "precision": 2,\n  "default_to": "K"\n}\n' > "$P/etc/tconv.json"
"$P/bin/tconv" 100 C F
