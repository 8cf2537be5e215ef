"""Shared by the tests that audit a set of stock-layout tasks with only the trials each one's
class needs (test_behaviour_forms.py, test_independent_forms.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge, score_dimensions
from audit.rubric import Decision, decide, load_rubric

RUBRIC = load_rubric("t1")
# every probe off; each task turns on what its class needs
OFF = dict(
    reruns=0, conditions=False, perturb=False, max_mutants=0, max_output_mutants=0,
    hacks=False, built=False, answer_swaps=False, trace_verifier=False, free_reward=False,
    starved=False, chance=False,
)  # fmt: skip


def judge_set(directory: Path, probes: dict[str, dict]) -> dict[str, ExecEvidence]:
    """Evidence for each task of `directory` named in `probes`, with only those probes on."""
    from tasks.corpus import import_dir

    tasks = {t.id: t for t in import_dir(directory)[0]}

    def judge(name: str) -> ExecEvidence:
        return run_exec_judge(tasks[name], ExecConfig(**{**OFF, **probes[name]}, workers=2))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(probes, pool.map(judge, probes), strict=True))


def decision(ev: ExecEvidence) -> Decision:
    return decide(score_dimensions(ev), ev.codes(), RUBRIC)


def texts(ev: ExecEvidence) -> list[str]:
    return [f.text() for f in ev.defects()]
