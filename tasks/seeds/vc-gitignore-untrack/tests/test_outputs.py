import os
import subprocess

REPO = "/app/toolkit"


def git(*args, check=True):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=check)


def is_artefact(p):
    parts = p.split("/")
    return (
        parts[0] in ("build", "dist")
        or "__pycache__" in parts[:-1]
        or p.endswith(".pyc")
        or (parts[0] == "logs" and p.endswith(".log"))
        or p == ".env"
        or p.endswith(".swp")
    )


def original_files():
    return set(git("ls-tree", "-r", "--name-only", "main~1").stdout.split())


def ignored(path):
    return git("check-ignore", "--no-index", "-q", path, check=False).returncode == 0


def test_gitignore_ignores_artefacts():
    probes = ["build/obj/new.o", "build/x", "dist/toolkit-2.0.tar.gz", "src/__pycache__/a.pyc",
              "pkg/deep/__pycache__/mod.cpython-311.pyc", "loose.pyc", "src/toolkit/x.pyc",
              "logs/today.log", "logs/archive/2022/old.log", ".env", "src/.x.py.swp", ".a.swp"]
    missed = [p for p in probes if not ignored(p)]
    assert not missed, f"not ignored: {missed}"


def test_gitignore_keeps_sources_visible():
    probes = ["logs/.gitkeep", ".env.example", "src/main.py", "src/toolkit/core.py", "src/fast.c",
              "tests/test_core.py", "README.md", "Makefile", "docs/design.md"]
    wrong = [p for p in probes if ignored(p)]
    assert not wrong, f"wrongly ignored: {wrong}"


def test_single_cleanup_commit():
    assert int(git("rev-list", "--count", "main").stdout) == 4, "expected 3 old commits + 1"
    assert git("log", "-1", "--format=%s", "main").stdout.strip() == "chore: untrack build artefacts"
    assert git("log", "-1", "--format=%s", "main~1").stdout.strip() == "core: add sub"


def test_tracked_set_is_exact():
    before = original_files()
    expected = {p for p in before if not is_artefact(p)} | {".gitignore"}
    now = set(git("ls-tree", "-r", "--name-only", "main").stdout.split())
    assert now == expected, f"missing {sorted(expected - now)}, extra {sorted(now - expected)}"


def test_artefacts_kept_on_disk():
    arts = [p for p in original_files() if is_artefact(p)]
    assert len(arts) >= 10
    gone = [p for p in arts if not os.path.isfile(os.path.join(REPO, p))]
    assert not gone, f"deleted from disk: {gone}"


def test_status_clean():
    assert git("status", "--porcelain").stdout == "", git("status", "--porcelain").stdout
