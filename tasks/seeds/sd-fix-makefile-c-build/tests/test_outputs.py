import hashlib
import math
import os
import subprocess
import tempfile
import time

PROJ = "/app/wordstat"
PRISTINE = {
    "src/count.c": "eff45b0f59521b77a281b4ced3d3f80425e5f57661cffe807b7bae53653629fe",
    "src/count.h": "e62b906ac52ff91d3ac9ef33e3ad59941c797a5e71628fce79a6aaca62439452",
    "src/main.c": "00a1c19828eb57cb51a993555b0e817d5a197d32d824e69224c0a2136e0752f8",
    "src/stats.c": "bf6845b496556705bb11963b0fbdf9f21504e771ed4205cfafbd6201b256a24a",
    "src/stats.h": "00f01e7e741ee283153157e8892b34d7f3150de76c75dfb1ea1babd19572c869",
    "tests/run.sh": "04b32fe2e026cb41495830e749ab33f15be2e1d5e49fde68400cae3a28a17745",
}


def make(*args):
    return subprocess.run(["make", *args], cwd=PROJ, capture_output=True, text=True, timeout=120)


def fresh_build():
    r = make("clean")
    assert r.returncode == 0, f"make clean failed: {r.stderr[-400:]}"
    r = make()
    assert r.returncode == 0, f"make failed: {r.stdout[-300:]} {r.stderr[-600:]}"


def expected_output(data: bytes) -> str:
    words, cur = [], bytearray()
    for b in data + b" ":
        if 65 <= b <= 90 or 97 <= b <= 122:
            if len(cur) < 64:
                cur.append(b | 0x20)
        elif cur:
            words.append(cur.decode())
            cur = bytearray()
    lengths = [len(w) for w in words]
    n = len(words)
    mean = sum(lengths) / n
    acc = 0.0
    for x in lengths:
        acc += (x - mean) * (x - mean)
    longest = ""
    for w in words:
        if len(w) > len(longest):
            longest = w
    return (f"words: {n}\nunique: {len(set(words))}\nmean_length: {mean:.2f}\n"
            f"stddev_length: {math.sqrt(acc / n):.2f}\nlongest: {longest}\n")


def sample_text() -> bytes:
    parts = []
    for i in range(4000):
        d = hashlib.sha256(str(i).encode()).digest()
        word = "".join("abcdefghijklmnopqrstuvwxyz"[x % 26] for x in d[: 1 + d[0] % 11])
        if d[1] % 7 == 0:
            word = word.upper()
        parts.append(word + [" ", ", ", ".\n", " -- ", "\t", "'s ", " caf\u00e9 "][d[2] % 7])
    parts.append("x" * 70 + " end\n")
    return "".join(parts).encode()


def test_default_target_builds_objects_and_binary():
    fresh_build()
    for name in ("main.o", "count.o", "stats.o", "wordstat"):
        assert os.path.isfile(os.path.join(PROJ, "build", name)), f"build/{name} missing"
    assert os.access(os.path.join(PROJ, "build", "wordstat"), os.X_OK)


def test_program_output_correct():
    fresh_build()
    data = sample_text()
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(data)
    r = subprocess.run([os.path.join(PROJ, "build", "wordstat"), f.name],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected_output(data), r.stdout


def test_make_test_passes():
    make("clean")
    r = make("test")
    assert r.returncode == 0, f"make test failed: {r.stdout[-400:]} {r.stderr[-400:]}"


def test_make_clean_removes_build_dir():
    fresh_build()
    r = make("clean")
    assert r.returncode == 0
    assert not os.path.exists(os.path.join(PROJ, "build")), "build/ still exists after make clean"


def set_mtime(rel, t):
    os.utime(os.path.join(PROJ, rel), (t, t))


def test_header_changes_tracked():
    fresh_build()
    outputs = ["build/main.o", "build/count.o", "build/stats.o", "build/wordstat"]
    for header in ("src/count.h", "src/stats.h"):
        now = time.time()
        for rel in os.listdir(os.path.join(PROJ, "src")):
            set_mtime("src/" + rel, now - 100)
        for rel in outputs:
            set_mtime(rel, now - 50)
        assert make("-q").returncode == 0, "make -q should exit 0 when the build is up to date"
        set_mtime(header, now - 20)
        assert make("-q").returncode != 0, f"touching {header} does not make the build out of date"
        assert make().returncode == 0
        assert make("-q").returncode == 0, f"make -q still fails after rebuilding for {header}"


def test_sources_and_tests_unchanged():
    for rel, digest in PRISTINE.items():
        with open(os.path.join(PROJ, rel), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, f"{rel} was modified"
