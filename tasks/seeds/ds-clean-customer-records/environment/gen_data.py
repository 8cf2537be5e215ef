"""Generates /app/raw/customers.csv: ~1500 messy rows (mixed date formats, padding, case,
duplicate emails, invalid emails)."""
import datetime
import os
import random

rng = random.Random(31337)
os.makedirs("/app/raw", exist_ok=True)
MON = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
firsts = ["anna", "BORIS", "chloe", "Dmitri", "eve", "farid", "GRETA", "hiro", "ines", "jamal", "kofi", "lena"]
lasts = ["smith", "o'neil", "VAN DYKE", "nguyen", "Kowalski", "da silva", "MÜLLER", "li"]
countries = ["de", "DE ", " fr", "us", "US", "jp", "br", " Br"]


def fmt(d):
    k = rng.randrange(4)
    if k == 0:
        return d.isoformat()
    if k == 1:
        return d.strftime("%d/%m/%Y")
    if k == 2:
        return f"{MON[d.month - 1]} {d.day}, {d.year}"
    return d.strftime("%Y%m%d")


people = []
for i in range(1100):
    f, l = rng.choice(firsts), rng.choice(lasts)
    email = f"{f.lower()}.{l.lower().replace(' ', '').replace(chr(39), '')}{i}@example.{rng.choice(['com', 'org', 'net'])}"
    people.append((f, l, email))
rows = []
cid = 1000
for f, l, email in people:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        cid += rng.randint(1, 3)
        d = datetime.date(2019, 1, 1) + datetime.timedelta(days=rng.randint(0, 1800))
        name = rng.choice([f"{f} {l}", f"  {f}   {l} ", f"{f.upper()} {l}"])
        e = rng.choice([email, email.upper(), f"  {email} ", email.capitalize()])
        rows.append([str(cid), name, e, fmt(d), rng.choice(countries)])
for bad in ["no-at-sign.example.com", "two@@example.com", "trailing@", "@nouser.org", "user@nodot", "a@b@c.com"]:
    cid += 1
    rows.append([str(cid), "bad email", bad, "2021-05-05", "de"])
rng.shuffle(rows)
with open("/app/raw/customers.csv", "w", encoding="utf-8") as fh:
    fh.write("customer_id,name,email,signup_date,country\n")
    for r in rows:
        fh.write(",".join(f'"{x}"' if "," in x else x for x in r) + "\n")
