"""Writes /app/data/orders.txt: a fixed-width-ish export with awkward but legal content."""
import os
import random

rng = random.Random(8)
os.makedirs("/app/data", exist_ok=True)
lines = ["# orders export v2", "# id | customer | path | note", ""]
notes = ["ok", "rush *", "-n", "fragile  (double  spaced)", "ask for Mr. O'Hara", "50% off",
         "-e \\t literal", "x?y", "[a-z]"]
for i in range(1, 400):
    path = rng.choice(["C:\\exports\\new\\%d.csv" % i, "/srv/orders/%d" % i, "\\\\share\\tmp\\%d" % i])
    note = rng.choice(notes)
    indent = rng.choice(["", "", "  ", "\t"])
    lines.append(f"{indent}{i:05d} | cust{rng.randint(1, 80):03d} | {path} | {note}  ")
    if rng.random() < 0.05:
        lines.append(rng.choice(["", "   ", "  # inline comment", "#"]))
with open("/app/data/orders.txt", "w") as f:
    f.write("\n".join(lines))  # no newline after the last record
