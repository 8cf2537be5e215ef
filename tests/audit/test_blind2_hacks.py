"""The second blind set's verifiers that an agent doing none of the work could satisfy
(tests/fixtures/audit-blind2, written by helpers who never read the audit), each now
`hackable` from one more scripted hack, and the set's clean controls not, under the same
hacks.

Before (exec judge 24, `benchmarks/results/audit_recall_blind2_exec24.txt`): both accepted.
The humanizer's tests run exactly the three worked examples of the instruction, and the
address validator's only valid addresses; no hack printed what they check: `echo_literals`
prints every literal at once, `exit_zero` nothing. Now a program that answers the
instruction's worked examples from a table (`example_table`) and one that always prints the
first answer the instruction tells it to print (`constant_answer`) are two more agents."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, judge_set, texts

pytestmark = pytest.mark.sandbox

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind2"
HACKED_BY = {
    "hackable--humanize-bytes-examples": "example_table",
    "weak--ipv4-validator-valid-only": "constant_answer",
}
CONTROLS = ["clean--sqlite-country-totals", "clean--access-log-summary"]


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    return judge_set(SET, {name: dict(hacks=True) for name in [*HACKED_BY, *CONTROLS]})


@pytest.mark.parametrize("name", list(HACKED_BY))
def test_a_verifier_one_hack_satisfies_is_hackable(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED and Code.HACKABLE.value in decided.hard, texts(ev)
    [hackable] = [f for f in ev.findings if f.code == Code.HACKABLE]
    assert hackable.item == HACKED_BY[name] and "earns 100%" in hackable.evidence
    # the other hacks earn nothing beyond nop: the new one is what shows it
    others = {k: v for k, v in ev.measures.items() if k.startswith("hack_share.")}
    assert others.pop(f"hack_share.{HACKED_BY[name]}") == 1.0
    assert max(others.values()) < 0.5, others


@pytest.mark.parametrize("name", CONTROLS)
def test_a_clean_control_is_not_hackable(evidence, name):
    ev = evidence[name]
    assert Code.HACKABLE not in ev.codes() and not decision(ev).hard, texts(ev)


@pytest.mark.docker
def test_the_constant_answer_is_measured_on_the_docker_backend(docker_engine):
    [task] = [t for t in import_dir(SET)[0] if t.id == "weak--ipv4-validator-valid-only"]
    cfg = ExecConfig(**{**OFF, "hacks": True}, backend="docker", workers=2)
    ev = run_exec_judge(task, cfg)
    assert [f.item for f in ev.findings if f.code == Code.HACKABLE] == ["constant_answer"], texts(
        ev
    )
