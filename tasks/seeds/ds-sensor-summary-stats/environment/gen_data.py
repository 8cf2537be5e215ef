"""Generates /app/data/readings.csv: ~6000 rows from 7 sensors with gaps and junk values."""
import os
import random

rng = random.Random(4242)
os.makedirs("/app/data", exist_ok=True)
sensors = {f"S{i:02d}": (15 + 2.5 * i, 1 + 0.3 * i) for i in range(1, 8)}
with open("/app/data/readings.csv", "w") as f:
    f.write("timestamp,sensor_id,temperature,humidity\n")
    t = 1_700_000_000
    for n in range(6000):
        t += rng.randint(5, 60)
        sid = rng.choice(sorted(sensors))
        mu, sd = sensors[sid]
        temp = rng.gauss(mu, sd)
        hum = max(0.0, min(100.0, 80 - 1.2 * temp + rng.gauss(0, 4)))
        r = rng.random()
        temp_s = f"{temp:.2f}"
        if r < 0.03:
            temp_s = "NA"
        elif r < 0.05:
            temp_s = ""
        elif r < 0.06:
            temp_s = "err"
        hum_s = f"{hum:.1f}" if rng.random() > 0.04 else "NA"
        f.write(f"{t},{sid},{temp_s},{hum_s}\n")
