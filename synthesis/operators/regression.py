"""Regression test: the agent adds an executable check that fails once a result changes."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_check_passes_on_current_result():
    import os
    import subprocess

    spec = _@T@_SPEC
    assert os.access(spec["check"], os.X_OK), "check is not executable"
    r = subprocess.run([spec["check"]], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"check fails on the unchanged result: {r.stdout}{r.stderr}"


def test_@T@_check_catches_a_regression():
    import subprocess

    spec = _@T@_SPEC
    with open(spec["target"], "rb") as f:
        original = f.read()
    try:
        for altered in (original + b"regression\\n", original[:-1] or b"x"):
            with open(spec["target"], "wb") as f:
                f.write(altered)
            r = subprocess.run([spec["check"]], capture_output=True, text=True, timeout=60)
            assert r.returncode != 0, "check still passes after the result changed"
    finally:
        with open(spec["target"], "wb") as f:
            f.write(original)
"""


class RegressionCheck(Operator):
    name = "regression_check"
    family = "regression_test"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        check = f"{wd}/checks/regress_{tag}.sh"
        return Extension(
            title="add a regression check for a result",
            steps=[
                f"mkdir -p {wd}/checks",
                f"h=$(sha256sum {target} | cut -d' ' -f1)",
                f"printf '#!/bin/sh\\necho \"%s  %s\" | sha256sum --check --status -\\n' "
                f'"$h" {target} > {check}',
                f"chmod 755 {check}",
            ],
            tests=render_tests(_TESTS, tag, {"check": check, "target": target}),
            text=(
                f"Add the executable regression check `{check}` "
                f"(with a `#!` line, no arguments). It must exit 0 while `{target}` is exactly "
                "as you left it, and exit non-zero as soon as its content changes in any way "
                "(bytes added, removed or altered). It must not modify anything."
            ),
            requires=["sha256sum"],
            consumes=[target],
            creates=[check],
        )


OPERATORS: list[Operator] = [RegressionCheck()]
