"""A rerun condition reaches the agent's programs that a test runs (docs/audit.md, "Flaky
verifier"): `tests/fixtures/audit-forms/clean-dated-report` is an honest task whose tests
compare the date and time a script of the agent's prints with their own clock, and want
nothing on its stderr. Every condition must leave its verdict as it is.

Before: what a condition stages was beside the held-out tests, which the agent's programs
cannot read: the script ran on the real clock while its test's was shifted (`clock`), and
its bash said "Permission denied" on stderr for the `BASH_ENV` script it could not source,
under every condition: `flaky_verifier` under all five, a false reject."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.verdict import Code
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, texts

pytestmark = pytest.mark.sandbox

FORMS = Path(__file__).resolve().parents[1] / "fixtures" / "audit-forms"
CONDITIONS = ["clock", "late", "timezone", "locale", "order"]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_program_the_tests_run_is_under_the_condition_with_them(backend, request):
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    task = {t.id: t for t in import_dir(FORMS)[0]}["clean-dated-report"]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "conditions": True}, backend=backend))
    reruns = {f.item: f.code for f in ev.findings if f.item in CONDITIONS}
    assert reruns == dict.fromkeys(CONDITIONS, Code.RERUN_STABLE), texts(ev)
    assert not decision(ev).hard, texts(ev)
