"""Validation verdicts and bounded repair, on a tiny task with test-only operators."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import ValidationConfig, Verdict, _trial_problem, validate
from tasks.results import FailureMode, TrialResult
from tests.synthesis.tiny import tiny_parent as make_tiny_parent


def tiny_parent() -> Parent:
    return make_tiny_parent("tiny-synth", verifier_timeout_s=2)


class Scripted(Operator):
    """A test-only operator returning a fixed extension."""

    family = "test"

    def __init__(self, name: str, steps: list[str], tests: str, text: str) -> None:
        self.name, self.steps, self.tests, self.text = name, steps, tests, text

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension("scripted", self.steps, self.tests, self.text, ["/app/out.txt"])


# A derivation of the parent's output (a plain copy is earned by a scripted hack run after
# the parent's solution, so it is not dependent: tests/synthesis/test_dependent_share.py).
UPPER = "tr a-z A-Z < /app/out.txt > /app/upper_r1.txt"
WANT = "    want = open('/app/out.txt').read().upper()\n"
CASES = {
    "ok": Scripted(
        "ok",
        [UPPER],
        "def test_r1_upper():\n" + WANT + "    assert open('/app/upper_r1.txt').read() == want\n",
        "Write it in upper case to `/app/upper_r1.txt`.",
    ),
    "slow_verifier": Scripted(
        "slow_verifier",
        [UPPER],
        "def test_r1_upper_slowly():\n    import time\n    time.sleep(2.5)\n"
        + WANT
        + "    assert open('/app/upper_r1.txt').read() == want\n",
        "Write it in upper case to `/app/upper_r1.txt`.",
    ),
    "misaligned": Scripted(
        "misaligned",
        ["mkdir -p /app/results", "tr a-z A-Z < /app/out.txt > /app/results/upper_r1.txt"],
        "def test_r1_upper():\n" + WANT + "    assert open('/app/upper_r1.txt').read() == want\n",
        "Write it in upper case to `/app/upper_r1.txt`.",
    ),
    "missing_tool": Scripted(
        "missing_tool",
        ["t1-no-such-tool --version > /app/version_r1.txt"],
        "def test_r1_version():\n    assert open('/app/version_r1.txt').read()\n",
        "Record the tool version in `/app/version_r1.txt`.",
    ),
    # A dependent copy, and a check the parent's own work already satisfies.
    "not_load_bearing": Scripted(
        "not_load_bearing",
        ["cp /app/out.txt /app/copy_r1.txt"],
        "def test_r1_copy():\n    assert open('/app/copy_r1.txt').read() == 'hello\\n'\n\n\n"
        "def test_r1_out_kept():\n    assert open('/app/out.txt').read() == 'hello\\n'\n",
        "Copy it to `/app/copy_r1.txt`, and keep `/app/out.txt`.",
    ),
    "wrong": Scripted(
        "wrong",
        ["echo bye > /app/bye_r1.txt"],
        "def test_r1_bye():\n    assert open('/app/bye_r1.txt').read() == 'hello\\n'\n",
        "Write `bye` to `/app/bye_r1.txt`.",
    ),
}


@pytest.fixture(scope="module")
def outcomes():
    parent = tiny_parent()
    cfg = ValidationConfig(reruns=2, max_repairs=2)

    def one(op):
        ext = op.extend(parent, RewriteContext(1, random.Random(0)))
        child = build_child(parent, op.name, op.family, 1, ext)
        return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(one, CASES.values()), strict=True))


@pytest.mark.sandbox
def test_valid_candidate_accepted_with_all_trials(outcomes) -> None:
    v = outcomes["ok"]
    assert v.verdict == Verdict.ACCEPTED and not v.repairs, v.detail
    hacks = ("hack-", "parent+")
    agents = sorted(t.agent for t in v.trials if not t.agent.startswith(hacks))
    assert agents == ["data-flow", "extension-only", "nop", "oracle", "oracle", "parent-solution"]
    m = v.measures
    assert m.hacks == len({t.agent for t in v.trials if t.agent.startswith("hack-")}) >= 8
    after = {t.agent for t in v.trials if t.agent.startswith("parent+")}
    assert len(after) >= 4 and m.hacked_after_parent == [] and m.dependent_share == 1.0
    assert m.hack_new_share == 0
    assert m.dependency_ok and m.nop_share == 0 and m.ext_only_share == 0 and m.coverage == 1
    assert v.new_assertions == ["test_r1_upper"]
    assert v.profile is not None and "/app/upper_r1.txt" in [f.path for f in v.profile.outputs]


@pytest.mark.sandbox
def test_verifier_timeout_repaired_by_raising_it(outcomes) -> None:
    v = outcomes["slow_verifier"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    # Doubled once (twice if a loaded machine pushed the 2.5 s check past 4 s too).
    assert v.repairs[0] == "verifier_timeout: verifier timeout 2s -> 4s"
    assert all(r.startswith("verifier_timeout") for r in v.repairs)
    assert v.task.limits.verifier_timeout_s == 2 * 2 ** len(v.repairs)


@pytest.mark.sandbox
def test_misaligned_path_repaired_by_aligning_test_and_instruction(outcomes) -> None:
    v = outcomes["misaligned"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    assert (
        v.repairs and "aligned paths /app/upper_r1.txt -> /app/results/upper_r1.txt" in v.repairs[0]
    )
    assert "/app/results/upper_r1.txt" in v.task.instruction
    assert "'/app/results/upper_r1.txt'" in v.task.verifier["test_outputs.py"].decode()


@pytest.mark.sandbox
def test_missing_tool_added_then_discarded_when_absent(outcomes) -> None:
    v = outcomes["missing_tool"]
    assert v.verdict == Verdict.MISSING_TOOL, (v.verdict, v.detail)
    assert v.repairs == ["oracle_failed: requires += ['t1-no-such-tool']"]
    assert "t1-no-such-tool" in v.task.environment.requires


@pytest.mark.sandbox
def test_extension_the_parent_already_satisfies_is_discarded(outcomes) -> None:
    v = outcomes["not_load_bearing"]
    assert v.verdict == Verdict.NOT_LOAD_BEARING, v.detail
    assert all(r.startswith("verifier_timeout") for r in v.repairs)  # a 2 s limit under load
    assert v.offending == ["test_r1_out_kept"]
    flow = v.measures.flow
    assert flow is not None and flow.dependent == ("test_r1_copy",)
    assert flow.independent == ("test_r1_out_kept",)


@pytest.mark.sandbox
def test_unrecoverable_oracle_failure_is_discarded_without_repair(outcomes) -> None:
    v = outcomes["wrong"]
    assert v.verdict == Verdict.ORACLE_FAILED, v.detail
    assert all(r.startswith("verifier_timeout") for r in v.repairs)  # a 2 s limit under load
    assert "test_r1_bye" in v.detail
    # One more oracle run tells a failing check from a flaky one; nothing else runs after it
    # (the data-flow probe runs first, before the oracle).
    attempts = len(v.repairs) + 1
    assert [t.agent for t in v.trials] == ["data-flow", "oracle", "oracle"] * attempts


def test_config_guards() -> None:
    with pytest.raises(ValueError, match="reruns"):
        ValidationConfig(reruns=0)
    with pytest.raises(ValueError, match="max_repairs"):
        ValidationConfig(max_repairs=-1)


@pytest.mark.parametrize("line", [3, 5])
def test_a_package_the_build_cannot_install_is_a_missing_tool_named_in_the_detail(line) -> None:
    """A rendered Dockerfile's apt step for a package Debian lacks: pages of `apt-get update`
    output, then apt's reason last (what the image builder reports as `RUN exited 100`)."""
    update = "".join(
        f"Get:{i} http://deb.debian.org/debian bookworm/main Packages\n" for i in range(40)
    )
    detail = (
        f"step_failed: line {line}: RUN exited 100\n{update}Reading package lists...\n"
        "E: Unable to locate package t1-absent-tool\n"
    )
    r = TrialResult(trial_id="t", task_id="x", task_hash="h", agent="oracle", backend="local",
                    failure_mode=FailureMode.ENVIRONMENT_ERROR, failure_detail=detail)  # fmt: skip
    check = _trial_problem(r, "oracle", candidate_env=True)
    assert check is not None and check.verdict == Verdict.MISSING_TOOL
    assert "Unable to locate package t1-absent-tool" in check.detail and len(check.detail) < 700
    # The same failure of the parent's unchanged environment is not the candidate's.
    other = _trial_problem(r, "oracle", candidate_env=False)
    assert other is not None and other.verdict == Verdict.INFRASTRUCTURE_ERROR
