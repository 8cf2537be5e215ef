"""What a trial is paid (`tasks.results.pay`): the vouched passing outcomes, and with the
task's reference verdict only those the reference solution also earned."""

from __future__ import annotations

from tasks.results import (
    AgentCode,
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReferenceVerdict,
    ReportSource,
    TrialResult,
    VerifierReport,
)

P, F, S, X = (AssertionStatus.PASSED, AssertionStatus.FAILED, AssertionStatus.SKIPPED,
              AssertionStatus.XFAIL)  # fmt: skip


def _trial(*outcomes: tuple[str, AssertionStatus], mode=FailureMode.NONE, **report) -> TrialResult:
    rep = VerifierReport(
        assertions=[AssertionResult(name=n, status=s) for n, s in outcomes],
        **{"source": ReportSource.PYTEST, **report},
    )
    return TrialResult(
        trial_id="t", task_id="x", task_hash="h", agent="a", backend="local",
        failure_mode=mode, report=rep,
    )  # fmt: skip


def _ref(*outcomes: tuple[str, AssertionStatus]) -> ReferenceVerdict:
    ref = ReferenceVerdict.of(_trial(*outcomes))
    assert ref is not None
    return ref


def test_only_a_resolved_independent_per_assertion_oracle_gives_a_reference():
    assert _ref(("a", P), ("b", S)).total == 2
    assert ReferenceVerdict.of(_trial(("a", P), ("b", F))) is None
    assert ReferenceVerdict.of(_trial()) is None
    marked = _trial(("a", P), ("b", P), agent_code=[AgentCode(path="/app/m.py", after=1)])
    assert ReferenceVerdict.of(marked) is None  # b was recorded after the agent's code ran
    # every outcome recorded before it (or vouched for by an isolated rerun): the judge's own
    vouched = _trial(("a", P), ("b", P), agent_code=[AgentCode(path="/app/m.py", after=2)])
    assert vouched.report.independent and ReferenceVerdict.of(vouched) is not None
    worded = _trial(("a", P), ("b", P))
    worded.report.agent_word = ["b"]
    assert ReferenceVerdict.of(worded) is None and worded.pay(None).passed == ("a",)
    binary = _trial(source=ReportSource.REWARD, reward=1.0)
    assert binary.resolved
    assert ReferenceVerdict.of(binary) is None
    assert ReferenceVerdict.of(_trial(("a", P), mode=FailureMode.TAMPERED)) is None


def test_without_a_reference_every_vouched_passing_outcome_but_a_skip_is_paid():
    r = _trial(("a", P), ("b", S), ("c", F), ("d", X))
    got = r.pay(None)
    assert got.passed == ("a", "d") and got.total == 4 and not got.resolved
    assert r.independent_passed == 3  # Terminal-Bench's count has the skip
    skipped = _trial(("a", P), ("b", S))  # resolved as Terminal-Bench counts, not as paid
    assert (
        skipped.resolved and not skipped.pay(None).resolved and skipped.pay(None).passed == ("a",)
    )
    assert _trial(("a", P), ("d", X)).pay(None).resolved


def test_outcomes_the_reference_lacks_are_not_paid_and_the_total_is_the_references():
    ref = _ref(("t[a]", P), ("u", P))
    r = _trial(("t[a]", P), ("t[b]", P), ("t[c]", P), ("u", P))
    got = r.pay(ref)
    assert got.passed == ("t[a]", "u") and got.total == 2 and got.resolved
    # resolved also needs every outcome of its own to pass: an extra one that fails is a miss
    extra = _trial(("t[a]", P), ("t[b]", F), ("u", P))
    assert extra.pay(ref).passed == ("t[a]", "u") and not extra.pay(ref).resolved
    assert not _trial(("t[a]", P)).pay(ref).resolved


def test_a_skip_is_paid_only_where_the_reference_skipped():
    ref = _ref(("needs_db", P), ("on_arm_only", S))
    nop = _trial(("needs_db", S), ("on_arm_only", S))
    assert nop.resolved  # Terminal-Bench's count: every outcome "passes"
    got = nop.pay(ref)
    assert got.passed == ("on_arm_only",) and got.total == 2 and not got.resolved
    honest = _trial(("needs_db", P), ("on_arm_only", S))
    assert honest.pay(ref).passed == ("needs_db", "on_arm_only") and honest.pay(ref).resolved
    assert _trial(("needs_db", X), ("on_arm_only", S)).pay(ref).resolved  # xfail is no skip


def test_a_name_is_paid_as_often_as_the_reference_has_it():
    ref = _ref(("check", P), ("check", P))
    assert len(_trial(*[("check", P)] * 5).pay(ref).passed) == 2
    assert len(_trial(("check", P), ("check", F)).pay(ref).passed) == 1


def test_a_void_verdict_and_outcomes_after_the_agents_code_ran_are_never_paid():
    ref = _ref(("a", P), ("b", P))
    assert _trial(("a", P), ("b", P), mode=FailureMode.TAMPERED).pay(ref).passed == ()
    marked = _trial(("a", P), ("b", P), agent_code=[AgentCode(path="/app/m.py", after=1)])
    got = marked.pay(ref)
    assert got.passed == ("a",) and not got.resolved
    assert marked.pay(None).passed == ("a",)


def test_a_binary_verdict_pays_only_resolved():
    r = _trial(source=ReportSource.REWARD, reward=1.0)
    ref = _ref(("a", P))
    assert r.pay(ref).resolved and r.pay(ref).total == 0 and r.pay(None).resolved
    r.report.agent_code = [AgentCode(path="/app/m.py", after=0)]
    assert not r.pay(None).resolved
