import configparser
import subprocess

REPO = "/app/webapp"
FEATURE = "feature/rate-limits"


def git(*args):
    return subprocess.run(
        ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
    ).stdout


def parse_ini(rev):
    c = configparser.ConfigParser()
    c.read_string(git("show", f"{rev}:config.ini"))
    return c


def unreleased(rev_or_text, is_text=False):
    text = rev_or_text if is_text else git("show", f"{rev_or_text}:CHANGELOG.md")
    lines = text.splitlines()
    i = lines.index("## Unreleased")
    j = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
    return [l.rstrip() for l in lines[i + 1 : j] if l.startswith("- ")], lines[j:]


def test_main_is_merge_commit_of_both_tips():
    parents = git("rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert len(parents) == 2, f"main tip has {len(parents)} parent(s), expected a merge commit"
    assert parents[1] == git("rev-parse", FEATURE).strip(), "second parent is not the feature tip"
    feature_count = int(git("rev-list", "--count", FEATURE))
    assert feature_count == 4, f"{FEATURE} was modified ({feature_count} commits, expected 4)"
    first = git("log", "--first-parent", "--format=%s", parents[0]).splitlines()
    assert first == [
        "server: tune workers, add bind_address",
        "server: move to 8443",
        "base: service skeleton",
    ], f"first parent is not the original main tip: {first}"
    total = int(git("rev-list", "--count", "main"))
    assert total == 7, f"expected 6 original commits plus the merge, found {total}"


def test_server_section_from_main():
    merged, ours = parse_ini("main"), parse_ini("main^1")
    assert dict(merged["server"]) == dict(ours["server"]), dict(merged["server"])


def test_rates_section_from_feature():
    merged, theirs = parse_ini("main"), parse_ini(FEATURE)
    assert dict(merged["rates"]) == dict(theirs["rates"]), dict(merged["rates"])


def test_changelog_entries_ordered():
    base = git("merge-base", "main^1", FEATURE).strip()
    base_e, _ = unreleased(base)
    ours, ours_tail = unreleased("main^1")
    theirs, _ = unreleased(FEATURE)
    expected = ours + [e for e in theirs if e not in base_e]
    got, tail = unreleased("main")
    assert got == expected, f"Unreleased entries {got} != {expected}"
    assert tail == ours_tail, "the rest of CHANGELOG.md differs from main"


def test_non_conflicting_changes_kept():
    assert git("show", "main:app.py") == git("show", "main^1:app.py"), "app.py differs from main"
    assert git("show", "main:ratelimit.py") == git("show", f"{FEATURE}:ratelimit.py"), (
        "ratelimit.py differs from the feature branch"
    )


def test_no_conflict_markers_and_clean_tree():
    hits = subprocess.run(
        ["git", "-C", REPO, "grep", "-nE", "^(<<<<<<<|=======|>>>>>>>)", "main", "--"],
        capture_output=True, text=True,
    ).stdout
    assert hits == "", f"conflict markers left: {hits[:300]}"
    assert git("status", "--porcelain") == "", "working tree not clean"
