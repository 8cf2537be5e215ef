#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json, math

FEATS = ["sqft", "bedrooms", "age"]
rows = list(csv.DictReader(open("/app/data/train.csv")))
X = [[1.0] + [float(r[f]) for f in FEATS] for r in rows]
y = [float(r["price"]) for r in rows]
k = len(X[0])
A = [[sum(x[i] * x[j] for x in X) for j in range(k)] + [sum(x[i] * t for x, t in zip(X, y))] for i in range(k)]
for c in range(k):  # Gauss-Jordan with partial pivoting
    p = max(range(c, k), key=lambda r: abs(A[r][c]))
    A[c], A[p] = A[p], A[c]
    for r in range(k):
        if r != c:
            f = A[r][c] / A[c][c]
            A[r] = [a - f * b for a, b in zip(A[r], A[c])]
beta = [A[i][k] / A[i][i] for i in range(k)]
pred = [sum(b * v for b, v in zip(beta, x)) for x in X]
my = sum(y) / len(y)
sse = sum((a - b) ** 2 for a, b in zip(y, pred))
sst = sum((a - my) ** 2 for a in y)
model = {"intercept": beta[0], "coefficients": dict(zip(FEATS, beta[1:])),
         "r_squared": 1 - sse / sst, "rmse": math.sqrt(sse / len(y)), "n_train": len(y)}
json.dump(model, open("/app/model.json", "w"), indent=2)
with open("/app/predictions.csv", "w") as f:
    f.write("id,price\n")
    for r in csv.DictReader(open("/app/data/test.csv")):
        x = [1.0] + [float(r[c]) for c in FEATS]
        f.write(f"{r['id']},{sum(b * v for b, v in zip(beta, x)):.2f}\n")
PY
