#!/bin/bash
# Builds /app/calc: 40 commits, the bug lands at commit 23 (hidden from the agent).
set -euo pipefail
mkdir -p /app/calc && cd /app/calc
git init -q -b main
git config user.email dev@example.com
git config user.name Dev
cat > check.sh <<'SH'
#!/bin/bash
python3 -c 'import calc; assert calc.mean([1, 2, 3, 6]) == 3.0; assert calc.total([4, 5]) == 9'
SH
chmod +x check.sh
printf '__pycache__/\n' > .gitignore
cat > calc.py <<'PY'
def total(xs):
    return sum(xs)


def mean(xs):
    return total(xs) / len(xs)
PY
git add . && git commit -q -m "initial calc library"
for i in $(seq 1 39); do
  echo "# revision $i" >> NOTES
  if [ "$i" -eq 23 ]; then
    sed -i 's|return total(xs) / len(xs)|return total(xs) // len(xs) + 0.5 * (len(xs) > 3)|' calc.py
  fi
  git add . && git commit -q -m "revision $i"
done
git config --unset user.email
git config --unset user.name
