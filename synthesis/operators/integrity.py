"""Integrity: checksum manifests of the task's results (sha256sum format, or JSON)."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_SUMS_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_manifest_lines():
    import hashlib
    import os

    spec = _@T@_SPEC
    want = []
    for rel in sorted(spec["files"]):
        with open(os.path.join(spec["root"], rel), "rb") as f:
            want.append(f"{hashlib.sha256(f.read()).hexdigest()}  {rel}")
    with open(spec["manifest"]) as f:
        got = f.read().splitlines()
    assert got == want, f"expected {want!r}, got {got!r}"


def test_@T@_manifest_verifies_with_sha256sum():
    import subprocess

    spec = _@T@_SPEC
    r = subprocess.run(
        ["sha256sum", "--check", "--strict", spec["manifest"]],
        cwd=spec["root"], capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
"""

_JSON_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_json_manifest_shape():
    import json

    spec = _@T@_SPEC
    with open(spec["manifest"]) as f:
        doc = json.load(f)
    assert sorted(doc) == ["files", "root"], sorted(doc)
    assert doc["root"] == spec["root"], doc["root"]
    assert [e["path"] for e in doc["files"]] == sorted(spec["files"]), doc["files"]


def test_@T@_json_manifest_sizes_and_digests():
    import hashlib
    import json
    import os

    spec = _@T@_SPEC
    with open(spec["manifest"]) as f:
        entries = {e["path"]: e for e in json.load(f)["files"]}
    for rel in spec["files"]:
        with open(os.path.join(spec["root"], rel), "rb") as f:
            data = f.read()
        e = entries[rel]
        assert sorted(e) == ["bytes", "path", "sha256"], sorted(e)
        assert e["bytes"] == len(data), (rel, e["bytes"], len(data))
        assert e["sha256"] == hashlib.sha256(data).hexdigest(), rel
"""


def _files(rels: list[str]) -> str:
    return ", ".join(f"`{r}`" for r in rels)


class Sha256Manifest(Operator):
    name = "sha256_manifest"
    family = "integrity"
    max_outputs = 4

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        manifest = f"{wd}/SHA256SUMS_{tag}"
        return Extension(
            title="write a checksum manifest",
            steps=[f"sha256sum {' '.join(rels)} > {manifest}"],
            tests=render_tests(_SUMS_TESTS, tag, {"manifest": manifest, "files": rels, "root": wd}),
            text=(
                f"Write `{manifest}` in the output format of "
                "`sha256sum` (one line per file: the 64-digit lowercase hex digest, two spaces, "
                f"the path) listing exactly these files with paths relative to `{wd}`, sorted "
                f"by path: {_files(rels)}. `sha256sum --check --strict` run in `{wd}` must "
                "accept it."
            ),
            requires=["sha256sum"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[manifest],
        )


class JsonManifest(Operator):
    name = "json_manifest"
    family = "integrity"
    max_outputs = 4

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        rels = [f.rel for f in self.pick(parent, ctx)]
        manifest = f"{wd}/manifest_{tag}.json"
        return Extension(
            title="write a JSON integrity manifest",
            steps=[
                "python3 - <<'PY'",
                "import hashlib, json, os",
                f"root, files = {wd!r}, {rels!r}",
                "entries = []",
                "for rel in sorted(files):",
                "    data = open(os.path.join(root, rel), 'rb').read()",
                "    sha = hashlib.sha256(data).hexdigest()",
                "    entries.append({'path': rel, 'bytes': len(data), 'sha256': sha})",
                f"json.dump({{'root': root, 'files': entries}}, open({manifest!r}, 'w'), indent=2)",
                "PY",
            ],
            tests=render_tests(_JSON_TESTS, tag, {"manifest": manifest, "files": rels, "root": wd}),
            text=(
                f"Write `{manifest}`: a JSON object with exactly "
                f'two keys, `"root"` (the string `"{wd}"`) and `"files"`, an array with one '
                f"entry per file below, sorted by path: {_files(rels)}. Each entry is an object "
                'with exactly the keys `"path"` (relative to the root, as listed), `"bytes"` '
                '(the file size as an integer) and `"sha256"` (lowercase hex digest of the '
                "file's final content)."
            ),
            requires=["python3"],
            consumes=[f"{wd}/{r}" for r in rels],
            creates=[manifest],
        )


OPERATORS: list[Operator] = [Sha256Manifest(), JsonManifest()]
