"""The planted-defect suite: each planted defect is caught with the right reason, and clean
tasks (the planted base and a sample of seeds) are not hard-rejected."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge, score_dimensions
from audit.rubric import Verdict, decide, load_rubric
from audit.static_checks import static_findings
from audit.verdict import Code
from tasks.corpus import SEED_DIR, import_dir
from tests.audit.planted import PLANTED, base_task

RUBRIC = load_rubric("t1")
CLEAN_SEEDS = ("ds-sensor-summary-stats", "vc-reflog-recover", "sa-log-rotate-script")


def seeds():
    """The seed corpus (a seed being written concurrently is skipped, not fatal)."""
    return import_dir(SEED_DIR)[0]


def _decision(ev: ExecEvidence):
    return decide(score_dimensions(ev), ev.codes(), RUBRIC)


# ---- static: no sandbox ----------------------------------------------------------------------


@pytest.mark.parametrize("code", ["hidden_requirement", "test_leakage", "solution_shortcut"])
def test_static_checks_name_the_planted_defect(code: str):
    findings = static_findings(PLANTED[code]()).findings
    assert code in {f.code for f in findings}, findings


def test_flaky_verifier_is_flagged_statically():
    findings = static_findings(PLANTED["flaky_verifier"]()).findings
    flaky = [f for f in findings if f.code == Code.FLAKY_VERIFIER]
    assert flaky and "RANDOM" in flaky[0].evidence


def test_hidden_requirement_names_the_path_and_value():
    findings = static_findings(PLANTED["hidden_requirement"]()).findings
    items = {f.item for f in findings if f.code == Code.HIDDEN_REQUIREMENT}
    assert items == {"/app/report/summary.txt", "status: complete"}


def test_clean_base_has_no_static_findings():
    findings = static_findings(base_task()).findings
    assert [f for f in findings if f.defect] == []
    assert {f.code for f in findings} == {Code.LITERAL_STATED}


def test_seed_verifiers_have_no_hard_static_findings():
    """Regression: the static analysis once flagged verifier-own scratch paths, dict data and
    shared input copies in seeds as hidden requirements / leakage."""
    hard = {"test_leakage", "solution_shortcut", "flaky_verifier"}
    for task in seeds():
        findings = static_findings(task).findings
        bad = [f.text() for f in findings if f.code in hard]
        assert not bad, (task.id, bad)


# ---- executable: sandbox ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted_evidence() -> dict[str, ExecEvidence]:
    tasks = {"clean": base_task()} | {code: make() for code, make in PLANTED.items()}
    cfg = ExecConfig(workers=2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        evs = pool.map(lambda t: run_exec_judge(t, cfg), tasks.values())
        return dict(zip(tasks, evs, strict=True))


@pytest.mark.sandbox
@pytest.mark.parametrize("code", list(PLANTED))
def test_planted_defect_is_rejected_with_its_reason(planted_evidence, code: str):
    ev = planted_evidence[code]
    decision = _decision(ev)
    assert code in ev.codes(), [f.text() for f in ev.findings]
    assert decision.verdict == Verdict.REJECTED
    assert code in decision.hard, decision.reasons


@pytest.mark.sandbox
def test_weak_verifier_is_measured_by_mutation(planted_evidence):
    ev = planted_evidence["weak_verifier"]
    assert ev.measures["mutants"] >= 4
    assert ev.measures["mutation_kill_rate"] < 0.5
    assert planted_evidence["clean"].measures["mutation_kill_rate"] == 1.0


@pytest.mark.sandbox
def test_shortcut_is_also_measured_from_the_oracle_output(planted_evidence):
    trial = [f for f in planted_evidence["solution_shortcut"].findings if f.source == "trial"]
    assert any(f.code == Code.SOLUTION_SHORTCUT and "300" in f.evidence for f in trial)


@pytest.mark.sandbox
def test_clean_base_is_accepted_with_full_coverage(planted_evidence):
    ev = planted_evidence["clean"]
    assert ev.defects() == []
    assert ev.measures["effect_coverage"] == 1.0 and ev.measures["rerun_stable"] == 1.0
    assert _decision(ev).verdict == Verdict.ACCEPTED


@pytest.mark.sandbox
def test_sample_of_clean_seeds_is_not_hard_rejected():
    sample = [t for t in seeds() if t.id in CLEAN_SEEDS]
    assert len(sample) == len(CLEAN_SEEDS)
    cfg = ExecConfig(reruns=1, max_mutants=4, workers=2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        evs = list(pool.map(lambda t: run_exec_judge(t, cfg), sample))
    for task, ev in zip(sample, evs, strict=True):
        decision = _decision(ev)
        assert not decision.hard and decision.verdict != Verdict.REJECTED, (
            task.id,
            decision.reasons,
            [f.text() for f in ev.defects()],
        )


@pytest.mark.sandbox
def test_looping_mutant_is_cut_off_and_killed():
    """Regression: deleting `k += 1` from a solution's loop made a mutant spin until the
    task's agent timeout (minutes per seed); mutants now get a bounded agent phase."""
    import time

    solve = (
        "#!/bin/bash\nmkdir -p /app/report\npython3 - <<'PY'\n"
        "k = 0\nwhile k < 3:\n    j = k\n    k += 1\n"
        "lines = open('/app/app.log').read().splitlines()\n"
        "n = sum(1 for ln in lines if ln.startswith('ERROR '))\n"
        "open('/app/report/errors.txt', 'w').write(f'{n}\\n')\n"
        "msgs = sorted({ln.split(' ', 1)[1] for ln in lines if ln.startswith('ERROR ')})\n"
        "open('/app/report/messages.txt', 'w').write(''.join(m + '\\n' for m in msgs))\nPY\n"
    )
    task = base_task("audit-loop", solution={"solve.sh": solve.encode()})
    cfg = ExecConfig(reruns=0, max_mutants=6, mutant_timeout_floor_s=3, mutant_timeout_factor=1)
    t0 = time.monotonic()
    ev = run_exec_judge(task, cfg)
    assert time.monotonic() - t0 < 25  # the task's agent timeout alone is 30 s
    assert ev.measures["mutation_kill_rate"] >= 0.5, ev.findings
