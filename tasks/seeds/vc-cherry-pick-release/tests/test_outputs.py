import os
import subprocess
import tarfile
import io
import tempfile

REPO = "/app/durations"
REL = "release/1.2"


def git(*args):
    return subprocess.run(
        ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def fix_commit():
    hashes = git("log", "main", "--grep=BUG-4711", "--format=%H").split()
    assert len(hashes) == 1, hashes
    return hashes[0]


def release_tree():
    d = tempfile.mkdtemp()
    data = subprocess.run(["git", "-C", REPO, "archive", REL], capture_output=True, check=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(d)
    return d


def run_py(d, code):
    return subprocess.run(["python3", "-c", code], cwd=d, capture_output=True, text=True)


def test_one_new_commit_on_release():
    assert int(git("rev-list", "--count", REL)) == 7, "release/1.2 must have 6 old commits + 1"
    assert git("log", "-1", "--format=%s", f"{REL}~1") == "release: 1.2.2", "old tip not parent"
    assert len(git("rev-list", "--parents", "-n", "1", REL).split()) == 2, "tip is a merge"


def test_cherry_pick_trailer():
    msg = git("log", "-1", "--format=%B", REL)
    assert f"(cherry picked from commit {fix_commit()})" in msg, msg


def test_fix_behaviour_on_release():
    d = release_tree()
    code = (
        "from parser import parse_duration as p\n"
        "assert p('1h30m') == 5400 and p('45s') == 45 and p('90') == 90 and p('2m5') == 125\n"
        "for bad in ('', 'h', '5x', '3mm'):\n"
        "    try:\n        p(bad)\n    except ValueError:\n        continue\n"
        "    raise SystemExit(f'{bad!r} accepted')\n"
    )
    r = run_py(d, code)
    assert r.returncode == 0, r.stderr[-500:] or r.stdout[-500:]
    r = subprocess.run(["bash", "check.sh"], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, "check.sh fails on release/1.2: " + r.stderr[-300:]


def test_no_other_main_changes_on_release():
    d = release_tree()
    assert open(os.path.join(d, "VERSION")).read().strip() == "1.2.2", "VERSION changed"
    r = run_py(d, "import parser\nassert not hasattr(parser, 'format_duration'), 'format_duration'\n"
                  "try:\n    parser.parse_duration('1d')\nexcept ValueError:\n    pass\n"
                  "else:\n    raise SystemExit('days unit present')\n")
    assert r.returncode == 0, r.stderr[-300:] or r.stdout
    doc = git("show", f"{REL}~1:parser.py").splitlines()[4]
    assert doc in git("show", f"{REL}:parser.py").splitlines(), "release docstring lost"
    changed = set(git("diff", "--name-only", f"{REL}~1", REL).split())
    allowed = set(git("diff-tree", "--no-commit-id", "--name-only", "-r", fix_commit()).split())
    assert changed <= allowed, f"new commit touches {changed - allowed}"


def test_main_unchanged():
    assert int(git("rev-list", "--count", "main")) == 35, "main history changed"
    assert git("log", "-1", "--format=%s", "main") == "docs: note 30", "main tip changed"


def test_release_checked_out_and_clean():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == REL, "release/1.2 is not checked out"
    assert git("status", "--porcelain") == "", "working tree not clean"
