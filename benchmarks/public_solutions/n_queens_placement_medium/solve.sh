#!/bin/bash
cd /workspace
cat > solve_queens.py <<'PY'
import json


def count(n, row=0, cols=0, d1=0, d2=0):
    if row == n:
        return 1
    total = 0
    for c in range(n):
        if not (cols >> c) & 1 and not (d1 >> (row + c)) & 1 and not (d2 >> (row - c + n)) & 1:
            total += count(n, row + 1, cols | 1 << c, d1 | 1 << (row + c), d2 | 1 << (row - c + n))
    return total


if __name__ == "__main__":
    with open("/workspace/solutions.json", "w") as f:
        json.dump({str(n): count(n) for n in (4, 5, 6, 8)}, f, indent=2)
PY
python3 solve_queens.py
