"""Six defect forms a real author or an LLM writes, in stock Harbor layout with pytest run by
test.sh (tests/fixtures/audit-forms), each caught by its own class from what the task does
when run, and clean controls in the same layout that are not rejected. Each task is
measured with only the trials its class needs (the full audit of all eight, and the recall
on forms we did not write, are `benchmarks/audit_recall.py --forms`, docs/audit.md).

Before issue 33 none of the six was caught by its class, and every stock pytest task was
`flaky_verifier` in trial mode (the rerun artefact: `test_a_stock_pytest_task_is_not_flaky`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecEvidence
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import decision, judge_set, texts

pytestmark = pytest.mark.sandbox

FORMS = Path(__file__).resolve().parents[1] / "fixtures" / "audit-forms"
PROBES = {
    "weak-consistency": dict(perturb=True, answer_swaps=True),
    "hidden-runtime-name": dict(trace_verifier=True),
    "stale-output": dict(free_reward=True),
    "shortcut-decompress": dict(perturb=True),
    "race-background": dict(starved=True),
    "network-variable": dict(trace_verifier=True),
    # the controls: every new probe, and the condition reruns of a stock pytest verifier
    "clean-sales": dict(
        perturb=True, answer_swaps=True, trace_verifier=True, free_reward=True, conditions=True
    ),  # fmt: skip
    "clean-edit": dict(
        perturb=True, answer_swaps=True, trace_verifier=True, free_reward=True, starved=True
    ),  # fmt: skip
    # an account the Dockerfile makes as a precondition, its fields checked as guards
    "clean-existing-account": dict(free_reward=True),
    # programs of the agent's that the tests run, under every condition with them
    # (tests/audit/test_conditions_reach_agent_programs.py)
    "clean-dated-report": dict(conditions=True),
}
CAUGHT_AS = {
    "weak-consistency": Code.WEAK_VERIFIER,
    "hidden-runtime-name": Code.HIDDEN_REQUIREMENT,
    "stale-output": Code.FREE_REWARD,
    "shortcut-decompress": Code.SOLUTION_SHORTCUT,
    "race-background": Code.FLAKY_VERIFIER,
    "network-variable": Code.FLAKY_VERIFIER,
}


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    assert {t.id for t in import_dir(FORMS)[0]} == set(PROBES)  # every form is probed
    return judge_set(FORMS, PROBES)


@pytest.mark.parametrize("name", list(CAUGHT_AS))
def test_a_defect_form_is_rejected_by_its_own_class(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, texts(ev)
    assert CAUGHT_AS[name].value in decided.hard, texts(ev)


@pytest.mark.parametrize(
    "name", ["clean-sales", "clean-edit", "clean-existing-account", "clean-dated-report"]
)
def test_a_clean_control_in_the_same_layout_is_not_rejected(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict != Verdict.REJECTED and not decided.hard, texts(ev)


def test_a_stock_pytest_task_is_not_flaky(evidence):
    """Bug pinned: every condition rerun of a Harbor task whose test.sh runs pytest changed
    its verdict (the wrapped entry lost the report channel; JUnit names differ)."""
    ev = evidence["clean-sales"]
    stable = {f.item for f in ev.findings if f.code == Code.RERUN_STABLE}
    assert {"clock", "late", "timezone", "locale", "order"} <= stable, texts(ev)
    assert Code.FLAKY_VERIFIER not in ev.codes()


def test_the_evidence_names_what_the_task_did(evidence):
    """Each catch carries the behaviour behind it, not a literal of the task's source."""
    items = {n: {f.item for f in evidence[n].findings if f.code == c} for n, c in CAUGHT_AS.items()}
    assert items["hidden-runtime-name"] == {"/app/reports/202403-levels.txt"}
    # the shipped output, named; (exec judge 19) also the assertions it earns, which fail
    # for a nop run and pass for the solution on perturbed inputs
    assert "/app/out/result.txt" in items["stale-output"]
    assert items["network-variable"] == {"network"}
    assert any(i.startswith("other-answer ") for i in items["weak-consistency"])
    assert items["race-background"] & {"starved", "fast-clock"}
    shortcut = [
        f for f in evidence["shortcut-decompress"].findings if f.code == Code.SOLUTION_SHORTCUT
    ]
    assert "/solution/cache.pkl.gz" in shortcut[0].evidence
