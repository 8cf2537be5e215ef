#!/bin/bash
# A backtracking Sudoku solver over the puzzle as given (spaces or commas, 0 or . for blanks).
python3 - <<'PY'
rows = []
for line in open("/workspace/puzzle.txt"):
    cells = line.replace(",", " ").split()
    if len(cells) == 1 and len(cells[0]) == 9:
        cells = list(cells[0])
    if cells:
        rows.append([0 if c in "0." else int(c) for c in cells])
grid = [r[:] for r in rows]

def ok(r, c, v):
    if v in grid[r] or any(grid[i][c] == v for i in range(9)):
        return False
    br, bc = 3 * (r // 3), 3 * (c // 3)
    return all(grid[i][j] != v for i in range(br, br + 3) for j in range(bc, bc + 3))

def solve():
    for r in range(9):
        for c in range(9):
            if grid[r][c] == 0:
                for v in range(1, 10):
                    if ok(r, c, v):
                        grid[r][c] = v
                        if solve():
                            return True
                        grid[r][c] = 0
                return False
    return True

assert solve()
with open("/workspace/solution.txt", "w") as f:
    f.write("\n".join("".join(map(str, r)) for r in grid) + "\n")
PY
