import subprocess

REPO = "/app/ledger"


def git(*args):
    return subprocess.run(
        ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def reflog(ref):
    # newest first: [(new_value, subject)]
    out = git("reflog", "show", "--format=%H %gs", ref)
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]


def before_oldest(ref, subject):
    entries = reflog(ref)
    idx = max(i for i, (_, s) in enumerate(entries) if s == subject)
    return entries[idx + 1][0]


def stash_commit():
    objs = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    found = []
    for line in objs.splitlines():
        sha, kind = line.split()
        if kind == "commit" and git("log", "-1", "--format=%s", sha) == "On feature/report: export json":
            found.append(sha)
    assert len(found) == 1, f"stash commit not found uniquely: {found}"
    return found[0]


def test_main_restored_to_pre_reset_commit():
    expected = before_oldest("main", "reset: moving to HEAD~2")
    assert git("rev-parse", "main") == expected, "main is not at its pre-reset commit"


def test_feature_branch_parent_is_old_tip():
    expected = before_oldest("HEAD", "checkout: moving from feature/report to main")
    parents = git("rev-list", "--parents", "-n", "1", "feature/report").split()[1:]
    assert parents == [expected], f"feature/report tip's parents {parents} != [{expected}]"


def test_recovered_commit_message():
    assert git("log", "-1", "--format=%s", "feature/report") == "wip: recovered stash"


def test_recovered_tree_matches_stash():
    want = git("rev-parse", stash_commit() + "^{tree}")
    got = git("rev-parse", "feature/report^{tree}")
    assert got == want, git("diff", "--stat", stash_commit(), "feature/report")


def test_main_checked_out_clean():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git("status", "--porcelain") == "", "working tree not clean"
