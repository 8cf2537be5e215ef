"""Planted defects: the hand-written set (static checks, regressions) and, in the sandbox, one
generated draw per hard-reject class with its clean twin (`audit.planted`). The full recall
measurement is `benchmarks/audit_recall.py` (docs/audit.md); these tests pin that each class's
evidence works end to end on material with varied surface forms, and that clean twins pass.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge, score_dimensions
from audit.planted import VARIANTS, Defect, generate
from audit.rubric import decide, load_rubric
from audit.static_checks import static_findings
from audit.verdict import Code, Verdict
from sandbox.trial import run_trial
from tasks.corpus import SEED_DIR, import_dir
from tests.audit.planted import PLANTED, base_task

RUBRIC = load_rubric("t1")
CLEAN_SEEDS = ("ds-sensor-summary-stats", "vc-reflog-recover", "sa-log-rotate-script")
# (class, variant, seed): one draw per class, chosen to cover the three verifier styles and
# solutions from one line to a long script (the seed decides those; see the ids below).
DRAWS = [
    (Defect.HIDDEN, "case-mismatch", 2),
    (Defect.LEAKAGE, "answer-file", 16),
    (Defect.SHORTCUT, "word-answer", 7),
    (Defect.WEAK, "first-line", 5),
    (Defect.FLAKY, "timezone", 11),
]


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


def test_the_generator_varies_surface_forms_and_plants_every_variant():
    combos = [(d, v) for d, vs in VARIANTS.items() for v in vs]
    drawn = [generate(100 + k, d, v) for k, (d, v) in enumerate(combos)]
    assert len(VARIANTS) == 5 and all(len(vs) >= 5 for vs in VARIANTS.values())
    assert {p.style for p in drawn} == {"pytest", "shell", "junit"}
    assert {p.solution_form for p in drawn} == {"oneliner", "steps", "python", "long"}
    assert {p.fmt for p in drawn} == {"log", "csv", "jsonl"}
    twin, bad = generate(3), generate(3, Defect.HIDDEN, "extra-file")
    assert twin.task.environment == bad.task.environment and twin.task.id != bad.task.id
    with pytest.raises(ValueError, match="unknown variant"):
        generate(0, Defect.WEAK, "coin")


# ---- executable: sandbox ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated() -> dict[str, tuple[ExecEvidence, ExecEvidence]]:
    cfg = ExecConfig(workers=2)
    pairs = [(generate(s, d, v).task, generate(s).task) for d, v, s in DRAWS]
    flat = [t for pair in pairs for t in pair]
    with ThreadPoolExecutor(max_workers=2) as pool:
        evs = list(pool.map(lambda t: run_exec_judge(t, cfg), flat))
    return {d.value: (evs[2 * i], evs[2 * i + 1]) for i, (d, _, _) in enumerate(DRAWS)}


@pytest.mark.sandbox
@pytest.mark.parametrize("defect", [d.value for d, _, _ in DRAWS])
def test_a_generated_defect_is_rejected_for_its_class_and_its_twin_is_not(generated, defect):
    bad, twin = generated[defect]
    decision = _decision(bad)
    assert decision.verdict == Verdict.REJECTED and defect in decision.hard, [
        f.text() for f in bad.defects()
    ]
    assert _decision(twin).verdict != Verdict.REJECTED, [f.text() for f in twin.defects()]


@pytest.mark.sandbox
def test_generated_clean_twins_pass_their_own_oracle():
    for d, v, s in DRAWS:
        for p in (generate(s, d, v), generate(s)):
            r = run_trial(p.task, "oracle")
            assert r.resolved, (p.task.id, r.failure_mode, r.verifier_output[-400:])


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
def test_weak_verifier_is_caught_by_output_and_step_mutants(planted_evidence):
    ev = planted_evidence["weak_verifier"]
    weak = {f.item for f in ev.findings if f.code == Code.WEAK_VERIFIER}
    assert {"empty /app/report/errors.txt", "corrupt /app/report/errors.txt"} <= weak
    assert ev.measures["output_kill_rate"] < 0.5
    clean = planted_evidence["clean"]
    assert clean.measures["output_kill_rate"] == 1.0 and clean.measures["mutation_kill_rate"] == 1.0


@pytest.mark.sandbox
def test_shortcut_is_measured_by_perturbing_the_declared_input(planted_evidence):
    trial = [f for f in planted_evidence["solution_shortcut"].findings if f.source == "trial"]
    assert any(f.code == Code.SOLUTION_SHORTCUT and "300" in f.evidence for f in trial)
    # the clean outputs survive the log's content perturbations (its ERROR lines are kept),
    # and only deleting the log changed them, which is no evidence either way: both are
    # measured, neither is a shortcut, for the solution spells none of their values
    clean = planted_evidence["clean"].findings
    perturbed = {f.item: f.evidence for f in clean if f.code == Code.INPUTS_PERTURBED}
    assert set(perturbed) == {"/app/report/errors.txt", "/app/report/messages.txt"}
    assert all("spells" in why or "changes when" in why for why in perturbed.values())
    assert not any(f.code == Code.SOLUTION_SHORTCUT for f in clean)


@pytest.mark.sandbox
def test_clean_base_is_accepted_with_every_rerun_condition_stable(planted_evidence):
    ev = planted_evidence["clean"]
    assert ev.defects() == []
    stable = {f.item for f in ev.findings if f.code == Code.RERUN_STABLE}
    assert {"rerun-1", "rerun-2", "timezone", "locale", "order"} <= stable
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
    cfg = ExecConfig(reruns=0, conditions=False, chance=False, perturb=False, max_output_mutants=0,
                     max_mutants=6, mutant_timeout_floor_s=3, mutant_timeout_factor=1)  # fmt: skip
    t0 = time.monotonic()
    ev = run_exec_judge(task, cfg)
    assert time.monotonic() - t0 < 40  # the task's agent timeout alone is 30 s per mutant
    assert ev.measures["mutation_kill_rate"] >= 0.5, ev.findings


# Only the reruns: the order condition is what this pins (seed 1: a pytest verifier).
RERUNS_ONLY = ExecConfig(
    reruns=0, perturb=False, max_mutants=0, max_output_mutants=0, hacks=False, trace=False
)


@pytest.mark.sandbox
def test_listdir_order_flake_is_caught_by_the_order_rerun_and_its_twin_is_not():
    """Regression: the verifier compares `os.listdir` with the `ls -U` the solution saved;
    re-creating entries never changed the order on the hashed ext4 upper layer, so the
    order rerun passed and the task was accepted (0 of 12 draws in docs/audit.md)."""
    flaky = run_exec_judge(generate(1, Defect.FLAKY, "listdir-order").task, RERUNS_ONLY)
    order = [f for f in flaky.findings if f.item == "order"]
    assert [f.code for f in order] == [Code.FLAKY_VERIFIER], [f.text() for f in order]
    assert "index" in order[0].evidence
    clean = run_exec_judge(generate(1).task, RERUNS_ONLY)
    stable = {f.item for f in clean.findings if f.code == Code.RERUN_STABLE}
    assert "order" in stable and not clean.defects(), [f.text() for f in clean.defects()]


@pytest.mark.sandbox
def test_an_order_rerun_that_changed_no_order_is_skipped_not_stable(monkeypatch):
    """Regression: without the readdir library (no C compiler on the host, an image whose
    libc refuses it) and on a filesystem that lists by name hash (ext4), re-creating entries
    changes no listing: the order rerun then ran as the base run did and was recorded as
    stable. It is a skipped rerun, or (where re-creating did move a listing) caught."""
    import audit.trials
    import audit.variants

    monkeypatch.setattr(audit.trials, "host_readdir_shim", lambda: None)
    monkeypatch.setattr(audit.variants, "host_readdir_shim", lambda: None)
    flaky = run_exec_judge(generate(1, Defect.FLAKY, "listdir-order").task, RERUNS_ONLY)
    order = [f for f in flaky.findings if f.item == "order"]
    assert [f.code for f in order] in ([Code.RERUN_SKIPPED], [Code.FLAKY_VERIFIER]), [
        f.text() for f in order
    ]


@pytest.mark.docker
def test_the_order_rerun_reverses_readdir_on_the_docker_backend(docker_engine):
    """The order library ships with the wrapped verifier and loads in the container too: the
    listdir-order flake is caught there with readdir reversed, not by luck of re-creation."""
    cfg = RERUNS_ONLY.model_copy(update={"backend": "docker"})
    flaky = run_exec_judge(generate(1, Defect.FLAKY, "listdir-order").task, cfg)
    order = [f for f in flaky.findings if f.item == "order"]
    assert [f.code for f in order] == [Code.FLAKY_VERIFIER], [f.text() for f in order]
    assert "readdir reversed" in order[0].evidence, order[0].evidence
