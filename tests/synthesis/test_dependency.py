"""Dependency is measured by data flow, not declared (docs/synthesis.md, "Dependent extensions").

The attack: an extension that declares the parent's output in `consumes` but whose steps never
read it (it hashes `seq 1 40`). Before the data-flow probe it was accepted with
`dependency_ok=True`: the prerequisite guard tied its reward to the parent's work, so the
extension-only probe (stubbed inputs) failed it, although no byte of the parent's output
reaches its result. The probe (`synthesis.probes.DataFlowAgent`) runs the parent's solution,
perturbs the consumed files, runs the new steps, restores the files exactly, then verifies: a
new assertion that now fails had the parent's output flow into what it checks.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.guards import add_guards, guarded_tests, unguard
from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import (
    Validation,
    ValidationConfig,
    Verdict,
    data_flow,
    new_tests_source,
    validate,
)
from tasks.results import (
    AssertionResult,
    AssertionStatus,
    FailureMode,
    TrialResult,
    VerifierReport,
)
from tests.synthesis.tiny import tiny_parent


class Scripted(Operator):
    """A test-only operator returning a fixed extension."""

    family = "test"

    def __init__(
        self, name: str, steps: list[str], tests: str, text: str, consumes: list[str]
    ) -> None:
        self.name = name  # type: ignore[misc]  # one test operator per case
        self.steps, self.tests, self.text, self.consumes = steps, tests, text, consumes

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension("scripted", self.steps, self.tests, self.text, self.consumes)


SEQ_TEST = (
    "def test_r1_seq_digest():\n"
    "    import hashlib\n"
    "    import subprocess\n\n"
    "    data = subprocess.run(['seq', '1', '40'], capture_output=True, check=True).stdout\n"
    "    want = hashlib.sha256(data).hexdigest() + '\\n'\n"
    "    assert open('/app/seq_r1.txt').read() == want\n"
)
SEQ_STEP = "seq 1 40 | sha256sum | cut -d' ' -f1 > /app/seq_r1.txt"
SEQ_TEXT = (
    "Write the SHA-256 hex digest of what `seq 1 40` prints, and a newline, to `/app/seq_r1.txt`."
)
COPY_TEST = "def test_r1_copy():\n    assert open('/app/copy_r1.txt').read() == 'hello\\n'\n"

CASES = {
    # The attack: `consumes` declared, the steps ignore it.
    "declared_unused": Scripted(
        "declared_unused", [SEQ_STEP], SEQ_TEST, SEQ_TEXT, ["/app/out.txt"]
    ),
    # A real dependent extension: the copy carries the parent's bytes.
    "dependent": Scripted(
        "dependent",
        ["cp /app/out.txt /app/copy_r1.txt"],
        COPY_TEST,
        "Copy it to `/app/copy_r1.txt`.",
        ["/app/out.txt"],
    ),
    # A dependent assertion and an independent one: only the first keeps the guard.
    "mixed": Scripted(
        "mixed",
        ["cp /app/out.txt /app/copy_r1.txt", SEQ_STEP],
        COPY_TEST + "\n\n" + SEQ_TEST,
        "Copy it to `/app/copy_r1.txt`. " + SEQ_TEXT,
        ["/app/out.txt"],
    ),
}


def _validate(op: Scripted) -> Validation:
    parent = tiny_parent("tiny-dependency", verifier_timeout_s=10)
    ext = op.extend(parent, RewriteContext(1, random.Random(0)))
    child = build_child(parent, op.name, op.family, 1, ext)
    cfg = ValidationConfig(reruns=1, max_repairs=0, hacks=False)
    return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Validation]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(_validate, CASES.values()), strict=True))


@pytest.mark.sandbox
def test_declared_but_unused_consumes_is_rejected(outcomes) -> None:
    v = outcomes["declared_unused"]
    assert v.verdict == Verdict.DEPENDENCY_MISSING, (v.verdict, v.detail)
    m = v.measures
    assert m.dependency_ok is False
    assert m.flow is not None
    assert m.flow.dependent == () and m.flow.independent == ("test_r1_seq_digest",)
    assert m.flow.perturbed == ("/app/out.txt",)
    assert v.offending == ["test_r1_seq_digest"]
    # Nothing after nop ran (which earned none of the new reward): the rejection is the
    # data-flow measurement's.
    assert [t.agent for t in v.trials] == ["data-flow", "oracle", "nop"]


@pytest.mark.sandbox
def test_a_dependent_extension_is_accepted_with_its_evidence(outcomes) -> None:
    v = outcomes["dependent"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    m = v.measures
    assert m.dependency_ok is True and m.flow is not None
    assert m.flow.dependent == ("test_r1_copy",) and m.flow.independent == ()
    assert m.flow.perturbed == ("/app/out.txt",)
    # The parent's solution alone: the parent's one assertion of the child's two.
    assert m.parent_share == 0.5


@pytest.mark.sandbox
def test_only_the_assertion_reading_the_consumed_state_keeps_the_guard(outcomes) -> None:
    v = outcomes["mixed"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    m = v.measures
    assert m.flow is not None
    assert m.flow.dependent == ("test_r1_copy",)
    assert m.flow.independent == ("test_r1_seq_digest",)
    guards = guarded_tests(new_tests_source(v.task, tiny_parent("tiny-dependency").task), "r1")
    assert guards == {"test_r1_copy": ["test_out"], "test_r1_seq_digest": []}
    # With the parent's work not done (the extension's steps alone, its input stubbed), the
    # independent assertion still earns its credit; the dependent one does not.
    ext = next(t for t in v.trials if t.agent == "extension-only")
    outcome = {a.name: a.ok for a in ext.assertions}
    assert outcome == {"test_out": False, "test_r1_copy": False, "test_r1_seq_digest": True}
    # That credit is the new steps' own work, not free reward.
    assert m.ext_only_share == pytest.approx(1 / 3) and m.ext_only_free_share == 0.0
    assert m.parent_share == pytest.approx(1 / 3)


def _result(outcomes: dict[str, bool]) -> TrialResult:
    status = {True: AssertionStatus.PASSED, False: AssertionStatus.FAILED}
    return TrialResult(
        trial_id="t", task_id="x", task_hash="h", agent="data-flow", backend="local",
        report=VerifierReport(
            assertions=[AssertionResult(name=n, status=status[ok]) for n, ok in outcomes.items()]
        ),
    )  # fmt: skip


def test_data_flow_classifies_against_the_oracle() -> None:
    guards = {"test_a": ["test_p"], "test_b": ["test_p"], "test_c": [], "test_d": ["test_q"]}
    oracle = _result({"test_p": True, "test_q": True, "test_a": True, "test_b": True,
                      "test_c": True, "test_d": False})  # fmt: skip
    # test_q did not come back after restoration: test_d's failure could be its guard's,
    # but the oracle failed test_d anyway, so it is no evidence at all.
    flow = _result({"test_p": True, "test_q": False, "test_a": False, "test_b": True,
                    "test_c": False, "test_d": False})  # fmt: skip
    got = data_flow(flow, oracle, guards, ["/app/out.txt"])
    assert got.dependent == ("test_a", "test_c") and got.independent == ("test_b",)
    assert got.inconclusive == () and got.ok
    # A parent check that fails after restoration makes its guarded tests inconclusive.
    flow2 = _result({"test_p": False, "test_a": False, "test_b": False, "test_c": True})
    got2 = data_flow(flow2, oracle, {k: guards[k] for k in "test_a test_b test_c".split()}, [])
    assert got2.dependent == () and got2.inconclusive == ("test_a", "test_b")
    assert got2.independent == ("test_c",) and not got2.ok


def test_unguard_removes_only_the_named_tests_guard_calls() -> None:
    tests = (
        'def test_r3_a():\n    """doc"""\n    x = 1\n    assert x\n\n\n'
        "def test_r3_b():\n    assert open('/app/x').read()\n"
    )
    guarded = add_guards(tests, "r3", ["test_p", "test_q"])
    assert guarded_tests(guarded, "r3") == {
        "test_r3_a": ["test_p", "test_q"],
        "test_r3_b": ["test_p", "test_q"],
    }
    cut = unguard(guarded, "r3", ["test_r3_b"])
    assert guarded_tests(cut, "r3") == {"test_r3_a": ["test_p", "test_q"], "test_r3_b": []}
    assert "def test_r3_b():\n    assert open('/app/x').read()\n" in cut
    assert unguard(tests, "r3", ["test_r3_a"]) == tests  # nothing guarded: unchanged
    assert guarded_tests(tests, "r3") == {"test_r3_a": [], "test_r3_b": []}


def test_a_failure_the_probe_cannot_vouch_for_is_inconclusive() -> None:
    oracle = _result({"test_p": True, "test_a": True, "test_b": True})
    guards: dict[str, list[str]] = {"test_a": [], "test_b": []}
    # test_b missing from the report: its failure is no evidence.
    got = data_flow(_result({"test_p": True, "test_a": False}), oracle, guards, [])
    assert got.dependent == ("test_a",) and got.inconclusive == ("test_b",)
    # The steps ran out of time: no failure is evidence.
    timed_out = _result({"test_p": True, "test_a": False, "test_b": False})
    timed_out.failure_mode = FailureMode.AGENT_TIMEOUT
    got = data_flow(timed_out, oracle, guards, [])
    assert got.dependent == () and got.inconclusive == ("test_a", "test_b")
    # So is a probe that crashed (a step exiting non-zero is no failure of the trial).
    crashed = _result({"test_p": True, "test_a": False, "test_b": True})
    crashed.failure_mode = FailureMode.AGENT_ERROR
    assert data_flow(crashed, oracle, guards, []).inconclusive == ("test_a",)
