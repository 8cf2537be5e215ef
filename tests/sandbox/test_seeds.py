"""The seed corpus: every seed is valid in the local backend (oracle passes every assertion,
nop fails at least one), has >= 3 named assertions, and the corpus covers the paper's eight
categories with >= 3 seeds each."""

from __future__ import annotations

from collections import Counter

import pytest

from sandbox.check import check_task
from tasks.checkrunner import __file__ as checkrunner_path
from tasks.corpus import load_seeds, seed_paths
from tasks.environment import render_dockerfile
from tasks.harbor import load_harbor
from tasks.model import PAPER_CATEGORIES

SEEDS = seed_paths()


def test_corpus_size_and_category_coverage():
    tasks = load_seeds()
    assert len(tasks) >= 40
    counts = Counter(t.category for t in tasks)
    thin = {c.value: counts.get(c, 0) for c in PAPER_CATEGORIES if counts.get(c, 0) < 3}
    assert not thin, f"categories with fewer than 3 seeds: {thin}"
    assert len({t.id for t in tasks}) == len(tasks)


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_seed_files_follow_the_conventions(path):
    task = load_harbor(path)
    assert task.id == path.name
    assert task.solution is not None and "solve.sh" in task.solution
    with open(checkrunner_path, "rb") as f:
        assert task.verifier.get("run_checks.py") == f.read(), "tests/run_checks.py is stale"
    assert task.environment.files.get("Dockerfile", b"").decode() == render_dockerfile(task), (
        "environment/Dockerfile is stale: run `t1 task fmt` on it"
    )
    assert not task.environment.allow_network


@pytest.mark.sandbox
@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_seed_oracle_passes_and_nop_fails(path):
    check = check_task(load_harbor(path))
    assert check.ok, check.problems
    assert check.oracle is not None and check.oracle.total >= 3


# Seeds whose checks give the agent's program what they wrote in a temporary directory: a
# project copied there for its `make`, a database for its queries, a log tree to rotate.
WRITES_THE_TESTS_TEMPORARIES = (
    "dbg-c-wordfreq-crash",
    "dbg-makefile-repair",
    "perf-c-quadratic-algorithms",
    "perf-sqlite-index-workload",
    "sa-log-rotate-script",
)


@pytest.mark.sandbox
@pytest.mark.parametrize("name", WRITES_THE_TESTS_TEMPORARIES)
def test_without_landlock_the_agents_programs_still_write_the_tests_temporaries(name, monkeypatch):
    """As on a kernel without Landlock (the agent's programs run as its uid): what the runner
    wrote below a temporary directory it gave the agent is the agent's when its program starts,
    so the oracle passes as it does in the agent's Landlock domain (all five failed before)."""
    monkeypatch.setenv("T1_JUDGE_LANDLOCK", "off")
    check = check_task(load_harbor(next(p for p in SEEDS if p.name == name)))
    assert check.oracle is not None and check.oracle.passed == check.oracle.total, check.problems
