import fnmatch
import os
import stat
import subprocess
import tarfile

SRC = "/app/mytool"
with open(os.path.join(SRC, "VERSION")) as _f:
    V = _f.read().strip()
with open(os.path.join(SRC, "RELEASE_EPOCH")) as _f:
    E = int(_f.read().strip())
TOP = f"mytool-{V}"
TGZ = f"/app/release/{TOP}.tar.gz"


def excluded(rel, is_dir):
    name = os.path.basename(rel)
    if is_dir:
        return name == "__pycache__" or rel == "build"
    return name.endswith((".pyc", ".swp")) or name == ".DS_Store"


def expected_order():
    """(archive name, source path) depth-first, entries of each directory in byte order."""
    out = [(TOP, SRC)]

    def walk(rel):
        base = os.path.join(SRC, rel)
        for name in sorted(os.listdir(base), key=os.fsencode):
            r = os.path.join(rel, name) if rel else name
            p = os.path.join(SRC, r)
            is_dir = os.path.isdir(p) and not os.path.islink(p)
            if excluded(r, is_dir):
                continue
            out.append((f"{TOP}/{r}", p))
            if is_dir:
                walk(r)
    walk("")
    return out


def members():
    with tarfile.open(TGZ, "r:gz") as t:
        return [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]


def test_archive_and_top_level_dir():
    ms = members()
    names = [m.name.rstrip("/") for m, _ in ms]
    assert names[0] == TOP and ms[0][0].isdir(), f"first entry {names[0]!r}"
    assert all(n == TOP or n.startswith(TOP + "/") for n in names), "entries outside the top dir"


def test_contents_match_filtered_tree():
    names = {m.name.rstrip("/") for m, _ in members()}
    want = {n for n, _ in expected_order()}
    assert names == want, f"missing {sorted(want - names)}, unexpected {sorted(names - want)}"
    for pat in ("*__pycache__*", "*.pyc", "*.swp", "*.DS_Store", f"{TOP}/build*"):
        assert not fnmatch.filter(names, pat), f"excluded pattern {pat} present"


def test_file_contents_and_modes():
    src = dict(expected_order())
    for m, data in members():
        p = src.get(m.name.rstrip("/"))
        if p is None:
            continue
        assert stat.S_IMODE(os.stat(p).st_mode) == m.mode, f"{m.name}: mode {oct(m.mode)}"
        if m.isfile():
            with open(p, "rb") as f:
                assert f.read() == data, f"{m.name}: content differs"


def test_normalized_owner_and_mtime():
    for m, _ in members():
        assert (m.uid, m.gid) == (0, 0), f"{m.name}: owner {m.uid}:{m.gid}"
        assert int(m.mtime) == E, f"{m.name}: mtime {m.mtime} != {E}"


def test_entry_order():
    got = [m.name.rstrip("/") for m, _ in members()]
    want = [n for n, _ in expected_order()]
    assert got == want, "entries are not in depth-first byte order"


def test_gzip_header_normalized():
    with open(TGZ, "rb") as f:
        head = f.read(10)
    assert head[:2] == b"\x1f\x8b"
    assert head[3] & 0x08 == 0, "gzip header stores a file name"
    assert head[4:8] == b"\0\0\0\0", "gzip header stores a timestamp"


def test_sha256sums_verifies():
    with open("/app/release/SHA256SUMS") as f:
        lines = f.read().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"  {TOP}.tar.gz"), lines
    r = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd="/app/release",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
