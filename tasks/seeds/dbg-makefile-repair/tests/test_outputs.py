import hashlib
import os
import shutil
import subprocess
import tempfile
import time

SRC = "/app/statlib"
PRISTINE = {
    "src/main.c": "03349ce74d298265ee7d42e3aa8c116127f718ad0e26c50519d320eb5729f619",
    "src/stats.c": "d69f89a10d8c416100867ed5bc1e7e42081a4f39921d0347f7fd2a73e71443a2",
    "include/stats.h": "bcdd4e34b0547cc3c707cdd56e8685a9d2d76e02fa5b3bf23f000ad1f66f8f0f",
    "tests/data.txt": "af394effecd68275e56d80e0d68098393ea7d20d1da978ed064d2d0d9823571b",
    "tests/expected.txt": "0ec227b28340fd85fc48afb70a54f901be9e24896942c46d848c21f24235441b",
    "tests/run.sh": "bd7fb8d978010bf565a2bc9fab7da3d7850cc23c922c365bb7d114c60129182d",
}


def fresh_tree():
    d = tempfile.mkdtemp() + "/statlib"
    shutil.copytree(SRC, d, ignore=shutil.ignore_patterns("build", "bin"))
    return d


def make(d, *args):
    return subprocess.run(["make", "-C", d, *args], capture_output=True, text=True, timeout=120)


def age_all(d, seconds=100):
    past = time.time() - seconds
    for root, _, files in os.walk(d):
        for f in files:
            os.utime(os.path.join(root, f), (past, past))


def built_tree():
    d = fresh_tree()
    r = make(d)
    assert r.returncode == 0, "make failed: " + (r.stderr or r.stdout)[-600:]
    age_all(d)
    return d


def mtime(d, p):
    return os.stat(os.path.join(d, p)).st_mtime


def test_sources_unchanged():
    for rel, digest in PRISTINE.items():
        with open(os.path.join(SRC, rel), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, f"{rel} was modified"


def test_default_target_builds():
    d = fresh_tree()
    r = make(d)
    assert r.returncode == 0, (r.stderr or r.stdout)[-600:]
    for p in ("build/main.o", "build/stats.o", "bin/stats"):
        assert os.path.isfile(os.path.join(d, p)), f"{p} missing"
    out = subprocess.run([d + "/bin/stats"], input="1 2 3 4\n", capture_output=True, text=True)
    assert out.stdout.strip() == "n=4 mean=2.5000 sd=1.2910", out.stdout


def test_make_test_target():
    d = fresh_tree()
    r = make(d, "test")
    assert r.returncode == 0, (r.stderr or r.stdout)[-600:]
    assert "tests passed" in r.stdout, r.stdout[-300:]


def test_up_to_date_after_build():
    d = built_tree()
    assert make(d, "-q", "bin/stats").returncode == 0, "make -q says out of date right after a build"


def test_header_change_rebuilds_everything():
    d = built_tree()
    before = {p: mtime(d, p) for p in ("build/main.o", "build/stats.o", "bin/stats")}
    past = time.time() - 50
    os.utime(os.path.join(d, "include/stats.h"), (past, past))
    assert make(d, "-q", "bin/stats").returncode != 0, "header change not noticed"
    assert make(d).returncode == 0
    for p, t in before.items():
        assert mtime(d, p) > t, f"{p} not rebuilt after include/stats.h changed"


def test_source_change_rebuilds_only_its_object():
    d = built_tree()
    stats_o, main_o, binary = (mtime(d, p) for p in ("build/stats.o", "build/main.o", "bin/stats"))
    past = time.time() - 50
    os.utime(os.path.join(d, "src/main.c"), (past, past))
    assert make(d).returncode == 0
    assert mtime(d, "build/main.o") > main_o, "build/main.o not rebuilt"
    assert mtime(d, "bin/stats") > binary, "bin/stats not relinked"
    assert mtime(d, "build/stats.o") == stats_o, "build/stats.o rebuilt needlessly"


def test_clean_removes_outputs():
    d = built_tree()
    r = make(d, "clean")
    assert r.returncode == 0, r.stderr[-300:]
    left = [p for p in ("build", "bin") if os.path.exists(os.path.join(d, p))]
    assert not left, f"left behind: {left}"
