"""Pure pieces of synthesis v2 on hand-written inputs: guard selection and insertion, the
composed instruction and dependency depth, distinct tools, static vacuity and flakiness,
coverage's folding of spec dicts."""

from __future__ import annotations

import pytest

from synthesis.assertion_checks import nondeterministic_tests, vacuous_tests
from synthesis.coverage import fold_constant_subscripts
from synthesis.difficulty import distinct_tools
from synthesis.guards import add_guards, guarding_tests
from synthesis.instruction import Stage, compose_instruction, dependency_depth

PARENT_TESTS = """
REPORT = "/app/report.csv"
OUT_DIR = "/app/out"


def rows():
    return open(REPORT).read().splitlines()


def test_header():
    assert rows()[0] == "a,b"


def test_outdir_files():
    import os
    assert os.listdir(OUT_DIR)


def test_skipped():
    assert open("skipped.txt").read()


def test_unrelated():
    assert 1 + 1 == 2
"""


def test_guards_follow_helpers_constants_and_directories() -> None:
    got = guarding_tests(
        PARENT_TESTS,
        ["/app/report.csv", "/app/out/x.json", "/app/skipped.txt", "/app/other.txt"],
        "/app",
        exclude=["test_outdir_files"],
    )
    # via rows() -> REPORT; the timing check reads it too but is never a guard
    assert got["/app/report.csv"] == ["test_header"]
    assert got["/app/out/x.json"] == []  # its only reader is excluded (slow)
    assert got["/app/skipped.txt"] == ["test_skipped"]  # workdir-relative name
    assert got["/app/other.txt"] == []
    with_dir = guarding_tests(PARENT_TESTS, ["/app/out/x.json"], "/app")
    assert with_dir["/app/out/x.json"] == ["test_outdir_files"]  # a directory above it


def test_guard_opens_every_new_test_and_keeps_docstrings() -> None:
    tests = 'def test_r3_a():\n    """Doc."""\n    assert x\n\n\ndef test_r3_b(): assert y\n'
    out = add_guards(tests, "r3", ["test_header"])
    ns: dict = {}
    exec(compile(out, "<guarded>", "exec"), ns)  # it parses and defines both tests
    assert out.count("    _r3_prerequisites()\n") == 2 and '"""Doc."""' in out
    assert out.index('"""Doc."""') < out.index("    _r3_prerequisites()")
    assert add_guards(tests, "r3", []) == tests


def stage(i: int, consumes: tuple[str, ...], produces: tuple[str, ...], **kw) -> Stage:
    return Stage(round=i, operator=f"op{i}", family="f", title=f"do thing {i}",
                 text=f"Read {' '.join(f'`{p}`' for p in consumes)}.", consumes=consumes,
                 produces=produces, **kw)  # fmt: skip


def test_instruction_is_one_workflow_with_sources_marked() -> None:
    s2 = stage(2, ("/app/report.csv",), ("/app/report_r2.json",))
    s3 = stage(3, ("/app/report_r2.json", "/app/input.txt"), ("/app/bundle_r3.tgz",))
    text = compose_instruction("Make the report.", "Build a report.", ["/app/report.csv"],
                               [s2, s3])  # fmt: skip
    assert text.startswith("This job has 3 stages")
    assert "build a report, then do thing 2, then do thing 3" in text
    assert "### Stage 1: Build a report\n\nMake the report." in text
    assert "`/app/report.csv` (from stage 1)" in text
    assert "`/app/report_r2.json` (from stage 2)" in text
    assert "`/app/input.txt` (from" not in text  # from the environment: no stage made it
    assert compose_instruction("Core.", "T", [], []) == "Core."
    # A stage that wrote the whole text becomes the core of what follows.
    s4 = stage(4, ("/app/bundle_r3.tgz",), ("/app/x_r4",), instruction="WHOLE TEXT " * 10)
    s5 = stage(5, ("/app/x_r4",), ("/app/y_r5",))
    text = compose_instruction("Make the report.", "T", ["/app/report.csv"], [s2, s3, s4, s5])
    assert text.count("WHOLE TEXT") == 10 and "Make the report." not in text


def test_dependency_depth_is_the_longest_consuming_chain() -> None:
    s2 = stage(2, ("/app/a",), ("/app/b",))
    s3 = stage(3, ("/app/b",), ("/app/c",))
    side = stage(4, ("/app/a",), ("/app/d",))
    loose = stage(5, (), ("/app/e",))
    assert dependency_depth(["/app/a"], []) == 1
    assert dependency_depth(["/app/a"], [s2, s3, side, loose]) == 3
    under = stage(6, ("/app/c/inner.txt",), ())  # inside a produced directory
    assert dependency_depth(["/app/a"], [s2, s3, under]) == 4


def test_distinct_tools_reads_commands_not_data() -> None:
    script = """#!/bin/bash
set -euo pipefail
cd /app
V=$(cat VERSION) && echo "$V"
git -C repo log --format=%s | head -n 1 > /app/first.txt 2>&1
if grep -q x file; then sort -u a > b; fi
python3 - <<'PY'
import json  # heredoc bodies are not commands
PY
./build.sh --fast
/app/tools/helper.sh
awk '{print $1}' data | xargs -r wc -l
"""
    assert distinct_tools(script) == ["awk", "cat", "git", "grep", "head", "python3", "sort", "wc"]


@pytest.mark.parametrize(
    "body",
    ["assert True", "assert 'ok'", "x = 1\n    assert x == x", "assert len(open('f').read()) >= 0",
     "assert 2 * 3 == 6", "assert open('f').read() == 'a' or True", "pass",
     "try:\n        assert open('f').read() == 'a'\n    except Exception:\n        pass"],
)  # fmt: skip
def test_vacuous_forms_are_found(body) -> None:
    assert vacuous_tests(f"def test_v():\n    {body}\n") == ["test_v"]


@pytest.mark.parametrize(
    "body",
    ["assert open('f').read() == 'a'", "assert 2 * 3 == 7", "import os\n    os.stat('f')",
     "try:\n        assert open('f').read() == 'a'\n    except OSError:\n        raise"],
)  # fmt: skip
def test_real_checks_are_not_vacuous(body) -> None:
    assert vacuous_tests(f"def test_v():\n    {body}\n") == []


def test_nondeterminism_is_found_but_seeded_rngs_and_budgets_are_not() -> None:
    src = """
def _coin():
    import random
    return random.random()


def test_helper_coin():
    assert _coin() < 0.5


def test_seeded():
    import random
    assert random.Random(7).random() < 0.9


def test_budget():
    import time
    t0 = time.monotonic()
    assert time.monotonic() - t0 < 2


def test_clock_parity():
    import time
    assert time.perf_counter_ns() % 2


def test_pid():
    import os
    assert os.getpid() > 1
"""
    assert nondeterministic_tests(src) == ["test_helper_coin", "test_clock_parity", "test_pid"]


def test_spec_dict_values_become_visible_literals() -> None:
    src = "_S = {'out': '/app/x.txt', 'word': 'zephyr'}\n\ndef test_a():\n    spec = _S\n" \
          "    assert open(spec['out']).read() == spec['word']\n"  # fmt: skip
    folded = fold_constant_subscripts(src)
    assert "open('/app/x.txt').read() == 'zephyr'" in folded
