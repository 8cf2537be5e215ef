"""Generates /app/events/*.jsonl: assignment, page and purchase events of an A/B test, with
users exposed to both variants and events from internal test accounts."""
import json
import os
import random

rng = random.Random(2718)
os.makedirs("/app/events", exist_ok=True)
events = []
t = 1_710_000_000
for uid in range(1, 9001):
    user = f"u{uid:05d}"
    if uid % 97 == 0:
        user = f"qa-{uid}"  # internal test accounts
    variant = rng.choice("AB")
    t += rng.randint(1, 40)
    events.append({"ts": t, "user": user, "type": "assign", "variant": variant})
    if rng.random() < 0.03:  # exposed to both variants: contaminated
        events.append({"ts": t + 5, "user": user, "type": "assign", "variant": "B" if variant == "A" else "A"})
    for _ in range(rng.randint(1, 4)):
        events.append({"ts": t + rng.randint(10, 900), "user": user, "type": "page"})
    p = 0.105 if variant == "A" else 0.128
    if rng.random() < p:
        for _ in range(rng.choice([1, 1, 2])):  # repeat purchases count once per user
            events.append({"ts": t + rng.randint(900, 3000), "user": user, "type": "purchase",
                           "amount": round(rng.uniform(5, 120), 2)})
rng.shuffle(events)
for day in range(3):
    with open(f"/app/events/day{day + 1}.jsonl", "w") as f:
        for e in events[day::3]:
            f.write(json.dumps(e) + "\n")
