"""Writes /app/seqstat/data/sample.txt (n=20,000) and /app/seqstat/data/big.txt (n=200,000),
then builds the tool."""
import os
import random
import subprocess

rng = random.Random(1234)
os.makedirs("/app/seqstat/data", exist_ok=True)


def write(path, n, hi):
    xs = [rng.randint(-hi, hi) for _ in range(n)]
    with open(path, "w") as f:
        f.write(f"{n}\n" + "\n".join(map(str, xs)) + "\n")


write("/app/seqstat/data/sample.txt", 20000, 50000)
write("/app/seqstat/data/big.txt", 200000, 2_000_000_000)
subprocess.run(["make", "-s", "-C", "/app/seqstat"], check=True)
