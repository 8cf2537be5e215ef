"""The fast-clock rerun preloads libfaketime into the solution; some tools refuse to run
under it whatever the clock's rate (`su` and `runuser` here: measured on a public task whose
honest solution checks permissions as another user, which the rerun turned into a "flaky
verifier"). A fast-clock verdict change is now checked against its control, the same library
at the real rate: where the control changes the verdict too, the rerun is set aside."""

from __future__ import annotations

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.verdict import Code
from tests.audit.forms import OFF
from tests.factories import make_task

pytestmark = pytest.mark.sandbox


def test_a_verdict_the_clock_library_changes_at_any_rate_is_not_a_flaky_verifier():
    task = make_task("su-check", solve="su -s /bin/sh nobody -c true && touch /app/done\n")
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "starved": True}, workers=2))
    fast = [f for f in ev.findings if f.item == "fast-clock"]
    assert [f.code for f in fast] == [Code.RERUN_SKIPPED], [f.text() for f in fast]
    assert "at the real clock rate changes the verdict as well" in fast[0].evidence
    assert Code.FLAKY_VERIFIER not in ev.codes()
