import subprocess

REPO = "/app/calc"


def git(*args):
    return subprocess.run(
        ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def first_bad():
    # The first commit whose check.sh fails, computed from the history itself.
    commits = git("rev-list", "--reverse", "HEAD").split()
    for c in commits:
        src = git("show", f"{c}:calc.py")
        scope = {}
        exec(src, scope)
        if scope["mean"]([1, 2, 3, 6]) != 3.0:
            return c
    return None


def test_first_bad_commit_identified():
    with open("/app/first_bad_commit.txt") as f:
        answer = f.read().strip()
    assert answer == first_bad(), f"wrong commit {answer!r}"


def test_history_not_rewritten():
    count = int(git("rev-list", "--count", "HEAD"))
    assert count == 41, f"expected 40 original commits plus one fix, found {count}"


def test_fix_commit_message():
    assert git("log", "-1", "--format=%s").startswith("fix:")


def test_check_passes_on_main():
    r = subprocess.run(["./check.sh"], cwd=REPO, capture_output=True)
    assert r.returncode == 0, r.stderr.decode()[-500:]


def test_working_tree_clean():
    assert git("status", "--porcelain") == ""
