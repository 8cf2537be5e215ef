"""Writes /app/perf/data/events.csv: 50,000 events from 5,000 users (not time-sorted)."""
import os
import random

rng = random.Random(12345)
os.makedirs("/app/perf/data", exist_ok=True)
pages = [f"/p/{i}" for i in range(60)]
with open("/app/perf/data/events.csv", "w") as f:
    f.write("ts,user,page\n")
    for _ in range(50000):
        f.write(f"{rng.randint(1_700_000_000, 1_700_900_000)},user{rng.randint(1, 5000):05d},"
                f"{rng.choice(pages[:rng.randint(1, 60)])}\n")
