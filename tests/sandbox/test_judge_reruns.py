"""A test that loads the agent's module into the test runner makes every outcome after it
the agent's (its code could have recorded anything from then on: docs/sandbox.md, "The report
channel"). Before, that cost every later test, also the ones that only read files: the retry
task of the public corpus paid an honest module 7 of 13 and a skip-provoker 13
(docs/audit.md, "What a trial is paid"). The judge now runs the verifier again without the
test that ran the agent's code, in a fresh runner from the agent's outputs, until a run
records every remaining outcome as its own (sandbox.judge, "Reruns").

The attack, first: the agent's module, once loaded in the runner, rewrites the answer the next
test reads. Its forged pass stays the agent's: the rerun reads the answer the agent left.

A module the tests import is first judged again in its own process (tests/sandbox/
test_isolate.py); source the tests execute themselves (`exec(compile(...))`) cannot be, and
reruns without the test that ran it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import run_trial
from sandbox.trial import CommandAgent
from tasks.results import FailureMode
from tests.factories import stock_task

TESTS = """import importlib.util
from pathlib import Path


def test_the_report_exists():
    assert Path("/app/report.txt").exists()


def test_the_module_counts_words():
    spec = importlib.util.spec_from_file_location("counter", "/app/counter.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.count_words("a b  c") == 3


def test_the_report_counts_the_poem():
    words = Path("/app/poem.txt").read_text().split()
    assert Path("/app/report.txt").read_text() == f"{len(words)}\\n"


def test_the_report_is_one_line():
    assert len(Path("/app/report.txt").read_text().splitlines()) == 1
"""
MODULE = "def count_words(text):\n    return len(text.split())\n"
SOLVE = f"""#!/bin/bash
cat > /app/counter.py <<'EOF'
{MODULE}EOF
wc -w < /app/poem.txt | tr -d ' ' > /app/report.txt
"""
FORGER = f"""cat > /app/counter.py <<'EOF'
{MODULE}from pathlib import Path
Path("/app/report.txt").write_text(f"{{len(Path('/app/poem.txt').read_text().split())}}\\n")
EOF
printf '0\\n' > /app/report.txt
"""
NAMES = [
    "test_outputs.py::test_the_report_exists",
    "test_outputs.py::test_the_module_counts_words",
    "test_outputs.py::test_the_report_counts_the_poem",
    "test_outputs.py::test_the_report_is_one_line",
]


def _task(tmp_path: Path, tests: str = TESTS):
    return stock_task(
        tmp_path,
        "counter",
        tests,
        SOLVE,
        "Write `/app/counter.py` with `count_words(text)`, the number of whitespace-separated "
        "words of `text`, and the number of words of `/app/poem.txt` to `/app/report.txt` (one "
        "line).\n",
    )


def _vouched(r) -> list[str]:
    return [a.name for a in r.report.vouched if a.ok]


def test_the_tests_after_one_that_ran_the_agents_code_are_judged_again(tmp_path, backend):
    task = _task(tmp_path)
    honest = run_trial(task, "oracle", backend)
    assert honest.failure_mode == FailureMode.NONE and honest.resolved, honest.verifier_output
    # the module ran in a process of its own in a rerun: every outcome is the judge's own
    assert [a.name for a in honest.assertions] == NAMES and _vouched(honest) == NAMES
    assert "process of their own" in honest.failure_detail and honest.report.independent
    assert [(c.path, c.test) for c in honest.report.agent_code] == [("/app/counter.py", NAMES[1])]

    forger = run_trial(task, CommandAgent(FORGER, "forger"), backend)
    assert forger.failure_mode == FailureMode.NONE, forger.failure_detail
    # its module wrote the right count while the runner held it: that pass stays the agent's
    # (in its own process the module writes no output: its import fails there). The local
    # backend hands the judge the agent's files themselves: the module changed the agent's
    # own report, so no rerun could see it as the agent left it, and none runs.
    own = [NAMES[0], NAMES[3]] if backend == "docker" else [NAMES[0]]
    assert _vouched(forger) == own, forger.report
    assert not forger.pay(None).resolved and list(forger.pay(None).passed) == own


EXECS = TESTS.replace(
    """    spec = importlib.util.spec_from_file_location("counter", "/app/counter.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.count_words("a b  c") == 3""",
    """    module = {}
    exec(compile(Path("/app/counter.py").read_text(), "/app/counter.py", "exec"), module)
    assert module["count_words"]("a b  c") == 3""",
)


@pytest.mark.sandbox
def test_source_the_tests_execute_themselves_reruns_without_that_test(tmp_path):
    """No process of its own for source the tests compile and run in theirs: the verifier
    runs again without the test that ran it."""
    assert EXECS != TESTS
    honest = run_trial(_task(tmp_path, EXECS), "oracle")
    assert honest.failure_mode == FailureMode.NONE and honest.resolved, honest.verifier_output
    assert [a.name for a in honest.assertions] == [NAMES[0], NAMES[2], NAMES[3], NAMES[1]]
    assert _vouched(honest) == [NAMES[0], NAMES[2], NAMES[3]]  # before reruns: [NAMES[0]]
    assert [(c.path, c.test) for c in honest.report.agent_code] == [("/app/counter.py", NAMES[1])]


@pytest.mark.sandbox
def test_no_rerun_where_the_agents_processes_live_on_through_the_verifier(tmp_path):
    """With the agent's processes running beside the verifier, its code loaded in one run
    could tell them what to write for the next: the first run's verdict stands."""
    task = _task(tmp_path).model_copy(update={"keep_agent_processes": True})
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.NONE and r.resolved, r.verifier_output
    assert _vouched(r) == [NAMES[0]] and len(r.report.agent_code) == 1


@pytest.mark.sandbox
def test_a_task_whose_tests_all_run_the_agents_code_is_judged_once_a_test(tmp_path):
    """Every test loads the module: each rerun leaves one more out and none vouches for
    anything; the reruns stop when no test is left to leave out."""
    load = "    exec(compile(Path('/app/counter.py').read_text(), '/app/counter.py', 'exec'), {})\n"
    body = EXECS
    for name in ("test_the_report_exists", "test_the_report_counts_the_poem"):
        body = body.replace(f"def {name}():\n", f"def {name}():\n{load}")
    assert body.count("exec(compile") == 3
    task = _task(tmp_path, body)
    r = run_trial(task, "oracle")
    assert r.failure_mode == FailureMode.NONE and r.resolved, r.verifier_output
    assert [c.test for c in r.report.agent_code] == [NAMES[0], NAMES[1], NAMES[2]]
    assert _vouched(r) == [NAMES[3]]


def _report(outcomes: list[tuple[str, bool]], mark: tuple[str, int] | None = None):
    from tasks.results import AgentCode, AssertionResult, ReportSource, VerifierReport

    statuses = {True: "passed", False: "failed"}
    return VerifierReport(
        assertions=[AssertionResult(name=n, status=statuses[ok]) for n, ok in outcomes],
        source=ReportSource.PYTEST,
        authenticated=True,
        agent_code=[AgentCode(path="/app/m.py", after=mark[1], test=mark[0])] if mark else [],
    )  # fmt: skip


def test_reruns_leave_out_every_test_that_ran_the_agents_code_and_merge_first_own_outcomes():
    from sandbox.judge import merge_reruns, next_without

    first = _report([("a", True), ("m1", True), ("b", True), ("c", True)], ("m1", 1))
    assert next_without([first]) == ("m1",)
    second = _report([("a", True), ("b", False), ("m2", True), ("c", True)], ("m2", 2))
    assert next_without([first, second]) == ("m1", "m2")
    third = _report([("a", True), ("b", False), ("c", True)])
    assert next_without([first, second, third]) is None
    merged = merge_reruns([first, second, third])
    # each outcome from the first run that recorded it before its runner ran the agent's code:
    # b's pass in the first run came after the mark there; the second run's own says it fails
    assert [(a.name, a.ok) for a in merged.assertions] == [
        ("a", True), ("b", False), ("c", True), ("m1", True), ("m2", True)
    ]  # fmt: skip
    assert [a.name for a in merged.vouched] == ["a", "b", "c"]
    assert [(c.test, c.after) for c in merged.agent_code] == [("m1", 3), ("m2", 3)]
    # the last run still marked (its reruns were cut): its tail stays the agent's
    cut = merge_reruns([first, second])
    assert [a.name for a in cut.vouched] == ["a", "b"] and {a.name for a in cut.assertions} == {
        "a", "b", "c", "m1", "m2"
    }  # fmt: skip
    # a mark outside any test (collection), or no pytest run: nothing to leave out
    assert next_without([_report([("a", True)], ("", 0))]) is None
    seeds = _report([("a", True), ("m", True)], ("m", 1)).model_copy(
        update={"source": "run_checks"}
    )
    assert next_without([seeds]) is None


def test_a_file_the_verifier_changed_is_told_when_it_is_given_back(tmp_path):
    """The local backend moves the agent's files into the judge's layer and back: one the
    verifier (or the agent's code in its runner) wrote, chmodded, linked or removed is
    reported, so no later run of the verifier trusts the agent's copy."""
    import os

    from sandbox.carry import _signature, give_back

    files = {}
    for name in ("same", "written", "chmodded", "linked", "removed"):
        agent, judge = tmp_path / f"a-{name}", tmp_path / f"j-{name}"
        judge.write_text("answer\n")
        files[name] = (agent, judge, _signature(os.lstat(judge)))
    files["written"][1].write_text("forged\n")
    files["chmodded"][1].chmod(0o600)
    os.link(files["linked"][1], tmp_path / "extra")
    files["removed"][1].unlink()
    changed = give_back(list(files.values()))
    assert sorted(p.name for p in changed) == ["a-chmodded", "a-linked", "a-removed", "a-written"]
    assert (tmp_path / "a-same").read_text() == "answer\n"  # given back
