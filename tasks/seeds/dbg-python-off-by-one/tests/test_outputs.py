import datetime
import hashlib
import importlib
import math
import random
import subprocess
import sys

sys.path.insert(0, "/app")
RUN_TESTS_SHA256 = "df332d0b8740b45c9b24fd533c9f1f401d01fa06b36ffc6de5062a91ef9e2897"  # the shipped run_tests.py


def series():
    sys.modules.pop("tsutil.series", None)
    return importlib.import_module("tsutil.series")


def test_run_tests_passes_unmodified():
    with open("/app/run_tests.py", "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == RUN_TESTS_SHA256, "run_tests.py modified"
    r = subprocess.run([sys.executable, "run_tests.py"], cwd="/app", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-600:]


def test_chunk():
    s, rng = series(), random.Random(1)
    for _ in range(300):
        xs = [rng.randint(0, 9) for _ in range(rng.randint(0, 25))]
        size = rng.randint(1, 7)
        want = [xs[i:i + size] for i in range(0, len(xs), size)]
        assert s.chunk(xs, size) == want, (xs, size)


def test_moving_average():
    s, rng = series(), random.Random(2)
    for _ in range(300):
        xs = [rng.randint(-50, 50) for _ in range(rng.randint(0, 20))]
        k = rng.randint(1, 8)
        want = [sum(xs[i:i + k]) / k for i in range(max(0, len(xs) - k + 1))]
        got = s.moving_average(xs, k)
        assert len(got) == len(want) and all(math.isclose(a, b) for a, b in zip(got, want)), (xs, k)


def test_percentile():
    s, rng = series(), random.Random(3)
    for _ in range(300):
        xs = [rng.randint(0, 1000) for _ in range(rng.randint(1, 30))]
        p = rng.choice([rng.uniform(0.1, 100), 100, 50, 1, 99.9])
        srt = sorted(xs)
        want = min(v for v in srt if sum(x <= v for x in srt) >= p / 100 * len(srt))
        assert s.percentile(xs, p) == want, (xs, p)


def test_date_range():
    s, rng = series(), random.Random(4)
    for _ in range(200):
        d0 = datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randint(0, 800))
        d1 = d0 + datetime.timedelta(days=rng.randint(0, 70))
        want, d = [], d0
        while d <= d1:
            want.append(d.isoformat())
            d += datetime.timedelta(days=1)
        assert s.date_range(d0.isoformat(), d1.isoformat()) == want, (d0, d1)


def test_last_n_days():
    s, rng = series(), random.Random(5)
    base = datetime.date(2024, 1, 1)
    rows = [{"date": (base + datetime.timedelta(days=i)).isoformat(), "v": i} for i in range(90)]
    for _ in range(200):
        end = base + datetime.timedelta(days=rng.randint(0, 100))
        n = rng.randint(1, 30)
        lo = end - datetime.timedelta(days=n - 1)
        want = [r for r in rows if lo <= datetime.date.fromisoformat(r["date"]) <= end]
        assert s.last_n_days(rows, end.isoformat(), n) == want, (end, n)
