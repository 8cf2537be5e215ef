import json
import os
import re

INBOX = "/app/inbox"
LIB = "/app/library"


def plan():
    """Expected destination per original photo, computed from the sidecars."""
    sidecars = sorted((n for n in os.listdir(INBOX) if n.endswith(".json")), key=str.encode)
    used, out = set(), {}
    for sc in sidecars:
        with open(os.path.join(INBOX, sc)) as f:
            meta = json.load(f)
        jpg = sc[:-5] + ".jpg"
        if "taken" in meta:
            t = meta["taken"]
            slug = re.sub(r"[^a-z0-9]+", "-", meta["camera"].lower()).strip("-")
            stem = (f"{t[0:4]}/{t[5:7]}/{t[0:4]}{t[5:7]}{t[8:10]}-"
                    f"{t[11:13]}{t[14:16]}{t[17:19]}_{slug}")
            dest, k = stem + ".jpg", 0
            while dest in used:
                k += 1
                dest = f"{stem}-{k}.jpg"
        else:
            dest = f"unsorted/{jpg}"
        used.add(dest)
        out[jpg] = dest
    return out


def is_original(path, jpg):
    with open(path, "rb") as f:
        data = f.read()
    return data.startswith(b"\xff\xd8\xff\xe0") and f"ORIGINAL:{jpg};".encode() in data


def test_dated_photos_in_place():
    wrong = [j for j, d in plan().items() if not d.startswith("unsorted/")
             and not (os.path.isfile(os.path.join(LIB, d)) and is_original(os.path.join(LIB, d), j))]
    assert not wrong, f"{len(wrong)} dated photos missing/wrong, e.g. {wrong[:3]}"


def test_collisions_numbered():
    p = plan()
    numbered = {j: d for j, d in p.items() if re.search(r"-\d+\.jpg$", d) and "unsorted" not in d}
    assert numbered, "the inbox should contain colliding photos"
    for j, d in numbered.items():
        path = os.path.join(LIB, d)
        assert os.path.isfile(path) and is_original(path, j), f"{j} should be at {d}"


def test_undated_photos_unsorted():
    undated = {j: d for j, d in plan().items() if d.startswith("unsorted/")}
    assert undated
    for j, d in undated.items():
        path = os.path.join(LIB, d)
        assert os.path.isfile(path) and is_original(path, j), f"{j} should be at {d}"


def test_inbox_has_no_photos_and_sidecars_kept():
    left = [n for n in os.listdir(INBOX) if n.endswith(".jpg")]
    assert not left, f"photos left in inbox: {left[:3]}"
    assert len([n for n in os.listdir(INBOX) if n.endswith(".json")]) == 60


def test_library_has_no_extra_files():
    expected = set(plan().values()) | {"index.csv"}
    got = set()
    for dp, _, fn in os.walk(LIB):
        for n in fn:
            got.add(os.path.relpath(os.path.join(dp, n), LIB))
    assert got == expected, f"extra {sorted(got - expected)[:3]}, missing {sorted(expected - got)[:3]}"


def test_index_csv():
    p = plan()
    expected = ["original,destination"] + [f"{j},{p[j]}" for j in sorted(p, key=str.encode)]
    with open(os.path.join(LIB, "index.csv")) as f:
        assert f.read().split("\n") == expected + [""]
