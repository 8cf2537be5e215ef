import hashlib
import math
import os
import subprocess
import tempfile

PROJ = "/app/geom"
PRISTINE = {
    "include/geom/shapes.hpp": "121e1e6bab65f710aa470cc8ff7b728ff127b8c09609d2e45b843ce7d5ef80d5",
    "src/area.cpp": "1ae32d8ab22a8b044e333c90d240f8846a268a86e29d0040102a8797b467c800",
    "src/shapes.cpp": "05a7cfc520b6a458ff755129a3260e7fe77c01b13f2398b2f9a85bbf52c4fb42",
    "app/main.cpp": "0b103f28c7805a4aa32431041815da1b3642676a690d2dce7d870bf5712882b6",
    "tests/test_geom.cpp": "a97bd8b643187fe6c2ef697bb10cf174874fbbe4cb003243fa843a571cd94d82",
}
_build = {}


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=300, **kw)


def build():
    """Configure and build once in a fresh directory; returns (build_dir, errors)."""
    if "dir" not in _build:
        b = tempfile.mkdtemp(prefix="geom-verify-")
        errs = []
        r = run("cmake", "-S", PROJ, "-B", b)
        if r.returncode != 0:
            errs.append("configure: " + r.stderr[-800:])
        else:
            r = run("cmake", "--build", b)
            if r.returncode != 0:
                errs.append("build: " + (r.stdout + r.stderr)[-800:])
        _build["dir"], _build["errs"] = b, errs
    return _build["dir"], _build["errs"]


def shapes_file():
    lines = ["# verifier shapes", ""]
    for i in range(300):
        d = hashlib.sha256(str(i).encode()).digest()
        x, y, z = 1 + d[0] % 40 + d[3] / 256, 1 + d[1] % 40 + d[4] / 256, 1 + d[2] % 40
        kind = d[5] % 9
        if kind < 3:
            lines.append(f"circle {x}")
        elif kind < 6:
            lines.append(f"rect {x} {y}")
        elif kind < 8:
            lines.append(f"tri {x} {y} {z}")
        else:
            lines.append(["rect 3", "circle -2", "hexagon 4", "tri 1 2 8", "rect 2 x",
                          "circle 1.5cm", "   "][d[6] % 7])
    return "\n".join(lines) + "\n"


def expected(text):
    count = skipped = 0
    area = perim = 0.0
    for line in text.split("\n")[:-1]:
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            vals = [float(t) for t in parts[1:]]
            ok = bool(parts) and all(v > 0 for v in vals)
        except ValueError:
            ok = False
        kind = parts[0] if parts else ""
        shape = None
        if ok and kind == "circle" and len(vals) == 1:
            shape = (math.pi * vals[0] * vals[0], 2 * math.pi * vals[0])
        elif ok and kind == "rect" and len(vals) == 2:
            shape = (vals[0] * vals[1], 2 * (vals[0] + vals[1]))
        elif ok and kind == "tri" and len(vals) == 3:
            a, b, c = vals
            if a + b > c and a + c > b and b + c > a:
                p = (a + b + c) / 2
                shape = (math.sqrt(p * (p - a) * (p - b) * (p - c)), a + b + c)
        if shape is None:
            skipped += 1
        else:
            count += 1
            area += shape[0]
            perim += shape[1]
    return f"count: {count}\nskipped: {skipped}\ntotal_area: {area:.3f}\ntotal_perimeter: {perim:.3f}\n"


def test_configure_and_build_succeed():
    b, errs = build()
    assert not errs, errs[0]
    for exe in ("geomcli", "test_geom"):
        assert os.access(os.path.join(b, exe), os.X_OK), f"{exe} not built at the top of B"


def test_geomcli_output_correct():
    b, errs = build()
    assert not errs, errs[0]
    text = shapes_file()
    path = os.path.join(tempfile.mkdtemp(), "shapes.txt")
    with open(path, "w") as f:
        f.write(text)
    r = run(os.path.join(b, "geomcli"), path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected(text), r.stdout


def test_ctest_runs_geom_unit():
    b, errs = build()
    assert not errs, errs[0]
    listed = run("ctest", "--test-dir", b, "-N").stdout
    names = [ln.split(":", 1)[1].strip() for ln in listed.splitlines() if ln.strip().startswith("Test")
             and "#" in ln]
    assert names == ["geom_unit"], f"registered tests: {names}"
    r = run("ctest", "--test-dir", b, "--output-on-failure")
    assert r.returncode == 0, r.stdout[-600:]


def test_install_layout():
    b, errs = build()
    assert not errs, errs[0]
    p = tempfile.mkdtemp(prefix="geom-prefix-")
    r = run("cmake", "--install", b, "--prefix", p)
    assert r.returncode == 0, r.stderr[-600:]
    assert os.access(os.path.join(p, "bin/geomcli"), os.X_OK), "bin/geomcli not installed"
    assert os.path.isfile(os.path.join(p, "lib/libgeom.a")), "lib/libgeom.a not installed"
    with open(os.path.join(p, "include/geom/shapes.hpp"), "rb") as f, \
            open(os.path.join(PROJ, "include/geom/shapes.hpp"), "rb") as g:
        assert f.read() == g.read(), "installed header differs"


def test_sources_unchanged():
    for rel, digest in PRISTINE.items():
        with open(os.path.join(PROJ, rel), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, f"{rel} was modified"
