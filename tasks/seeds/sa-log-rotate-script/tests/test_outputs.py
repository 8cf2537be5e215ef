import gzip
import os
import stat
import subprocess
import tempfile

SCRIPT = "/app/rotate.sh"
_cache = {}


def scenario():
    """Build a fresh directory, run the script once (KEEP=3, MAX=100) and remember the result."""
    if "result" in _cache:
        return _cache["result"]
    base = tempfile.mkdtemp(prefix="rot ")
    d = os.path.join(base, "var log")
    os.makedirs(os.path.join(d, "sub dir"))
    big = "".join(f"line {i} of the big log\n" for i in range(40))
    files = {
        "api.log": big,
        "api.log.1": "previous one\n",
        "my service.log": big + "tail\n",
        "tiny.log": "x" * 100,
        "tiny.log.1": "tiny previous\n",
        "notes.txt": big,
        "sub dir/deep.log": big,
    }
    for rel, text in files.items():
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    os.chmod(os.path.join(d, "my service.log"), 0o640)
    gz = {"api.log.2.gz": "second\n", "api.log.3.gz": "third\n", "api.log.4.gz": "fourth\n",
          "tiny.log.2.gz": "tiny second\n"}
    for rel, text in gz.items():
        with gzip.open(os.path.join(d, rel), "wt") as f:
            f.write(text)
    r = subprocess.run([SCRIPT, d, "100", "3"], capture_output=True, text=True, timeout=30)
    _cache["result"] = (d, r, big)
    return _cache["result"]


def read_gz(path):
    with gzip.open(path, "rt") as f:
        return f.read()


def test_script_runs_successfully():
    assert os.access(SCRIPT, os.X_OK), "/app/rotate.sh missing or not executable"
    d, r, _ = scenario()
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-400:]}"


def test_oversized_log_moved_to_dot1_and_recreated_empty():
    d, _, big = scenario()
    with open(os.path.join(d, "api.log.1")) as f:
        assert f.read() == big, "api.log.1 must hold the old api.log content"
    assert os.path.getsize(os.path.join(d, "api.log")) == 0, "api.log must be recreated empty"
    with open(os.path.join(d, "my service.log.1")) as f:
        assert f.read() == big + "tail\n", "names with spaces must be rotated too"
    mode = stat.S_IMODE(os.stat(os.path.join(d, "my service.log")).st_mode)
    assert mode == 0o640, f"new 'my service.log' has mode {oct(mode)}, expected 0o640"


def test_previous_rotations_shifted_and_compressed():
    d, _, _ = scenario()
    assert read_gz(os.path.join(d, "api.log.2.gz")) == "previous one\n", "old .1 must become .2.gz"
    assert read_gz(os.path.join(d, "api.log.3.gz")) == "second\n", "old .2.gz must become .3.gz"


def test_keep_limit_enforced():
    d, _, _ = scenario()
    names = sorted(n for n in os.listdir(d) if n.startswith("api.log"))
    assert names == ["api.log", "api.log.1", "api.log.2.gz", "api.log.3.gz"], names


def test_small_and_other_files_untouched():
    d, _, big = scenario()
    with open(os.path.join(d, "tiny.log")) as f:
        assert f.read() == "x" * 100, "a log of exactly MAX_BYTES must not be rotated"
    with open(os.path.join(d, "tiny.log.1")) as f:
        assert f.read() == "tiny previous\n"
    assert read_gz(os.path.join(d, "tiny.log.2.gz")) == "tiny second\n"
    assert not os.path.exists(os.path.join(d, "tiny.log.3.gz"))
    assert not os.path.exists(os.path.join(d, "notes.txt.1"))
    assert not os.path.exists(os.path.join(d, "sub dir", "deep.log.1")), "subdirs are not scanned"


def test_reports_rotated_files():
    _, r, _ = scenario()
    lines = sorted(line for line in r.stdout.splitlines() if line.strip())
    assert lines == ["rotated api.log", "rotated my service.log"], lines
