import collections
import os
import random
import re
import shutil
import subprocess
import tempfile

SRC = "/app/wordfreq"
_BIN = []


def binary():
    if not _BIN:
        d = tempfile.mkdtemp()
        shutil.copytree(SRC, d + "/w", ignore=shutil.ignore_patterns("wordfreq", "*.o"))
        r = subprocess.run(["make", "-C", d + "/w"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, "make failed: " + r.stderr[-800:]
        _BIN.append(d + "/w/wordfreq")
    return _BIN[0]


def reference(path, n):
    with open(path, "rb") as f:
        words = re.findall(rb"[A-Za-z]+", f.read())
    c = collections.Counter(w.lower() for w in words)
    top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return b"".join(b"%d %s\n" % (v, k) for k, v in top)


def check(path, n):
    r = subprocess.run([binary(), path, str(n)], capture_output=True, timeout=30)
    assert r.returncode == 0, f"{os.path.basename(path)} N={n}: exit status {r.returncode}"
    want = reference(path, n)
    assert r.stdout == want, f"{os.path.basename(path)} N={n}: output differs from reference"


def gen(text):
    fd, p = tempfile.mkstemp(suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return p


def test_builds_with_make():
    assert os.access(binary(), os.X_OK)


def test_provided_inputs():
    for name in sorted(os.listdir(SRC + "/inputs")):
        for n in (1, 10, 50):
            check(os.path.join(SRC, "inputs", name), n)


def test_very_long_words():
    rng = random.Random(11)
    words = ["".join(rng.choice("abcXYZ") for _ in range(rng.choice([40, 500, 8000]))) for _ in range(30)]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(5)) for _ in range(60))
    check(gen(text), 20)


def test_many_distinct_words():
    rng = random.Random(12)
    text = " ".join("w" + "".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(120000))
    check(gen(text), 100)


def test_ties_sorted_by_word():
    words = ["delta", "alpha", "charlie", "bravo", "echo", "Alpha", "foxtrot"]
    text = " ".join(words * 3) + " zulu yankee"
    check(gen(text), 6)


def test_n_larger_than_vocabulary():
    check(gen("one two two three three three\n"), 50)
