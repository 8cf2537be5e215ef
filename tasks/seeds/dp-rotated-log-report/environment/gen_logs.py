"""Writes rotated logs /app/logs/app.log, app.log.1, app.log.2.gz, app.log.3.gz with request
records, other records, multi-line stack traces and some garbage lines."""
import datetime
import gzip
import os
import random

rng = random.Random(2024)
os.makedirs("/app/logs", exist_ok=True)
t = datetime.datetime(2024, 3, 11, 22, 0, 0)
paths = ["/api/items", "/api/items/{id}", "/api/orders", "/login", "/health"]
chunks = [[] for _ in range(4)]
for i in range(12000):
    t += datetime.timedelta(milliseconds=rng.randint(50, 9000))
    ts = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    part = chunks[3 - min(3, i * 4 // 12000)]  # oldest records in app.log.3.gz
    r = rng.random()
    if r < 0.75:
        st = rng.choice([200] * 12 + [201, 204, 400, 404, 500, 502])
        level = "ERROR" if st >= 500 else ("WARN" if st >= 400 else "INFO")
        path = rng.choice(paths)
        dur = int(rng.lognormvariate(3.5, 0.8)) + (400 if path == "/api/orders" else 0)
        part.append(f"{ts} {level} [http] request_id=r{i:05d} method={rng.choice(['GET', 'POST'])} "
                    f"path={path} status={st} duration_ms={dur}")
        if st == 500 and rng.random() < 0.7:
            part.append("Traceback (most recent call last):")  # not indented: garbage
            part.append('  File "/srv/app/handlers.py", line 88, in handle')
            part.append("    raise RuntimeError('db timeout')")
    elif r < 0.95:
        level = rng.choice(["INFO", "INFO", "DEBUG", "WARN"])
        part.append(f"{ts} {level} [{rng.choice(['db', 'cache', 'scheduler'])}] "
                    f"{rng.choice(['pool resized', 'cache miss storm', 'job finished', 'slow query'])}")
    else:
        part.append(rng.choice(["", "###", "\x00\x00partial write", f"{ts[:10]} truncated"]))
names = ["app.log", "app.log.1", "app.log.2.gz", "app.log.3.gz"]
for name, lines in zip(names, chunks):
    data = ("\n".join(lines) + "\n").encode()
    path = os.path.join("/app/logs", name)
    if name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        open(path, "wb").write(data)
