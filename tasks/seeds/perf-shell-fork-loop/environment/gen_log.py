"""Writes /app/logs/access.log (60,000 lines) and /app/logs/sample.log (its first 300)."""
import os
import random

rng = random.Random(404)
os.makedirs("/app/logs", exist_ok=True)
ips = [f"10.{rng.randint(0, 3)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}" for _ in range(700)]
paths = ["/", "/login", "/api/items", "/api/items/42", "/static/app.js", "/health"]
statuses = [200] * 20 + [301, 304, 304, 404, 404, 500, 503]
lines = []
for i in range(60000):
    ip = rng.choice(ips[: rng.randint(1, 700)])
    st = rng.choice(statuses)
    size = "-" if st in (304, 301) or rng.random() < 0.02 else str(rng.randint(0, 90000))
    lines.append(f'{ip} - - [12/Mar/2024:10:{i // 1000 % 60:02d}:{i % 60:02d} +0000] '
                 f'"GET {rng.choice(paths)} HTTP/1.1" {st} {size}')
with open("/app/logs/access.log", "w") as f:
    f.write("\n".join(lines) + "\n")
with open("/app/logs/sample.log", "w") as f:
    f.write("\n".join(lines[:300]) + "\n")
