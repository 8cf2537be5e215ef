#!/usr/bin/env python3
"""Deterministic file tree for the dedupe task (identical copy in tests/datagen.py)."""
import hashlib
import os

ROOT = "/app/data"
DIRS = ["photos", "docs/2023", "docs/2024", "backup/old docs", "misc", "misc/deep/er"]


def h(*p):
    return int(hashlib.sha256("|".join(map(str, p)).encode()).hexdigest(), 16)


def files():
    """{relative path: bytes} of every regular file the setup creates."""
    out = {}
    for i in range(220):
        d = DIRS[h(i, "d") % len(DIRS)]
        name = f"file {i:03d}.dat" if i % 9 == 0 else f"f{i:03d}.bin"
        c = h(i, "c") % 150
        if i % 37 == 5:
            data = b""
        else:
            data = hashlib.sha256(str(c).encode()).digest() * (1 + c * 7 % 60)
        out[f"{d}/{name}"] = data
    return out




def symlinks():
    fs = files()
    target = sorted(p for p in fs if fs[p])[0]
    return {"misc/latest.lnk": os.path.relpath(target, "misc")}


if __name__ == "__main__":
    for rel, data in files().items():
        p = os.path.join(ROOT, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o644)
    for rel, target in symlinks().items():
        os.symlink(target, os.path.join(ROOT, rel))
