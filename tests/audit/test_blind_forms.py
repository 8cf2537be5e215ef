"""The blind defect set's misses that behaviour now catches (tests/fixtures/audit-blind,
written by helpers who never read the audit; docs/audit.md, "Measured on a blind set"), each
rejected by its own class with only the trials that class needs, and clean controls of the
same set that the same trials accept.

Before: `exit_zero` stubbed no program it was asked to write under /app/bin; no output mutant
kept the sum a verifier checked; an answer kept as a shell history's printf, or as a
Dockerfile ENV joined by `;`, was no single labelled value; a config whose shipped values
already were two of the four edits asked for earned half the reward before any work (the
nop's passes were read as guards), and so did an account the task asks for that the
Dockerfile had created (system state: no declared input to perturb; its clean twin, where the
account is a precondition, is tests/fixtures/audit-forms/clean-existing-account); a solution
that copies the overdue rows by their line numbers read its inputs, so no output stayed the
same under perturbation (it is caught on other records, the rows in reverse order, where the
shipped answer and its own both fail the check that follows the inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecEvidence
from audit.verdict import Code, Verdict
from tests.audit.forms import decision, judge_set, texts

pytestmark = pytest.mark.sandbox

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind"
PROBES = {
    "hackable--exit-zero-linter": dict(hacks=True),
    "weak--sum-only-totals": dict(max_output_mutants=6),
    "leakage--shell-history": dict(perturb=True),
    "leakage--env-expected": dict(perturb=True),
    "free-reward--preapplied-config": dict(free_reward=True),
    "free-reward--precreated-account": dict(free_reward=True),
    "shortcut--fixed-line-picks": dict(perturb=True),
    # controls: a program the tests run on input they make, a computed report
    "clean--dupfind-script": dict(hacks=True, max_output_mutants=6),
    "clean--flights-join-json": dict(perturb=True, max_output_mutants=6),
    "clean--ini-to-dotenv": dict(free_reward=True, perturb=True),
    "clean--access-log-5xx": dict(perturb=True),
}
CAUGHT_AS = {
    "hackable--exit-zero-linter": (Code.HACKABLE, "exit_zero"),
    "weak--sum-only-totals": (Code.WEAK_VERIFIER, "repair /app/totals.json"),
    "leakage--shell-history": (Code.TEST_LEAKAGE, "environment/bash_history holds every"),
    "leakage--env-expected": (Code.TEST_LEAKAGE, "environment/Dockerfile holds every"),
    "free-reward--preapplied-config": (Code.FREE_REWARD, "test_server_port"),
    "free-reward--precreated-account": (Code.FREE_REWARD, "built without line 4 (RUN useradd"),
    "shortcut--fixed-line-picks": (Code.SOLUTION_SHORTCUT, "the shipped answer fails them too"),
}


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    return judge_set(SET, PROBES)


@pytest.mark.parametrize("name", list(CAUGHT_AS))
def test_a_blind_form_is_rejected_by_its_own_class_from_what_it_does(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    code, behaviour = CAUGHT_AS[name]
    assert decided.verdict == Verdict.REJECTED and code.value in decided.hard, texts(ev)
    assert any(f.code == code and behaviour in f"{f.item} {f.evidence}" for f in ev.findings), (
        texts(ev)
    )


@pytest.mark.parametrize(
    "name",
    [
        "clean--dupfind-script",
        "clean--flights-join-json",
        "clean--ini-to-dotenv",
        "clean--access-log-5xx",
    ],
)
def test_a_blind_clean_control_is_not_rejected(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict != Verdict.REJECTED and not decided.hard, texts(ev)


@pytest.mark.docker
def test_an_account_the_dockerfile_made_is_free_reward_on_the_docker_backend(docker_engine):
    """The same probe through the Docker API: the engine builds the image without the step,
    and the clean twin, whose solution needs the account, is still accepted."""
    from audit.judge_exec import ExecConfig, run_exec_judge
    from tasks.corpus import import_dir
    from tests.audit.forms import OFF

    forms = SET.parent / "audit-forms"
    tasks = {t.id: t for t in [*import_dir(SET)[0], *import_dir(forms)[0]]}
    cfg = ExecConfig(**{**OFF, "free_reward": True}, backend="docker", workers=2)
    made = run_exec_judge(tasks["free-reward--precreated-account"], cfg)
    assert Code.FREE_REWARD.value in decision(made).hard, texts(made)
    twin = run_exec_judge(tasks["clean-existing-account"], cfg)
    assert decision(twin).verdict != Verdict.REJECTED and not decision(twin).hard, texts(twin)


@pytest.mark.docker
def test_rows_picked_by_line_number_are_a_shortcut_on_the_docker_backend(docker_engine):
    """Other records through the Docker API: the solution's answer for the rows in reverse
    order misses what the verifier expects of them; the control's computed answer does not."""
    from audit.judge_exec import ExecConfig, run_exec_judge
    from tasks.corpus import import_dir
    from tests.audit.forms import OFF

    tasks = {t.id: t for t in import_dir(SET)[0]}
    cfg = ExecConfig(**{**OFF, "perturb": True}, backend="docker", workers=2)
    picked = run_exec_judge(tasks["shortcut--fixed-line-picks"], cfg)
    assert Code.SOLUTION_SHORTCUT.value in decision(picked).hard, texts(picked)
    assert any("the shipped answer fails them too" in f.evidence for f in picked.findings)
    computed = run_exec_judge(tasks["clean--access-log-5xx"], cfg)
    assert not decision(computed).hard, texts(computed)
