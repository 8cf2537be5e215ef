"""Performance constraint: a correct but quadratic helper must be made fast, then used."""

from __future__ import annotations

from synthesis.operators.extension import Extension, Operator, Parent, RewriteContext, render_tests

# The quadratic helper needs ~10 CPU-seconds at this size, the set-based one ~0.1: a budget
# of 3 s separates them even on a heavily loaded machine.
LINES, DISTINCT, BUDGET_S = 100_000, 50_000, 3.0

_SLOW = '''#!/usr/bin/env python3
"""Print the lines of the file named on the command line without repeats: each distinct line
is printed once, at its first occurrence, in input order."""
import sys

seen = []
with open(sys.argv[1]) as f:
    for line in f:
        if line not in seen:
            seen.append(line)
            sys.stdout.write(line)
'''

_FAST = [
    "#!/usr/bin/env python3",
    "import sys",
    "seen = set()",
    "with open(sys.argv[1]) as f:",
    "    for line in f:",
    "        if line not in seen:",
    "            seen.add(line)",
    "            sys.stdout.write(line)",
]

_TESTS = """
_@T@_SPEC = @SPEC@


def test_@T@_helper_fast_and_correct():
    import os
    import random
    import subprocess
    import tempfile
    import time

    spec = _@T@_SPEC
    rng = random.Random(7)
    lines = [f"item-{rng.randrange(spec['distinct'])}\\n" for _ in range(spec["lines"])]
    want, seen = [], set()
    for line in lines:
        if line not in seen:
            seen.add(line)
            want.append(line)
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.writelines(lines)
    try:
        t0 = time.monotonic()
        r = subprocess.run(
            ["python3", spec["helper"], f.name],
            capture_output=True, text=True, timeout=spec["budget_s"] * 1.5 + 1,
        )
        elapsed = time.monotonic() - t0
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(want), "output differs from first-occurrence dedupe"
    assert elapsed <= spec["budget_s"], f"took {elapsed:.2f}s (budget {spec['budget_s']}s)"


def test_@T@_deduped_result():
    spec = _@T@_SPEC
    want, seen = [], set()
    with open(spec["target"]) as f:
        for line in f:
            if line not in seen:
                seen.add(line)
                want.append(line)
    with open(spec["report"]) as f:
        assert f.read() == "".join(want), "deduplicated result is wrong"
"""


class SlowDedupeHelper(Operator):
    name = "slow_dedupe_helper"
    family = "performance"
    kinds = ("text", "csv")
    max_lines = 50_000

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        wd, tag = parent.workdir, ctx.tag
        target = self.pick(parent, ctx, 1)[0].path
        helper, report = f"{wd}/tools/uniq_{tag}.py", f"{wd}/reports/unique_{tag}.txt"
        spec = {"helper": helper, "target": target, "report": report, "lines": LINES}
        spec |= {"distinct": DISTINCT, "budget_s": BUDGET_S}
        return Extension(
            title="make the dedupe helper fast",
            steps=[
                f"cat > {helper} <<'PY'",
                *_FAST,
                "PY",
                f"mkdir -p {wd}/reports",
                f"python3 {helper} {target} > {report}",
            ],
            tests=render_tests(_TESTS, tag, spec),
            text=(
                f"`python3 {helper} FILE` prints FILE's lines without repeats (each distinct "
                "line once, at its first occurrence, in input order). Its output is correct but "
                f"it is far too slow: on a file of {LINES} lines with up to {DISTINCT} "
                f"distinct values it must finish within {BUDGET_S:g} s (wall clock). Make it fast "
                f"without changing its output or interface. Then run it on `{target}` and "
                f"write its output to `{report}`."
            ),
            env_files={f"app/{helper[len(wd) + 1 :]}": _SLOW.encode()},
            requires=["python3"],
            consumes=[target],
            creates=[report],
        )


OPERATORS: list[Operator] = [SlowDedupeHelper()]
