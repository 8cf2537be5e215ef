"""Version control: a git repository around the results, with commits, a tag, a branch."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

AUTHOR, EMAIL = "T1 Synth", "synth@t1.invalid"
GIT = f"git -c user.name='{AUTHOR}' -c user.email={EMAIL}"

_REPO_TESTS = """
_@T@_SPEC = @SPEC@


def _@T@_git(*args):
    import subprocess

    r = subprocess.run(
        ["git", "-C", _@T@_SPEC["repo"], *args], capture_output=True, text=False, timeout=60
    )
    assert r.returncode == 0, (args, r.stderr.decode(errors="replace"))
    return r.stdout


def test_@T@_repo_on_main_and_clean():
    assert _@T@_git("rev-parse", "--abbrev-ref", "HEAD").decode().strip() == "main"
    assert _@T@_git("status", "--porcelain").decode() == "", "working tree is not clean"


def test_@T@_main_history():
    spec = _@T@_SPEC
    log = _@T@_git("log", "main", "--format=%s|%an|%ae").decode().splitlines()
    want = [f"{m}|{spec['author']}|{spec['email']}" for m in reversed(spec["messages"])]
    assert log == want, f"expected {want!r}, got {log!r}"


def test_@T@_committed_files_match_results():
    import os

    spec = _@T@_SPEC
    files = sorted(_@T@_git("ls-tree", "-r", "--name-only", "main").decode().splitlines())
    assert files == sorted(spec["files"]), files
    for rel in spec["files"]:
        with open(os.path.join(spec["root"], rel), "rb") as f:
            assert _@T@_git("show", f"main:{rel}") == f.read(), f"{rel} differs from {spec['root']}"
"""

_TAG_TESTS = """

def test_@T@_annotated_release_tag():
    spec = _@T@_SPEC
    assert _@T@_git("cat-file", "-t", spec["tag"]).decode().strip() == "tag", "not annotated"
    msg = _@T@_git("tag", "-l", "--format=%(contents:subject)", spec["tag"]).decode().strip()
    assert msg == spec["tag_message"], msg
    tagged = _@T@_git("rev-parse", spec["tag"] + "^{commit}").strip()
    assert tagged == _@T@_git("rev-parse", "main").strip(), "tag does not point at main"
"""

_BRANCH_TESTS = """

def test_@T@_notes_branch():
    spec = _@T@_SPEC
    branches = sorted(_@T@_git("branch", "--format=%(refname:short)").decode().split())
    assert branches == sorted(["main", spec["branch"]]), branches
    log = _@T@_git("log", spec["branch"], "--format=%s").decode().splitlines()
    assert log == [spec["notes_message"], *reversed(spec["messages"])], log
    assert _@T@_git("show", f"{spec['branch']}:NOTES.txt").decode() == spec["notes"]
    files = _@T@_git("ls-tree", "-r", "--name-only", "main").decode().split()
    assert "NOTES.txt" not in files, "NOTES.txt must only exist on the notes branch"
"""


def _files(rels: list[str]) -> str:
    return ", ".join(f"`{r}`" for r in rels)


def _repo_steps(wd: str, repo: str, rels: list[str], message: str) -> list[str]:
    return [
        f"mkdir -p {repo}",
        f"cp --parents {' '.join(rels)} {repo}/",
        f"git init -q -b main {repo}",
        f"git -C {repo} add -A",
        f"{GIT} -C {repo} commit -q -m '{message}'",
    ]


def _repo_text(wd: str, repo: str, rels: list[str], message: str) -> str:
    return (
        f"Create a git repository at `{repo}` (branch "
        f"`main`) containing copies of these files at the same paths relative to `{wd}`: "
        f"{_files(rels)}, each byte-identical to its final version in `{wd}`, and nothing "
        f"else. Commit them on `main` as author `{AUTHOR} <{EMAIL}>` with the commit message "
        f"`{message}`. Leave the working tree clean with `main` checked out."
    )


class GitCommitResults(Operator):
    name = "git_commit_results"
    family = "version_control"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        repo, message = f"{wd}/results_{tag}", f"Record results ({tag})"
        spec = {"repo": repo, "root": wd, "files": rels, "messages": [message]}
        spec |= {"author": AUTHOR, "email": EMAIL}
        return Extension(
            title="commit the results to git",
            steps=_repo_steps(wd, repo, rels, message),
            tests=render_tests(_REPO_TESTS, tag, spec),
            text=_repo_text(wd, repo, rels, message)
            + " The repository's history must consist of exactly that one commit.",
            requires=["git"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[repo],
        )


class GitTagRelease(Operator):
    name = "git_tag_release"
    family = "version_control"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        repo, message = f"{wd}/release_repo_{tag}", f"Release candidate ({tag})"
        version = f"v1.{ctx.round}.{ctx.rng.randint(0, 9)}"
        tag_message = f"Release {version}"
        spec = {"repo": repo, "root": wd, "files": rels, "messages": [message]}
        spec |= {"author": AUTHOR, "email": EMAIL, "tag": version, "tag_message": tag_message}
        return Extension(
            title="tag a release in git",
            steps=[
                *_repo_steps(wd, repo, rels, message),
                f"{GIT} -C {repo} tag -a {version} -m '{tag_message}'",
            ],
            tests=render_tests(_REPO_TESTS + _TAG_TESTS, tag, spec),
            text=_repo_text(wd, repo, rels, message)
            + f" The history of `main` must be exactly that one commit. Then create the "
            f"annotated tag `{version}` on that commit with the message `{tag_message}`.",
            requires=["git"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[repo],
        )


class GitNotesBranch(Operator):
    name = "git_notes_branch"
    family = "version_control"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        repo, message = f"{wd}/history_{tag}", f"Import results ({tag})"
        branch, notes_message = f"notes-{tag}", "Add release notes"
        notes = f"Results of round {ctx.round}: {len(rels)} file(s).\n"
        spec = {"repo": repo, "root": wd, "files": rels, "messages": [message]}
        spec |= {"author": AUTHOR, "email": EMAIL, "branch": branch}
        spec |= {"notes_message": notes_message, "notes": notes}
        return Extension(
            title="keep the results in git with a notes branch",
            steps=[
                *_repo_steps(wd, repo, rels, message),
                f"git -C {repo} checkout -q -b {branch}",
                f"printf '%s\\n' '{notes.rstrip()}' > {repo}/NOTES.txt",
                f"git -C {repo} add NOTES.txt",
                f"{GIT} -C {repo} commit -q -m '{notes_message}'",
                f"git -C {repo} checkout -q main",
            ],
            tests=render_tests(_REPO_TESTS + _BRANCH_TESTS, tag, spec),
            text=_repo_text(wd, repo, rels, message)
            + f" The history of `main` must be exactly that one commit. Then create the branch "
            f"`{branch}` from it with one more commit (same author, message `{notes_message}`) "
            f"that adds `NOTES.txt` containing exactly the line `{notes.rstrip()}` (newline-"
            f"terminated). The repository must have no other branches, and `main` must be "
            f"checked out at the end.",
            requires=["git"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[repo],
        )


OPERATORS: list[Operator] = [GitCommitResults(), GitTagRelease(), GitNotesBranch()]
