import hashlib
import os
import subprocess
import tempfile

SCRIPT = "/app/bin/snapshot.sh"
MATCHING = [
    "plain.txt",
    "a b/c d.txt",
    "a b/-rf.conf",
    "a b/--help.txt",
    "*.txt",
    "q?.conf",
    "[x].txt",
    "dir with 'quote'/say \"hi\".txt",
    "deep/er/than/that/tab\there.conf",
    "space at end .txt",
]
OTHERS = ["image.png", "notes.txt.bak", "fake.txt/inner.md", "conf", "deep/readme"]
_cache = {}


def content(rel):
    return f"content of {rel}\n".encode() * (1 + len(rel) % 3)


def run():
    if "r" in _cache:
        return _cache["r"]
    base = tempfile.mkdtemp(prefix="snap test ")
    src = os.path.join(base, "my src")
    for rel in MATCHING + OTHERS:
        p = os.path.join(src, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content(rel))
    # a file in the caller's cwd that an unquoted *.txt glob would pick up
    with open(os.path.join(base, "decoy.txt"), "w") as f:
        f.write("decoy\n")
    before = snapshot_tree(src)
    r = subprocess.run(
        ["bash", SCRIPT, "my src", "out dir/snap"], cwd=base, capture_output=True, text=True,
        timeout=30,
    )
    _cache["r"] = (r, src, os.path.join(base, "out dir", "snap"), before)
    return _cache["r"]


def snapshot_tree(root):
    out = {}
    for dp, dn, fn in os.walk(root):
        for n in fn:
            p = os.path.join(dp, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def test_script_exits_zero():
    r, _, _, _ = run()
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-500:]}"


def test_matching_files_copied_with_identical_content():
    _, _, dest, _ = run()
    missing = []
    for rel in MATCHING:
        p = os.path.join(dest, rel)
        if not os.path.isfile(p) or open(p, "rb").read() != content(rel):
            missing.append(rel)
    assert not missing, f"not copied correctly: {missing}"


def test_no_other_files_copied():
    _, _, dest, _ = run()
    got = set(snapshot_tree(dest)) if os.path.isdir(dest) else set()
    extra = got - set(MATCHING) - {"MANIFEST"}
    assert not extra, f"unexpected files in DEST: {sorted(extra)}"


def test_manifest_lines_and_order():
    _, _, dest, _ = run()
    expected = [
        f"{hashlib.sha256(content(rel)).hexdigest()}  {rel}"
        for rel in sorted(MATCHING, key=lambda s: s.encode())
    ]
    with open(os.path.join(dest, "MANIFEST"), encoding="utf-8") as f:
        got = f.read().split("\n")
    assert got[-1] == "", "MANIFEST must end with a newline"
    assert got[:-1] == expected, f"MANIFEST differs; got first lines {got[:3]}"


def test_source_tree_unchanged():
    _, src, _, before = run()
    assert snapshot_tree(src) == before, "SRC was modified"
