"""The independent defect set's three forms the audit missed (tests/fixtures/audit-independent,
written without reading the audit's code), each now rejected by its own class from what the
task does, and clean controls of the same set that are not. Each task runs only the trials
its class needs; the full audit of all 26 is `benchmarks/audit_recall.py --forms
tests/fixtures/audit-independent` (docs/audit.md).

Before: `flaky--server-sleep` passed every rerun (its 2.5 s sleep outlasts the server's start
even under a 0.1 CPU quota; since exec judge 25 the sleep is cut:
test_load_bearing_sleeps.py), `leakage--expected-in-fixture`'s answer file was taken for a
declared input (it shares the output's file name), and `shortcut--base64-in-script` spelled
nothing the rule could see."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, judge_set, texts

pytestmark = pytest.mark.sandbox

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-independent"
PROBES = {
    "flaky--server-sleep": dict(starved=True),
    "leakage--expected-in-fixture": dict(perturb=True),
    "shortcut--base64-in-script": dict(perturb=True),
    # controls: a solution with background jobs it waits for, and one that reads its input
    "clean--parallel-jobs-waited": dict(starved=True, perturb=True),
    "clean--word-frequency": dict(perturb=True),
}
CAUGHT_AS = {
    "flaky--server-sleep": Code.FLAKY_VERIFIER,
    "leakage--expected-in-fixture": Code.TEST_LEAKAGE,
    "shortcut--base64-in-script": Code.SOLUTION_SHORTCUT,
}


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    return judge_set(SET, PROBES)


@pytest.mark.parametrize("name", list(CAUGHT_AS))
def test_a_missed_form_is_rejected_by_its_own_class(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, [f.text() for f in ev.findings]
    assert CAUGHT_AS[name].value in decided.hard, texts(ev)


@pytest.mark.parametrize("name", ["clean--parallel-jobs-waited", "clean--word-frequency"])
def test_a_clean_control_of_the_set_is_not_rejected(evidence, name):
    ev = evidence[name]
    decided = decision(ev)
    assert decided.verdict != Verdict.REJECTED and not decided.hard, texts(ev)


def test_each_catch_names_the_behaviour_behind_it(evidence):
    def found(name: str) -> list:
        return [f for f in evidence[name].findings if f.code == CAUGHT_AS[name]]

    flaky = found("flaky--server-sleep")
    runs = [f.text() for f in evidence["flaky--server-sleep"].findings if "sleep" in f.item]
    assert [f.item for f in flaky] == ["sleeps-cut"], runs
    assert "tests/test_outputs.py:9" in flaky[0].evidence  # the sleep the static look suspected
    leak = found("leakage--expected-in-fixture")
    assert any("environment/app/data/.expected/unique.txt" in f.evidence for f in leak)
    shortcut = found("shortcut--base64-in-script")
    assert "opened none of them" in shortcut[0].evidence


def test_a_solution_that_cannot_run_under_the_trace_is_measured_untraced(tmp_path):
    """A public task's solution runs strace itself, which fails under the audit's tracer (a
    process is traced once): the traced oracle failed and every plain rerun passed, so the
    task was called flaky. Here the solution answers wrong whenever it is traced."""
    import shutil

    d = tmp_path / "self-tracing"
    shutil.copytree(SET / "clean--word-frequency", d)
    solve = (d / "solution" / "solve.sh").read_text()
    traced = "if ! grep -q '^TracerPid:[[:space:]]*0$' /proc/self/status; then : > /app/top3.txt; exit 0; fi\n"  # noqa: E501
    (d / "solution" / "solve.sh").write_text(
        solve.replace("#!/bin/bash\n", "#!/bin/bash\n" + traced)
    )
    task = import_dir(tmp_path)[0][0]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "reruns": 1}, workers=2))
    assert Code.ORACLE_FAILS not in ev.codes() and Code.FLAKY_VERIFIER not in ev.codes(), texts(ev)
    assert ev.measures["oracle_pass_share"] == 1.0 and ev.measures["solution_traced"] == 0.0
    skipped = [f for f in ev.findings if f.code == Code.RERUN_SKIPPED and f.item == "trace"]
    assert "fails under the audit's trace" in skipped[0].evidence


def test_a_solution_that_leaves_a_server_running_is_traced_to_its_own_end(tmp_path):
    """A public task's solution starts the mock server its work talks to (`nohup ... &`, as an
    agent would) and leaves it running: the tracer followed the server too (and, writing to a
    file, blocked the signal meant to stop it), so the traced oracle ran out the agent's time,
    an agent timeout that no plain rerun repeated: `flaky_verifier`. The trace now ends with
    the solution; the server runs on, untraced."""
    import shutil

    d = tmp_path / "leaves-a-server"
    shutil.copytree(SET / "clean--word-frequency", d)
    solve = (d / "solution" / "solve.sh").read_text()
    server = "nohup python3 -c 'import time; time.sleep(600)' >/dev/null 2>&1 &\n"
    (d / "solution" / "solve.sh").write_text(
        solve.replace("#!/bin/bash\n", "#!/bin/bash\n" + server)
    )
    task = import_dir(tmp_path)[0][0]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "reruns": 1}, workers=2))
    assert ev.measures["oracle_pass_share"] == 1.0, texts(ev)
    assert ev.measures["solution_traced"] == 1.0, texts(ev)
    assert Code.FLAKY_VERIFIER not in ev.codes(), texts(ev)
    assert not [f for f in ev.findings if f.code == Code.RERUN_SKIPPED and f.item == "trace"]
