import hashlib
import os
import re
import stat
import subprocess
import tarfile

DIST = "/app/dist"
OPT = "/opt/fmtlint"


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def checksums():
    out = {}
    with open(os.path.join(DIST, "SHA256SUMS")) as f:
        for line in f:
            digest, name = line.split()
            out[name.lstrip("*")] = digest
    return out


def verified_versions():
    good, bad = [], []
    sums = checksums()
    for name in os.listdir(DIST):
        m = re.fullmatch(r"fmtlint-([\d.]+)\.tar\.gz", name)
        if not m:
            continue
        with open(os.path.join(DIST, name), "rb") as f:
            ok = hashlib.sha256(f.read()).hexdigest() == sums.get(name)
        (good if ok else bad).append(m.group(1))
    return sorted(good, key=vkey), bad


def target():
    return verified_versions()[0][-1]


def login(cmd):
    return subprocess.run(["bash", "-lc", cmd], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/root", "TERM": "dumb"})


def test_newest_verified_version_installed():
    v = target()
    base = os.path.join(OPT, v)
    with tarfile.open(os.path.join(DIST, f"fmtlint-{v}.tar.gz")) as t:
        for m in t.getmembers():
            rel = m.name.split("/", 1)[1] if "/" in m.name else ""
            if not rel:
                continue
            p = os.path.join(base, rel)
            assert os.path.exists(p), f"{p} missing"
            if m.isfile():
                with open(p, "rb") as f:
                    assert f.read() == t.extractfile(m).read(), f"{p} content differs"
                assert stat.S_IMODE(os.stat(p).st_mode) == m.mode, f"{p} mode"


def test_damaged_versions_not_installed():
    _, bad = verified_versions()
    assert bad, "the dist directory should contain a damaged tarball"
    for v in bad:
        assert not os.path.exists(os.path.join(OPT, v)), f"damaged {v} was installed"
    leftovers = [n for n in os.listdir(OPT) if n not in (*verified_versions()[0], "current")]
    assert not any(any(b in n for b in bad) for n in leftovers), leftovers


def test_current_symlink_switched():
    cur = os.path.join(OPT, "current")
    assert os.path.islink(cur), "/opt/fmtlint/current must be a symlink"
    assert os.path.realpath(cur) == os.path.join(OPT, target()), os.readlink(cur)
    link = "/usr/local/bin/fmtlint"
    assert os.path.islink(link) and os.readlink(link) == "/opt/fmtlint/current/bin/fmtlint"


def test_previous_version_kept():
    with tarfile.open(os.path.join(DIST, "fmtlint-2.2.1.tar.gz")) as t:
        for m in t.getmembers():
            if m.isfile():
                p = os.path.join(OPT, "2.2.1", m.name.split("/", 1)[1])
                with open(p, "rb") as f:
                    assert f.read() == t.extractfile(m).read(), f"{p} changed"


def test_login_shell_environment():
    r = login('printf "%s\\n" "$FMTLINT_HOME"; fmtlint --version; fmtlint rules')
    assert r.returncode == 0, r.stderr[-500:]
    lines = r.stdout.splitlines()
    assert lines[0] == "/opt/fmtlint/current", lines
    assert lines[1] == f"fmtlint {target()}", lines
    with open(os.path.join(OPT, target(), "share/rules.txt")) as f:
        n = len(f.read().splitlines())
    assert lines[2] == f"{n} rules in /opt/fmtlint/current", lines
    with open("/etc/profile.d/fmtlint.sh") as f:
        assert "FMTLINT_HOME" in f.read()
