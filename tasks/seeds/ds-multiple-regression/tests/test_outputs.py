import csv
import json
import math
from fractions import Fraction

FEATS = ["sqft", "bedrooms", "age"]


def fit():
    """Exact least squares via rational Gaussian elimination on the normal equations."""
    rows = list(csv.DictReader(open("/app/data/train.csv")))
    X = [[Fraction(1)] + [Fraction(r[f]) for f in FEATS] for r in rows]
    y = [Fraction(r["price"]) for r in rows]
    k = len(X[0])
    A = [[sum(x[i] * x[j] for x in X) for j in range(k)] + [sum(x[i] * t for x, t in zip(X, y))]
         for i in range(k)]
    for c in range(k):
        p = next(r for r in range(c, k) if A[r][c] != 0)
        A[c], A[p] = A[p], A[c]
        for r in range(k):
            if r != c and A[r][c] != 0:
                f = A[r][c] / A[c][c]
                A[r] = [a - f * b for a, b in zip(A[r], A[c])]
    beta = [float(A[i][k] / A[i][i]) for i in range(k)]
    yf = [float(v) for v in y]
    pred = [sum(b * float(v) for b, v in zip(beta, x)) for x in X]
    my = sum(yf) / len(yf)
    sse = sum((a - b) ** 2 for a, b in zip(yf, pred))
    sst = sum((a - my) ** 2 for a in yf)
    return beta, 1 - sse / sst, math.sqrt(sse / len(yf)), len(yf)


def close(got, want):
    return abs(got - want) <= max(1e-3, 1e-4 * abs(want))


def model():
    with open("/app/model.json") as f:
        return json.load(f)


def test_coefficients():
    beta, *_ = fit()
    m = model()
    assert close(m["intercept"], beta[0]), (m["intercept"], beta[0])
    for name, want in zip(FEATS, beta[1:]):
        assert close(m["coefficients"][name], want), (name, m["coefficients"][name], want)


def test_goodness_of_fit():
    _, r2, rmse, n = fit()
    m = model()
    assert close(m["r_squared"], r2), (m["r_squared"], r2)
    assert close(m["rmse"], rmse), (m["rmse"], rmse)
    assert m["n_train"] == n


def test_predictions_file_shape():
    test_ids = [r["id"] for r in csv.DictReader(open("/app/data/test.csv"))]
    with open("/app/predictions.csv") as f:
        lines = f.read().splitlines()
    assert lines[0] == "id,price", lines[0]
    assert [l.split(",")[0] for l in lines[1:]] == test_ids, "ids missing or out of order"
    for l in lines[1:]:
        price = l.split(",")[1]
        assert len(price.split(".")[-1]) == 2, f"not 2 decimals: {l}"


def test_prediction_values():
    beta, *_ = fit()
    got = {r["id"]: float(r["price"]) for r in csv.DictReader(open("/app/predictions.csv"))}
    for r in csv.DictReader(open("/app/data/test.csv")):
        want = beta[0] + sum(b * float(r[f]) for b, f in zip(beta[1:], FEATS))
        assert abs(got[r["id"]] - want) <= 0.05, (r["id"], got[r["id"]], want)
