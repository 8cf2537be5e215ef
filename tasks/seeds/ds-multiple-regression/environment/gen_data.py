"""Generates /app/data/train.csv (800 rows) and /app/data/test.csv (200 rows, no target)."""
import os
import random

rng = random.Random(9001)
os.makedirs("/app/data", exist_ok=True)
with open("/app/data/train.csv", "w") as tr, open("/app/data/test.csv", "w") as te:
    tr.write("id,sqft,bedrooms,age,price\n")
    te.write("id,sqft,bedrooms,age\n")
    for i in range(1, 1001):
        sqft = rng.randint(450, 4200)
        beds = max(1, min(6, round(sqft / 700 + rng.gauss(0, 0.8))))
        age = rng.randint(0, 90)
        price = 42000 + 185.5 * sqft + 9200 * beds - 760 * age + rng.gauss(0, 28000)
        if i <= 800:
            tr.write(f"{i},{sqft},{beds},{age},{price:.2f}\n")
        else:
            te.write(f"{i},{sqft},{beds},{age}\n")
