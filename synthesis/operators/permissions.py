"""Permissions and ownership: stated modes on results, an owned copy for another account."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests
from synthesis.profile import OutputFile

# Modes an operator may set, by whether the file is currently executable. Executable files keep
# every execute bit so checks like `mode & 0o111` in the parent's verifier still hold.
PLAIN_MODES = (0o600, 0o640, 0o444, 0o604)
EXEC_MODES = (0o555, 0o775, 0o711)
NOBODY = 65534

_MODE_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_modes():
    import os
    import stat

    for path, mode in _@T@_SPEC["modes"].items():
        got = f"{stat.S_IMODE(os.stat(path).st_mode):04o}"
        assert got == mode, f"{path}: expected {mode}, got {got}"
"""

_OWNED_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_owned_copies():
    import os
    import stat

    spec = _@T@_SPEC
    for rel in spec["files"]:
        src, dst = os.path.join(spec["root"], rel), os.path.join(spec["dest"], rel)
        st = os.stat(dst)
        assert (st.st_uid, st.st_gid) == (spec["uid"], spec["gid"]), (rel, st.st_uid, st.st_gid)
        got = f"{stat.S_IMODE(st.st_mode):04o}"
        assert got == spec["mode"], (rel, got)
        with open(src, "rb") as a, open(dst, "rb") as b:
            assert a.read() == b.read(), f"{dst} is not a copy of {src}"


def test_@T@_owned_dir_has_only_copies():
    import os

    spec = _@T@_SPEC
    found = sorted(
        os.path.relpath(os.path.join(d, n), spec["dest"])
        for d, _, names in os.walk(spec["dest"]) for n in names
    )
    assert found == sorted(spec["files"]), found
"""


class ChmodResults(Operator):
    name = "chmod_results"
    family = "permissions"

    def targets(self, parent: Parent) -> list[OutputFile]:
        # Files already at a non-default mode may be pinned by an earlier rewrite; a mode
        # change inside a git work tree would dirty it (and break "clean tree" checks).
        return [f for f in super().targets(parent) if f.mode in (0o644, 0o755) and not f.in_repo]

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        picked = self.pick(parent, ctx, ctx.rng.randint(1, 2))
        modes = {
            f.path: ctx.rng.choice(EXEC_MODES if f.mode & 0o111 else PLAIN_MODES) for f in picked
        }
        stated = "; ".join(f"`{p}` → `{m:04o}`" for p, m in modes.items())
        return Extension(
            title="set permission bits on the results",
            steps=[f"chmod {m:04o} {p}" for p, m in modes.items()],
            tests=render_tests(
                _MODE_TESTS, ctx.tag, {"modes": {p: f"{m:04o}" for p, m in modes.items()}}
            ),
            text=(
                "Set the permission bits of these files to "
                f"exactly the octal modes given (no setuid/setgid/sticky bits): {stated}. "
                "Leave their content unchanged."
            ),
            requires=["chmod"],
            consumes=list(modes),
            creates=[],
        )


class OwnedCopy(Operator):
    name = "owned_copy"
    family = "permissions"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        dest, mode = f"{wd}/shared_{tag}", ctx.rng.choice((0o640, 0o440, 0o604))
        spec = {"root": wd, "dest": dest, "files": rels, "uid": NOBODY, "gid": NOBODY}
        spec["mode"] = f"{mode:04o}"
        files = ", ".join(f"`{r}`" for r in rels)
        return Extension(
            title="hand the results to another account",
            steps=[
                f"install -D -o {NOBODY} -g {NOBODY} -m {mode:04o} {wd}/{r} {dest}/{r}"
                for r in rels
            ],
            tests=render_tests(_OWNED_TESTS, tag, spec),
            text=(
                f"Place copies of these files (paths relative "
                f"to `{wd}`) under `{dest}` at the same relative paths: {files}. Each copy must "
                f"be byte-identical to the final original, owned by uid {NOBODY} and gid "
                f"{NOBODY} (numeric), with mode exactly `{mode:04o}`. `{dest}` must contain no "
                "other files. Leave the originals unchanged."
            ),
            requires=["install"],  # coreutils: a base tool, so no apt step (tasks.environment)
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[dest],
        )


OPERATORS: list[Operator] = [ChmodResults(), OwnedCopy()]
