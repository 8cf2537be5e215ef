import datetime
import hashlib
import json
import math
import random
import subprocess
import sys

RUN_TESTS_SHA256 = "df332d0b8740b45c9b24fd533c9f1f401d01fa06b36ffc6de5062a91ef9e2897"  # the shipped run_tests.py
CALL = """import json, sys
sys.path.insert(0, "/app")
from tsutil import series
print(json.dumps([getattr(series, sys.argv[1])(*case) for case in json.load(sys.stdin)]))
"""


def call(function, cases):
    """tsutil.series.<function>(*case) for each case, run by a Python program of its own: the
    code under test never runs in the process that records the verdict."""
    r = subprocess.run([sys.executable, "-c", CALL, function], input=json.dumps(cases),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-600:]
    return json.loads(r.stdout)


def test_run_tests_passes_unmodified():
    with open("/app/run_tests.py", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == RUN_TESTS_SHA256, "run_tests.py modified"
    r = subprocess.run([sys.executable, "run_tests.py"], cwd="/app", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-600:]


def test_chunk():
    rng, cases, wants = random.Random(1), [], []
    for _ in range(300):
        xs = [rng.randint(0, 9) for _ in range(rng.randint(0, 25))]
        size = rng.randint(1, 7)
        cases.append([xs, size])
        wants.append([xs[i:i + size] for i in range(0, len(xs), size)])
    for case, got, want in zip(cases, call("chunk", cases), wants):
        assert got == want, case


def test_moving_average():
    rng, cases, wants = random.Random(2), [], []
    for _ in range(300):
        xs = [rng.randint(-50, 50) for _ in range(rng.randint(0, 20))]
        k = rng.randint(1, 8)
        cases.append([xs, k])
        wants.append([sum(xs[i:i + k]) / k for i in range(max(0, len(xs) - k + 1))])
    for case, got, want in zip(cases, call("moving_average", cases), wants):
        assert len(got) == len(want) and all(math.isclose(a, b) for a, b in zip(got, want)), case


def test_percentile():
    rng, cases, wants = random.Random(3), [], []
    for _ in range(300):
        xs = [rng.randint(0, 1000) for _ in range(rng.randint(1, 30))]
        p = rng.choice([rng.uniform(0.1, 100), 100, 50, 1, 99.9])
        srt = sorted(xs)
        cases.append([xs, p])
        wants.append(min(v for v in srt if sum(x <= v for x in srt) >= p / 100 * len(srt)))
    for case, got, want in zip(cases, call("percentile", cases), wants):
        assert got == want, case


def test_date_range():
    rng, cases, wants = random.Random(4), [], []
    for _ in range(200):
        d0 = datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randint(0, 800))
        d1 = d0 + datetime.timedelta(days=rng.randint(0, 70))
        want, d = [], d0
        while d <= d1:
            want.append(d.isoformat())
            d += datetime.timedelta(days=1)
        cases.append([d0.isoformat(), d1.isoformat()])
        wants.append(want)
    for case, got, want in zip(cases, call("date_range", cases), wants):
        assert got == want, case


def test_last_n_days():
    rng, cases, wants = random.Random(5), [], []
    base = datetime.date(2024, 1, 1)
    rows = [{"date": (base + datetime.timedelta(days=i)).isoformat(), "v": i} for i in range(90)]
    for _ in range(200):
        end = base + datetime.timedelta(days=rng.randint(0, 100))
        n = rng.randint(1, 30)
        lo = end - datetime.timedelta(days=n - 1)
        cases.append([rows, end.isoformat(), n])
        wants.append([r for r in rows if lo <= datetime.date.fromisoformat(r["date"]) <= end])
    for case, got, want in zip(cases, call("last_n_days", cases), wants):
        assert got == want, case[1:]
