"""The dense reward an agent's own state can multiply or provoke (docs/audit.md, "What a
trial is paid").

A stock Harbor task (pytest run by test.sh) whose tests are written as the public corpus
writes them: one test parametrized over the reports the agent wrote, one that skips when an
output is missing. Terminal-Bench counts a skip as a pass, and every outcome counts. Measured
before the reference verdict (the trainer paid `independent_passed`), on both backends: an
agent that writes 40 empty-but-newline-terminated reports earned 41 outcomes against the
reference solution's 3 (a reward 13.7 times the honest one), and a nop agent earned 2 of 3.
Paid against the reference verdict, the outcomes the reference also earned, neither earns
anything, and the reference solution earns all of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import run_trial
from sandbox.trial import CommandAgent
from tasks.results import AssertionStatus, FailureMode, ReferenceVerdict
from tests.factories import stock_task

TESTS = """from collections import Counter
from pathlib import Path

import pytest

OUT = Path("/app/out")


def top3():
    c = Counter(Path("/app/poem.txt").read_text().split())
    return [f"{w} {n}" for w, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]


def test_top3():
    assert (OUT / "top3.txt").read_text().splitlines() == top3()


REPORTS = sorted(OUT.glob("*.txt")) if OUT.is_dir() else []


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_every_report_ends_with_a_newline(report):
    assert report.read_text().endswith("\\n")


def test_the_summary_names_the_top_word():
    summary = Path("/app/summary.txt")
    if not summary.exists():
        pytest.skip("no summary written yet")
    assert summary.read_text().split()[0] == top3()[0].split()[0]
"""
SOLVE = """#!/bin/bash
mkdir -p /app/out
tr ' ' '\\n' < /app/poem.txt | sed '/^$/d' | sort | uniq -c | awk '{print $2, $1}' \\
  | sort -k2,2nr -k1,1 | head -3 > /app/out/top3.txt
head -1 /app/out/top3.txt | cut -d' ' -f1 > /app/summary.txt
"""
INFLATE = "mkdir -p /app/out && for i in $(seq 40); do echo > /app/out/r$i.txt; done"


def _task(tmp_path: Path):
    return stock_task(
        tmp_path,
        "reports",
        TESTS,
        SOLVE,
        "Write the three most frequent words of `/app/poem.txt` to `/app/out/top3.txt`, one "
        "per line as `WORD COUNT`, most frequent first, ties broken alphabetically; every "
        "report under /app/out ends with a newline. Write the most frequent word alone to "
        "`/app/summary.txt`.\n",
    )


def test_outcomes_the_agents_state_adds_or_skips_are_not_paid(tmp_path, backend):
    task = _task(tmp_path)
    oracle = run_trial(task, "oracle", backend)
    assert oracle.failure_mode == FailureMode.NONE and oracle.resolved, oracle.verifier_output
    reference = ReferenceVerdict.of(oracle)
    assert reference is not None and reference.total == 3
    assert [o.status for o in reference.outcomes] == [AssertionStatus.PASSED] * 3

    inflate = run_trial(task, CommandAgent(INFLATE, "inflate"), backend)
    nop = run_trial(task, "nop", backend)
    # The attack, as Terminal-Bench counts it: 40 reports and a provoked skip pass.
    assert (inflate.independent_passed, inflate.total) == (41, 42), inflate.verifier_output
    assert (nop.independent_passed, nop.total) == (2, 3), nop.verifier_output
    assert not inflate.resolved and not nop.resolved

    # Paid against the reference verdict: only what the reference solution also earned.
    assert inflate.pay(reference).passed == () and inflate.pay(reference).total == 3
    assert nop.pay(reference).passed == ()
    honest = oracle.pay(reference)
    assert len(honest.passed) == honest.total == 3 and honest.resolved
    # Without a reference (a task never audited) the provoked skips (nop's two: an empty
    # parameter set and the summary's) are still not paid; the reports the agent added are
    # (nothing tells them from the task's own outcomes).
    assert len(inflate.pay(None).passed) == 40 and nop.pay(None).passed == ()


@pytest.mark.sandbox
@pytest.mark.parametrize("missing", ["summary", "a report"])
def test_an_honest_answer_that_misses_one_part_is_paid_for_the_rest(tmp_path, missing):
    """The reference pays partial credit as before: an agent that does all but one part earns
    the outcomes it shares with the reference solution, and does not resolve the task."""
    task = _task(tmp_path)
    oracle = run_trial(task, "oracle")
    reference = ReferenceVerdict.of(oracle)
    assert reference is not None
    undo = "rm /app/summary.txt" if missing == "summary" else "truncate -s -1 /app/out/top3.txt"
    script = SOLVE.split("\n", 1)[1] + undo + "\n"
    r = run_trial(task, CommandAgent(script, "partial"))
    assert r.failure_mode == FailureMode.NONE, r.failure_detail
    got = r.pay(reference)
    assert len(got.passed) == 2 and got.total == 3 and not got.resolved, r.verifier_output


@pytest.mark.sandbox
def test_the_audit_records_the_reference_verdict_and_pays_nop_and_hacks_against_it(tmp_path):
    """The exec judge's oracle gives the task's reference verdict; its row carries it to the
    warehouse (`audits.reference`) and nop's free reward is what a trainer would pay nop: the
    two outcomes it passed (an empty parameter set and a skip) were 'free reward' before."""
    from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
    from tests.audit.forms import OFF

    task = _task(tmp_path)
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "hacks": True}, workers=2))
    assert ev.reference is not None and ev.reference.total == 3, [f.text() for f in ev.findings]
    assert ev.measures["nop_pass_share"] == 0.0
    shares = {k: v for k, v in ev.measures.items() if k.startswith("hack_share.")}
    assert shares and max(shares.values()) < 1.0, shares
    # the audit's oracle runs traced; its verdict is the one a plain oracle run gives
    assert ev.reference == ReferenceVerdict.of(run_trial(task, "oracle"))
    row = ev.to_record()
    assert row.reference is not None and len(row.reference) == 3
    assert ExecEvidence.from_record(row).reference == ev.reference
