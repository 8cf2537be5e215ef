import csv
import json
import math
import statistics

DATA = "/app/data/readings.csv"
TOL = 0.0011


def num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def expected():
    rows = list(csv.DictReader(open(DATA, newline="")))
    by, pairs = {}, []
    for r in rows:
        t, h = num(r["temperature"]), num(r["humidity"])
        if t is not None:
            by.setdefault(r["sensor_id"], []).append(t)
            if h is not None:
                pairs.append((t, h))
    n = len(pairs)
    mx = sum(p[0] for p in pairs) / n
    my = sum(p[1] for p in pairs) / n
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    return rows, by, sxy / math.sqrt(sxx * syy)


def summary():
    with open("/app/summary.json") as f:
        return json.load(f)


def test_row_counts():
    rows, by, _ = expected()
    s = summary()
    assert s["rows"] == len(rows), s["rows"]
    assert s["invalid_temperature"] == len(rows) - sum(len(v) for v in by.values())


def test_sensor_keys_and_counts():
    _, by, _ = expected()
    s = summary()["sensors"]
    assert sorted(s) == sorted(by), sorted(s)
    for sid, v in by.items():
        assert s[sid]["count"] == len(v), (sid, s[sid]["count"], len(v))


def test_sensor_location_stats():
    _, by, _ = expected()
    s = summary()["sensors"]
    for sid, v in by.items():
        for key, want in (("mean", statistics.fmean(v)), ("median", statistics.median(v)),
                          ("min", min(v)), ("max", max(v))):
            assert abs(s[sid][key] - want) <= TOL, (sid, key, s[sid][key], want)


def test_sensor_sample_stdev():
    _, by, _ = expected()
    s = summary()["sensors"]
    for sid, v in by.items():
        want = statistics.stdev(v)
        assert abs(s[sid]["stdev"] - want) <= TOL, (sid, s[sid]["stdev"], want)


def test_correlation():
    _, _, r = expected()
    got = summary()["temp_humidity_correlation"]
    assert abs(got - r) <= TOL, (got, r)
