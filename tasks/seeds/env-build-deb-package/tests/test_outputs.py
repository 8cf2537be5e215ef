import gzip
import hashlib
import os
import subprocess
import tempfile

SRC = "/app/logsum"
with open(os.path.join(SRC, "VERSION")) as _f:
    VERSION = _f.read().strip()
DEB = f"/app/dist/logsum_{VERSION}-1_all.deb"
FILES = {
    "usr/bin/logsum": "0755",
    "usr/share/man/man1/logsum.1.gz": "0644",
    "usr/share/doc/logsum/copyright": "0644",
    "etc/logsum.conf": "0644",
}
_cache = {}


def dpkg_deb(*args):
    return subprocess.run(["dpkg-deb", *args], capture_output=True, text=True, timeout=60)


def extracted():
    if "dir" not in _cache:
        d = tempfile.mkdtemp()
        assert dpkg_deb("-x", DEB, d + "/root").returncode == 0
        assert dpkg_deb("-e", DEB, d + "/ctrl").returncode == 0
        _cache["dir"] = d
    return _cache["dir"]


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def test_package_file_valid():
    assert os.path.isfile(DEB), f"{DEB} missing"
    r = dpkg_deb("--info", DEB)
    assert r.returncode == 0, r.stderr


def test_control_fields():
    want = {"Package": "logsum", "Version": f"{VERSION}-1", "Architecture": "all",
            "Maintainer": "Ops Team <ops@example.com>", "Depends": "python3 (>= 3.9)",
            "Section": "utils", "Priority": "optional"}
    for field, value in want.items():
        got = dpkg_deb("-f", DEB, field).stdout.strip()
        assert got == value, f"{field}: {got!r} != {value!r}"
    desc = dpkg_deb("-f", DEB, "Description").stdout.splitlines()
    assert desc and desc[0].strip() == "count log lines per severity", desc


def test_contents_modes_and_ownership():
    r = dpkg_deb("-c", DEB)
    assert r.returncode == 0, r.stderr
    files = {}
    for line in r.stdout.splitlines():
        perms, owner, _size, _date, _time, name = line.split(None, 5)
        assert owner == "root/root", f"{name} owned by {owner}"
        if not perms.startswith("d"):
            files[name.removeprefix("./")] = perms
    want = {rel: ("-rwxr-xr-x" if mode == "0755" else "-rw-r--r--") for rel, mode in FILES.items()}
    assert files == want, f"package files {files}"


def test_payload_matches_sources():
    root = extracted() + "/root"
    assert read(root + "/usr/bin/logsum") == read(SRC + "/logsum")
    assert read(root + "/etc/logsum.conf") == read(SRC + "/logsum.conf")
    assert read(root + "/usr/share/doc/logsum/copyright") == read(SRC + "/copyright")
    gz = read(root + "/usr/share/man/man1/logsum.1.gz")
    assert gzip.decompress(gz) == read(SRC + "/logsum.1"), "man page content differs"
    assert gz[4:8] == b"\0\0\0\0" and gz[3] & 0x08 == 0, "gzip -n: no name or timestamp stored"
    assert gz[8] == 2, "not compressed with -9 (maximum compression flag not set)"


def test_conffiles_and_md5sums():
    ctrl = extracted() + "/ctrl"
    assert read(ctrl + "/conffiles", "r").split() == ["/etc/logsum.conf"]
    root = extracted() + "/root"
    lines = read(ctrl + "/md5sums", "r").splitlines()
    got = {}
    for line in lines:
        digest, path = line.split(None, 1)
        got[path.strip()] = digest
    want = {rel: hashlib.md5(read(os.path.join(root, rel))).hexdigest()
            for rel in FILES if rel.startswith("usr/")}
    assert got == want, f"md5sums {got}"


def test_packaged_program_runs():
    root = extracted() + "/root"
    log = os.path.join(tempfile.mkdtemp(), "app.log")
    with open(log, "w") as f:
        f.write("1 INFO up\n2 WARN slow\n3 ERROR boom\n4 INFO ok\n5 DEBUG x\n")
    r = subprocess.run([root + "/usr/bin/logsum", log], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "LOGSUM_CONF": root + "/etc/logsum.conf"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ERROR\t1\nWARN\t1\nINFO\t2\nDEBUG\t1\n", r.stdout
