#!/bin/bash
# Builds /app/durations: main (30+ commits) and release/1.2 forked early. The BUG-4711 fix
# lands on main only; cherry-picking it onto release/1.2 conflicts in parser.py.
set -euo pipefail
mkdir -p /app/durations && cd /app/durations
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
commit() { git add -A && git commit -q -m "$1"; }

cat > parser.py <<'PY'
UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Parse durations such as '1h30m15s' into seconds."""
    total, num = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            num += ch
        else:
            total += int(num) * UNITS[ch]
            num = ""
    return total
PY
echo "1.2.0" > VERSION
cat > check.sh <<'SH'
#!/bin/bash
python3 -c 'from parser import parse_duration as p; assert p("1h30m") == 5400; assert p("45s") == 45'
SH
chmod +x check.sh
printf '__pycache__/\n' > .gitignore
commit "parser: initial duration parser"
for i in 1 2 3; do echo "note $i" >> NOTES.md; commit "docs: note $i"; done

git checkout -q -b release/1.2
echo "1.2.1" > VERSION
sed -i "s|    \"\"\"Parse durations such as '1h30m15s' into seconds.\"\"\"|    \"\"\"Return the number of seconds in a duration like '1h30m15s'.\"\"\"|" parser.py
commit "release: 1.2.1 (docstring wording)"
echo "1.2.2" > VERSION
commit "release: 1.2.2"

git checkout -q main
for i in $(seq 4 12); do echo "note $i" >> NOTES.md; commit "docs: note $i"; done
sed -i 's|UNITS = {"h": 3600, "m": 60, "s": 1}|UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}|' parser.py
commit "parser: support days"
for i in $(seq 13 17); do echo "note $i" >> NOTES.md; commit "docs: note $i"; done
python3 - <<'PY'
src = open("parser.py").read()
old = '''    total, num = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            num += ch
        else:
            total += int(num) * UNITS[ch]
            num = ""
    return total
'''
new = '''    if not text.strip():
        raise ValueError("empty duration")
    total, num = 0, ""
    for ch in text.strip():
        if ch.isdigit():
            num += ch
        elif ch in UNITS and num:
            total += int(num) * UNITS[ch]
            num = ""
        else:
            raise ValueError(f"malformed duration: {text!r}")
    if num:
        total += int(num)
    return total
'''
open("parser.py", "w").write(src.replace(old, new))
PY
cat > check.sh <<'SH'
#!/bin/bash
python3 - <<'T'
from parser import parse_duration as p
assert p("1h30m") == 5400
assert p("45s") == 45
assert p("90") == 90
assert p("2m5") == 125
for bad in ("", "h", "5x", "3mm"):
    try:
        p(bad)
    except ValueError:
        pass
    else:
        raise AssertionError(f"{bad!r} accepted")
T
SH
commit "fix(parser): BUG-4711 bare numbers are seconds; malformed input raises ValueError"
for i in $(seq 18 24); do echo "note $i" >> NOTES.md; commit "docs: note $i"; done
cat >> parser.py <<'PY'


def format_duration(seconds):
    out = ""
    for unit, size in UNITS.items():
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out or "0s"
PY
commit "parser: add format_duration"
echo "1.3.0" > VERSION
commit "release: 1.3.0 on main"
for i in $(seq 25 30); do echo "note $i" >> NOTES.md; commit "docs: note $i"; done
git config --unset user.email
git config --unset user.name
