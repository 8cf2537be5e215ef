import os
import random
import subprocess
import tempfile

SCRIPT = "/app/bin/extract_records.sh"


def expected(data):
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    keep = [l for l in lines if l.strip(b" \t") and not l.lstrip(b" \t").startswith(b"#")]
    return b"".join(l + b"\n" for l in keep), len(keep)


def run(data):
    d = tempfile.mkdtemp()
    for name in ("a.txt", "b.csv", "nota"):  # give globs something to expand to
        open(os.path.join(d, name), "w").close()
    src, dst = os.path.join(d, "in.txt"), os.path.join(d, "out.txt")
    with open(src, "wb") as f:
        f.write(data)
    r = subprocess.run(["bash", SCRIPT, src, dst], cwd=d, capture_output=True, timeout=60)
    out = open(dst, "rb").read() if os.path.exists(dst) else None
    return r, out


def test_script_is_executable():
    assert os.access(SCRIPT, os.X_OK), "script not executable"


def test_count_line_on_orders():
    data = open("/app/data/orders.txt", "rb").read()
    r, _ = run(data)
    assert r.returncode == 0, r.returncode
    assert r.stdout == b"processed %d records\n" % expected(data)[1], r.stdout


def test_orders_output_byte_identical():
    data = open("/app/data/orders.txt", "rb").read()
    _, out = run(data)
    want = expected(data)[0]
    assert out is not None, "no output file"
    got_n, want_n = out.count(b"\n"), want.count(b"\n")
    assert got_n == want_n, f"{got_n} lines, want {want_n}"
    assert out == want, "record lines altered"


def test_last_line_without_newline():
    data = b"# header\nfirst\n\nlast record without newline"
    r, out = run(data)
    assert out == b"first\nlast record without newline\n", out
    assert r.stdout == b"processed 2 records\n", r.stdout


def test_generated_inputs():
    rng = random.Random(99)
    pieces = [b"a", b"  lead", b"trail  ", b"\\back\\slash", b"*", b"?", b"[x]", b"-n", b"-e \\n",
              b"#", b"  #c", b"\t", b"", b"x  y", b"$HOME", b"`id`", b"%s%d", b"\\"]
    for _ in range(20):
        lines = [b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 4))) for _ in range(60)]
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        r, out = run(data)
        want, n = expected(data)
        assert out == want, f"mismatch for input {data[:200]!r}"
        assert r.stdout == b"processed %d records\n" % n, r.stdout
