#!/usr/bin/env python3
"""Fills /app/inbox with fake JPEGs and JSON sidecars (deterministic)."""
import hashlib
import json
import os

INBOX = "/app/inbox"
os.makedirs(INBOX, exist_ok=True)
cameras = ["Canon EOS R6", "Pixel 8 Pro", "FUJIFILM X-T5", "iPhone 15 (back)", "  DJI Mini/3  "]


def h(*p):
    return int(hashlib.sha256("|".join(map(str, p)).encode()).hexdigest(), 16)


for i in range(1, 61):
    name = f"IMG_{4000 + i * 7:05d}"
    if i % 11 == 0:
        name = f"DSC {i:03d}"
    meta = {"camera": cameras[h(i, "c") % len(cameras)], "rating": h(i, "r") % 6}
    if i % 13 != 0:
        y, mo, d = 2021 + h(i, "y") % 3, 1 + h(i, "m") % 12, 1 + h(i, "d") % 28
        hh, mi, ss = h(i, "h") % 24, h(i, "mi") % 60, h(i, "s") % 60
        if i in (20, 21, 22):  # burst: identical timestamp and camera
            y, mo, d, hh, mi, ss = 2022, 8, 14, 18, 30, 5
            meta["camera"] = "Pixel 8 Pro"
        meta["taken"] = f"{y:04d}-{mo:02d}-{d:02d}T{hh:02d}:{mi:02d}:{ss:02d}"
    with open(os.path.join(INBOX, name + ".json"), "w") as f:
        json.dump(meta, f, indent=2)
    body = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + f"ORIGINAL:{name}.jpg;".encode()
    body += hashlib.sha256(name.encode()).digest() * (8 + i % 5)
    with open(os.path.join(INBOX, name + ".jpg"), "wb") as f:
        f.write(body)
