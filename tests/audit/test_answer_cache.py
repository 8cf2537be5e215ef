"""A reference solution that copies its answers from a cache the environment's build wrote
(`audit.planted` variant `answer-cache`): solve.sh spells no value, so the spelled-values
shortcut rule accepted it; traced, it reads a file no one declared that holds the unchanged
output, and the build's files hold the expected values. Runs the executable judge (trials
only as far as the evidence needs) on the local backend."""

from __future__ import annotations

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.planted import Defect, generate
from audit.verdict import Code

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
LEAN = dict(
    reruns=0, conditions=False, chance=False, max_mutants=0, max_output_mutants=0, hacks=False
)


def _codes(task, trace: bool) -> dict[Code, list[str]]:
    ev = run_exec_judge(task, ExecConfig(trace=trace, built=trace, **LEAN))
    out: dict[Code, list[str]] = {}
    for f in ev.findings:
        out.setdefault(f.code, []).append(f.evidence)
    return out


def test_a_solution_copying_a_built_cache_is_a_shortcut_only_when_traced():
    task = generate(23, Defect.SHORTCUT, "answer-cache").task  # a verifier with fixed values
    untraced = _codes(task, trace=False)  # nor the build's files read back
    hard = {Code.SOLUTION_SHORTCUT, Code.TEST_LEAKAGE}
    assert not hard & set(untraced), untraced  # the attack: accepted
    traced = _codes(task, trace=True)
    assert Code.SOLUTION_SHORTCUT in traced, traced
    assert all("cached answer" in e for e in traced[Code.SOLUTION_SHORTCUT])
    assert traced.get(Code.SOLUTION_READ), "the cache files are named as undeclared reads"
    # the cache is readable by the agent too: the build's files hold the expected values
    assert any(e.startswith("image:") for e in traced.get(Code.TEST_LEAKAGE, [])), traced
    # the clean twin reads only its declared input
    twin = _codes(generate(23, None).task, trace=True)
    assert not (hard | {Code.SOLUTION_READ}) & set(twin), twin
