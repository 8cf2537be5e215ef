"""The second blind set's leaks that behaviour now catches (tests/fixtures/audit-blind2,
written by helpers who never read the audit; docs/audit.md, "A second blind set"), each
rejected as `test_leakage` with only the perturbation trials, and the set's clean controls
accepted by the same trials.

Before: the JSON Schema the instruction tells the agent to follow holds the expected output
as its `examples[0]`, and a file the instruction names was read as an input, whose values an
output may copy (so the whole computed output standing there was no leak); the CI workflow
shipped with the repository states the expected line (`test "$out" = "count=83 ..."`), which
the static look read as a stated literal, fair to assert. Both were accepted on both
backends. Now a named file the traced solution never opens is no input of its answer, and an
expected value of the tests that the solution computes, standing in a file it never opens,
is a leak (`audit.perturbation.inputs_used`, `given_expectations`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, judge_set, texts

pytestmark = pytest.mark.sandbox

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind2"
LEAKS = {
    "leakage--schema-examples": "schema/revenue.schema.json holds the whole computed output",
    "leakage--ci-workflow-assert": "ci.yml states the tests' expected 'count=83 mean=205.57",
}
CONTROLS = ["clean--sqlite-country-totals", "clean--access-log-summary"]


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    return judge_set(SET, {name: dict(perturb=True) for name in [*LEAKS, *CONTROLS]})


@pytest.mark.parametrize("name", list(LEAKS))
def test_an_answer_given_in_a_file_the_solution_never_opens_is_a_leak(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED and Code.TEST_LEAKAGE.value in decided.hard
    assert any(f.code == Code.TEST_LEAKAGE and LEAKS[name] in f.evidence for f in ev.findings), (
        texts(ev)
    )


@pytest.mark.parametrize("name", CONTROLS)
def test_a_clean_control_of_the_second_blind_set_is_not_rejected(evidence, name):
    ev = evidence[name]
    assert not decision(ev).hard, texts(ev)


@pytest.mark.docker
def test_both_given_answers_are_leaks_on_the_docker_backend(docker_engine):
    tasks = {t.id: t for t in import_dir(SET)[0]}
    cfg = ExecConfig(**{**OFF, "perturb": True}, backend="docker", workers=2)
    for name, behaviour in LEAKS.items():
        ev = run_exec_judge(tasks[name], cfg)
        assert Code.TEST_LEAKAGE.value in decision(ev).hard, texts(ev)
        assert any(behaviour in f.evidence for f in ev.findings), texts(ev)
    control = run_exec_judge(tasks[CONTROLS[0]], cfg)
    assert not decision(control).hard, texts(control)
