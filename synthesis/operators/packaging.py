"""Packaging: archive the task's results (gzip tar), optionally with a checksum file."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_ARCHIVE_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_archive_is_gzip_tar():
    import tarfile

    spec = _@T@_SPEC
    with open(spec["archive"], "rb") as f:
        assert f.read(2) == b"\\x1f\\x8b", "archive is not gzip-compressed"
    assert tarfile.is_tarfile(spec["archive"]), "not a tar archive"


def test_@T@_archive_members_match_results():
    import os
    import tarfile

    spec = _@T@_SPEC
    with tarfile.open(spec["archive"], "r:gz") as tar:
        files = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
        assert sorted(files) == sorted(spec["members"]), sorted(files)
        for rel in spec["members"]:
            data = tar.extractfile(files[rel]).read()
            with open(os.path.join(spec["root"], rel), "rb") as f:
                assert data == f.read(), f"archived {rel} differs from the file on disk"
"""

_CHECKSUM_TESTS = """

def test_@T@_archive_checksum_file():
    import hashlib
    import os

    spec = _@T@_SPEC
    with open(spec["archive"], "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(spec["checksum"]) as f:
        text = f.read()
    want = f"{digest}  {os.path.basename(spec['archive'])}\\n"
    assert text == want, f"expected {want!r}, got {text!r}"
"""


def _members(rels: list[str]) -> str:
    return ", ".join(f"`{r}`" for r in rels)


class TarOutputs(Operator):
    name = "tar_outputs"
    family = "packaging"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        archive = f"{wd}/dist/results_{tag}.tar.gz"
        spec = {"archive": archive, "members": rels, "root": wd}
        return Extension(
            title="package the results",
            steps=[f"mkdir -p {wd}/dist", f"tar -czf {archive} -C {wd} {' '.join(rels)}"],
            tests=render_tests(_ARCHIVE_TESTS, tag, spec),
            text=(
                f"Create the gzip-compressed tar archive "
                f"`{archive}`. It must contain exactly these files (plus, optionally, their "
                f"directories), stored with paths relative to `{wd}`: {_members(rels)}. Each "
                f"archived file must be byte-identical to the final version of that file in "
                f"`{wd}`."
            ),
            requires=["tar", "gzip"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[archive],
        )


class TarWithChecksum(Operator):
    name = "tar_with_checksum"
    family = "packaging"
    max_outputs = 2

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        name = f"bundle_{tag}.tar.gz"
        archive, checksum = f"{wd}/release/{name}", f"{wd}/release/{name}.sha256"
        spec = {"archive": archive, "members": rels, "root": wd, "checksum": checksum}
        return Extension(
            title="publish a release bundle with a checksum",
            steps=[
                f"mkdir -p {wd}/release",
                f"tar -czf {archive} -C {wd} {' '.join(rels)}",
                f"cd {wd}/release",
                f"sha256sum {name} > {name}.sha256",
                f"cd {wd}",
            ],
            tests=render_tests(_ARCHIVE_TESTS + _CHECKSUM_TESTS, tag, spec),
            text=(
                f"Create the gzip-compressed tar archive "
                f"`{archive}` containing exactly these files (plus, optionally, their "
                f"directories), stored with paths relative to `{wd}`: {_members(rels)}; each "
                f"archived file must be byte-identical to the final version in `{wd}`. Then "
                f"write `{checksum}` containing the single line `<sha256 hex digest of the "
                f"archive>  {name}` (two spaces, bare file name, newline-terminated), exactly "
                f"as `sha256sum {name}` prints it when run inside `{wd}/release`."
            ),
            requires=["tar", "gzip", "sha256sum"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[archive, checksum],
        )


OPERATORS: list[Operator] = [TarOutputs(), TarWithChecksum()]
