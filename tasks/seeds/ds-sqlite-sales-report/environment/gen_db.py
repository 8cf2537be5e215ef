"""Generates /app/shop.db: customers, orders (with statuses, 2022-2024) and order_items."""
import random
import sqlite3

rng = random.Random(77)
db = sqlite3.connect("/app/shop.db")
db.executescript("""
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     created_at TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), sku TEXT NOT NULL,
                          quantity INTEGER NOT NULL, unit_price REAL NOT NULL);
""")
countries = ["DE", "FR", "US", "BR", "JP", "IN"]
first = ["Ada", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Liv"]
for cid in range(1, 301):
    db.execute("INSERT INTO customers VALUES (?,?,?)",
               (cid, f"{rng.choice(first)} {rng.choice(first)}son", rng.choice(countries)))
statuses = ["completed"] * 7 + ["cancelled", "refunded", "pending"]
oid = 0
for _ in range(6000):
    oid += 1
    y = rng.choice([2022, 2023, 2023, 2023, 2024])
    ts = f"{y}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
    db.execute("INSERT INTO orders VALUES (?,?,?,?)", (oid, rng.randint(1, 300), ts, rng.choice(statuses)))
    for _ in range(rng.randint(0, 4)):  # some orders have no items
        db.execute("INSERT INTO order_items VALUES (?,?,?,?)",
                   (oid, f"SKU-{rng.randint(1, 80):03d}", rng.randint(1, 5), round(rng.uniform(2, 250), 2)))
db.commit()
db.close()
