import subprocess
import sys

REPO = "/app/calc"


def git(*args):
    return subprocess.run(
        ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def mean_is_right(src):
    # Each commit's calc.py runs in a program of its own, never in this runner: the history is
    # the agent's to write.
    probe = src + "\nprint(mean([1, 2, 3, 6]) == 3.0)\n"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return r.stdout.strip() == "True"


def first_bad():
    # The first commit whose check.sh fails, computed from the history itself. A commit's
    # calc.py is a blob: each distinct one is probed once, in the history's order.
    commits = git("rev-list", "--reverse", "HEAD").split()
    asked = "".join(f"{c}:calc.py\n" for c in commits)
    blobs = subprocess.run(
        ["git", "-C", REPO, "cat-file", "--batch-check=%(objectname)"],
        input=asked, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    probed = {}
    for c, blob in zip(commits, blobs):
        assert not blob.endswith(" missing"), f"commit {c} has no calc.py"
        if blob not in probed:
            probed[blob] = mean_is_right(git("cat-file", "blob", blob))
        if not probed[blob]:
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
