import os
import re
import shlex
import stat
import subprocess
import tempfile

PROJ = "/app/libvec"
CONSUMER = r"""
#include <stdio.h>
#include <vec.h>
int main(void) {
    vec3 a = {3, 4, 12}, b = {1, -2, 0.5};
    vec3 c = vec_cross(a, b), n = vec_normalize(a);
    printf("%.4f %.4f %.4f %.4f %.4f\n", vec_norm(a), vec_dot(a, b), c.x, n.z, vec_add(a, b).y);
    return 0;
}
"""


def make(*args):
    return subprocess.run(["make", *args], cwd=PROJ, capture_output=True, text=True, timeout=120)


def version():
    with open(os.path.join(PROJ, "VERSION")) as f:
        return f.read().strip()


def install(prefix, destdir=""):
    args = ["install", f"PREFIX={prefix}"] + ([f"DESTDIR={destdir}"] if destdir else [])
    r = make(*args)
    assert r.returncode == 0, f"make install failed: {r.stderr[-600:]}"
    return destdir + prefix


def expected_pc(prefix):
    return (f"prefix={prefix}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n"
            "Name: vec\nDescription: Small fixed-size vector math library\n"
            f"Version: {version()}\nLibs: -L${{libdir}} -lvec -lm\nCflags: -I${{includedir}}/vec\n")


def pc_flags(pc_path):
    vars_, fields = {}, {}
    with open(pc_path) as f:
        for line in f:
            line = line.rstrip("\n")
            if re.match(r"^\w+=", line):
                k, v = line.split("=", 1)
                vars_[k] = v
            elif ": " in line:
                k, v = line.split(": ", 1)
                fields[k] = v

    def expand(s):
        for _ in range(5):
            s = re.sub(r"\$\{(\w+)\}", lambda m: vars_.get(m.group(1), ""), s)
        return s
    return shlex.split(expand(fields.get("Cflags", ""))), shlex.split(expand(fields.get("Libs", "")))


def test_default_target_builds_archive():
    make("clean")
    r = make()
    assert r.returncode == 0, f"make failed: {r.stderr[-600:]}"
    members = subprocess.run(["ar", "t", os.path.join(PROJ, "libvec.a")],
                             capture_output=True, text=True, check=True).stdout.split()
    assert sorted(members) == ["vec.o", "vec_norm.o"], members


def test_install_layout_and_modes():
    root = install(tempfile.mkdtemp(prefix="vecprefix") + "/usr")
    with open(os.path.join(PROJ, "include/vec.h"), "rb") as f:
        header = f.read()
    for rel in ("lib/libvec.a", "include/vec/vec.h", "lib/pkgconfig/vec.pc"):
        p = os.path.join(root, rel)
        assert os.path.isfile(p), f"{rel} not installed"
        mode = stat.S_IMODE(os.stat(p).st_mode)
        assert mode == 0o644, f"{rel} has mode {oct(mode)}"
    with open(os.path.join(root, "include/vec/vec.h"), "rb") as f:
        assert f.read() == header, "installed header differs from include/vec.h"


def test_pkgconfig_file_content():
    prefix = tempfile.mkdtemp(prefix="vecpc") + "/opt/vec"
    install(prefix)
    with open(os.path.join(prefix, "lib/pkgconfig/vec.pc")) as f:
        assert f.read() == expected_pc(prefix)


def test_consumer_compiles_with_pc_flags():
    prefix = install(tempfile.mkdtemp(prefix="veccons") + "/usr")
    cflags, libs = pc_flags(os.path.join(prefix, "lib/pkgconfig/vec.pc"))
    work = tempfile.mkdtemp()
    src = os.path.join(work, "consumer.c")
    with open(src, "w") as f:
        f.write(CONSUMER)
    exe = os.path.join(work, "consumer")
    r = subprocess.run(["gcc", *cflags, src, "-o", exe, *libs], capture_output=True, text=True)
    assert r.returncode == 0, f"compile with {cflags} {libs} failed: {r.stderr[-600:]}"
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert out == "13.0000 1.0000 26.0000 0.9231 2.0000\n", out


def test_destdir_staging():
    stage = tempfile.mkdtemp(prefix="vecstage")
    install("/opt/vecstaged", destdir=stage)
    base = stage + "/opt/vecstaged"
    for rel in ("lib/libvec.a", "include/vec/vec.h", "lib/pkgconfig/vec.pc"):
        assert os.path.isfile(os.path.join(base, rel)), f"{rel} not staged under DESTDIR"
    assert not os.path.exists("/opt/vecstaged"), "DESTDIR ignored: files went to the real PREFIX"
    with open(os.path.join(base, "lib/pkgconfig/vec.pc")) as f:
        assert f.read() == expected_pc("/opt/vecstaged"), "prefix= must not include DESTDIR"


def test_uninstall_removes_files():
    prefix = install(tempfile.mkdtemp(prefix="vecun") + "/usr")
    r = make("uninstall", f"PREFIX={prefix}")
    assert r.returncode == 0, r.stderr[-400:]
    for rel in ("lib/libvec.a", "include/vec/vec.h", "lib/pkgconfig/vec.pc"):
        assert not os.path.exists(os.path.join(prefix, rel)), f"{rel} still installed"


def test_clean_removes_outputs():
    assert make().returncode == 0
    assert make("clean").returncode == 0
    left = []
    for dp, _, fn in os.walk(PROJ):
        left += [os.path.join(dp, n) for n in fn if n.endswith((".o", ".a"))]
    assert not left, f"left after make clean: {left}"
