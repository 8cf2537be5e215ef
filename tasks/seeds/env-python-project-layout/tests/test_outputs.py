import json
import os
import shutil
import subprocess
import sys
import tempfile

P = "/app/tconv"
OFFSET = 273.15


def convert(value, src, dst):
    k = {"K": value, "C": value + OFFSET, "F": (value - 32) * 5 / 9 + OFFSET}[src]
    return {"K": k, "C": k - OFFSET, "F": (k - OFFSET) * 9 / 5 + 32}[dst]


def plain_env(**extra):
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
    env.update(extra)
    return env


def run(cmd, **kw):
    kw.setdefault("env", plain_env())
    kw.setdefault("cwd", "/")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, **kw)


def test_layout_and_config():
    for rel in ("src/tconv/__init__.py", "src/tconv/__main__.py", "src/tconv/units.py",
                "src/tconv/fmt.py"):
        assert os.path.isfile(os.path.join(P, rel)), f"{rel} missing"
    with open(os.path.join(P, "etc/tconv.json")) as f:
        cfg = json.load(f)
    assert cfg.get("precision") == 2 and cfg.get("default_to") == "K", cfg
    assert os.access(os.path.join(P, "bin/tconv"), os.X_OK), "bin/tconv not executable"


def test_entry_script_from_any_cwd():
    for cwd in ("/", tempfile.mkdtemp()):
        r = run([os.path.join(P, "bin/tconv"), "100", "C", "F"], cwd=cwd)
        assert r.returncode == 0, r.stderr[-500:]
        assert r.stdout == f"{convert(100, 'C', 'F'):.2f} F\n", r.stdout
    r = run([os.path.join(P, "bin/tconv"), "-40", "f"])
    assert r.stdout == f"{convert(-40, 'F', 'K'):.2f} K\n", r.stdout


def test_python_m_with_pythonpath():
    r = run([sys.executable, "-m", "tconv", "37.5", "C", "F"], env=plain_env(PYTHONPATH=P + "/src"),
            cwd=tempfile.mkdtemp())
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout == f"{convert(37.5, 'C', 'F'):.2f} F\n", r.stdout


def test_config_env_override():
    path = os.path.join(tempfile.mkdtemp(), "alt.json")
    with open(path, "w") as f:
        json.dump({"precision": 3, "default_to": "F"}, f)
    r = run([os.path.join(P, "bin/tconv"), "300", "K"], env=plain_env(TCONV_CONFIG=path))
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout == f"{convert(300, 'K', 'F'):.3f} F\n", r.stdout


def test_relocated_copy_uses_own_code_and_config():
    dest = os.path.join(tempfile.mkdtemp(), "moved project")
    shutil.copytree(P, dest, symlinks=True)
    with open(os.path.join(dest, "etc/tconv.json"), "w") as f:
        json.dump({"precision": 0, "default_to": "C"}, f)
    with open(os.path.join(dest, "src/tconv/fmt.py"), "a") as f:
        f.write("\n_orig = format_temp\n\ndef format_temp(v, u, p):\n    return 'moved:' + _orig(v, u, p)\n")
    r = run([os.path.join(dest, "bin/tconv"), "212", "F"])
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout == f"moved:{convert(212, 'F', 'C'):.0f} C\n", r.stdout


def test_not_installed_system_wide():
    r = run([sys.executable, "-c", "import tconv"], cwd=tempfile.mkdtemp())
    assert r.returncode != 0, "tconv must not be importable without PYTHONPATH (no installation)"
