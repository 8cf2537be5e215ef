"""Fault injection: the environment ships a broken helper; the instruction states the symptom.

The agent must find and repair the helper, then use it on a result. The verifier checks the
repaired helper's behaviour on inputs it generates itself, plus the output it was used for.
"""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

# (broken body, symptom) pairs for the line-counting shell helper.
_LINECOUNT_BUGS = (
    ('wc -w < "$1"', "prints the number of words instead of the number of lines"),
    ('grep -c . "$1"', "undercounts files that contain empty lines"),
    ('tail -n +2 "$1" | wc -l', "reports one line fewer than the file has"),
)
_LINECOUNT_FIXED = 'wc -l < "$1"'

# (broken body, symptom) pairs for the digest Python helper.
_DIGEST_BUGS = (
    (
        "data = f.read()[:4096]",
        "prints a wrong digest for files larger than 4096 bytes (small files are fine)",
    ),
    (
        "data = f.read().rstrip(b'\\n')",
        "prints a wrong digest for files that end with a newline",
    ),
)

_LINECOUNT_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_helper_repaired():
    import os
    import subprocess
    import tempfile

    spec = _@T@_SPEC
    sample = "alpha beta\\n\\ngamma delta epsilon\\nzeta\\n\\n"
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(sample)
    try:
        r = subprocess.run([spec["helper"], f.name], capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    want = str(sample.count("\\n"))
    assert r.stdout.strip() == want, f"helper printed {r.stdout!r} for a {want}-line file"


def test_@T@_helper_result_recorded():
    spec = _@T@_SPEC
    with open(spec["target"], "rb") as f:
        newlines = f.read().count(b"\\n")
    with open(spec["report"]) as f:
        assert f.read() == f"{newlines}\\n", "report must hold the line count and a newline"
"""

_DIGEST_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_helper_repaired():
    import hashlib
    import os
    import subprocess
    import tempfile

    spec = _@T@_SPEC
    data = bytes(range(256)) * 40 + b"tail line\\n"
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write(data)
    try:
        r = subprocess.run(
            ["python3", spec["helper"], f.name], capture_output=True, text=True, timeout=30
        )
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == hashlib.sha256(data).hexdigest(), "helper digest is wrong"


def test_@T@_helper_result_recorded():
    import hashlib

    spec = _@T@_SPEC
    with open(spec["target"], "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest() + "\\n"
    with open(spec["report"]) as f:
        assert f.read() == want, "report must hold the digest and a newline"
"""


def _linecount_helper(body: str) -> str:
    return f"#!/bin/bash\n# Print the number of lines of the file named by $1.\nset -eu\n{body}\n"


def _digest_helper(read: str) -> str:
    return (
        "#!/usr/bin/env python3\n"
        '"""Print the SHA-256 hex digest of the file named on the command line."""\n'
        "import hashlib\nimport sys\n\n"
        'with open(sys.argv[1], "rb") as f:\n'
        f"    {read}\n"
        "print(hashlib.sha256(data).hexdigest())\n"
    )


class BrokenLineCounter(Operator):
    name = "broken_line_counter"
    family = "fault_injection"
    kinds = ("text", "csv", "json")

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        broken, symptom = ctx.rng.choice(_LINECOUNT_BUGS)
        helper, report = f"{wd}/tools/linecount_{tag}.sh", f"{wd}/reports/linecount_{tag}.txt"
        fixed = _linecount_helper(_LINECOUNT_FIXED).rstrip("\n").split("\n")
        return Extension(
            title="repair the line-count helper",
            steps=[
                f"cat > {helper} <<'SH'",
                *fixed,
                "SH",
                f"chmod 755 {helper}",
                f"mkdir -p {wd}/reports",
                f"{helper} {target} | tr -d ' ' > {report}",
            ],
            tests=render_tests(
                _LINECOUNT_TESTS, tag, {"helper": helper, "target": target, "report": report}
            ),
            text=(
                f"`{helper} FILE` is supposed to print the number of lines of FILE (newline "
                f"characters, as `wc -l` counts them) and exit 0, but it {symptom}. Fix it in "
                f"place (same path, same interface, still executable). Then use it to write "
                f"the line count of `{target}` followed by a newline (just the number) to "
                f"`{report}`."
            ),
            env_files={f"app/{helper[len(wd) + 1 :]}": _linecount_helper(broken).encode()},
            requires=["wc", "bash"],
            consumes=[target],
            creates=[report],
        )


class BrokenDigestHelper(Operator):
    name = "broken_digest_helper"
    family = "fault_injection"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        broken, symptom = ctx.rng.choice(_DIGEST_BUGS)
        helper, report = f"{wd}/tools/digest_{tag}.py", f"{wd}/reports/digest_{tag}.txt"
        fixed = _digest_helper("data = f.read()").rstrip("\n").split("\n")
        return Extension(
            title="repair the digest helper",
            steps=[
                f"cat > {helper} <<'PY'",
                *fixed,
                "PY",
                f"mkdir -p {wd}/reports",
                f"python3 {helper} {target} > {report}",
            ],
            tests=render_tests(
                _DIGEST_TESTS, tag, {"helper": helper, "target": target, "report": report}
            ),
            text=(
                f"`python3 {helper} FILE` is supposed to print the SHA-256 hex digest of FILE's "
                f"bytes (as `sha256sum` computes it) followed by a newline, but it {symptom}. "
                f"Fix it in place (same path and interface). Then use it to write the digest "
                f"of `{target}` and a newline to `{report}`."
            ),
            env_files={f"app/{helper[len(wd) + 1 :]}": _digest_helper(broken).encode()},
            requires=["python3"],
            consumes=[target],
            creates=[report],
        )


OPERATORS: list[Operator] = [BrokenLineCounter(), BrokenDigestHelper()]
