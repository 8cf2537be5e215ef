import os

from datagen import ROOT, files, symlinks


def expected():
    fs = files()
    groups = {}
    for rel, data in fs.items():
        if data:
            groups.setdefault(data, []).append(rel)
    pairs = []
    for paths in groups.values():
        paths.sort(key=str.encode)
        pairs += [(d, paths[0]) for d in paths[1:]]
    pairs.sort(key=lambda x: x[0].encode())
    return fs, pairs


def same_inode(a, b):
    """True when a and b are hard links of one file. Inode numbers are not compared because
    overlay filesystems may report different st_ino for links of one copied-up file; instead
    a byte appended through `a` must appear through `b` (then it is removed again)."""
    if os.path.islink(a) or os.path.islink(b) or os.stat(b).st_nlink < 2:
        return False
    size = os.path.getsize(a)
    with open(a, "ab") as f:
        f.write(b"#")
    try:
        with open(b, "rb") as f:
            f.seek(size)
            return f.read() == b"#"
    finally:
        os.truncate(a, size)


def test_duplicates_hardlinked_to_canonical():
    _, pairs = expected()
    assert pairs
    bad = [d for d, c in pairs if not same_inode(os.path.join(ROOT, c), os.path.join(ROOT, d))]
    assert not bad, f"{len(bad)} duplicates not hard-linked, e.g. {bad[:3]}"


def test_all_paths_keep_original_content():
    fs, _ = expected()
    bad = []
    for rel, data in fs.items():
        p = os.path.join(ROOT, rel)
        if os.path.islink(p) or not os.path.isfile(p) or open(p, "rb").read() != data:
            bad.append(rel)
    assert not bad, f"changed or missing: {bad[:3]}"


def test_unique_and_empty_files_not_linked():
    fs, pairs = expected()
    linked = {d for d, _ in pairs} | {c for _, c in pairs}
    bad = [rel for rel in fs if rel not in linked and os.stat(os.path.join(ROOT, rel)).st_nlink != 1]
    assert not bad, f"files that should stay unlinked: {bad[:3]}"


def test_symlinks_and_tree_otherwise_unchanged():
    fs, _ = expected()
    for rel, target in symlinks().items():
        p = os.path.join(ROOT, rel)
        assert os.path.islink(p) and os.readlink(p) == target, f"{rel} must stay a symlink"
    got = set()
    for dp, _, fn in os.walk(ROOT):
        got |= {os.path.relpath(os.path.join(dp, n), ROOT) for n in fn}
    expected_names = set(fs) | set(symlinks())
    assert got == expected_names, f"extra {sorted(got - expected_names)[:3]}"


def test_dupes_tsv():
    _, pairs = expected()
    with open("/app/dupes.tsv") as f:
        assert f.read() == "".join(f"{d}\t{c}\n" for d, c in pairs)


def test_reclaimed_bytes():
    fs, pairs = expected()
    with open("/app/reclaimed.txt") as f:
        assert f.read() == f"{sum(len(fs[d]) for d, _ in pairs)}\n"
