"""The pure pieces of the audit's evidence: output mutants, perturbation comparisons, rerun
conditions, the verifier-reporting decision, the blend, and typed findings round trips.
No sandbox here; the trials that feed these are in test_planted_defects.py."""

from __future__ import annotations

import subprocess

import pytest

from audit.intake import Reporting, verifier_reporting, with_reporting
from audit.judge_exec import chance_rerun_count
from audit.mutation import make_mutants, mutate_output
from audit.perturbation import (
    answer_leaks,
    computed_tokens,
    shortcut_findings,
    verifier_tracks_inputs,
)
from audit.rubric import blend
from audit.static_checks import labelled_line
from audit.trials import moved_dirs, order_applied, traced_reads, undeclared_reads
from audit.variants import (
    CONDITION_SCRIPT,
    CONDITIONS,
    TZ_FAR,
    changed_assertions,
    condition_task,
    entropy_finding,
    flaky_findings,
)
from audit.verdict import Code, Finding, Source
from tasks.results import AssertionResult, AssertionStatus, FailureMode, TrialResult
from tests.audit.planted import base_task
from tests.factories import make_task


def test_output_mutants_change_every_value_and_keep_structure():
    text = b'{\n  "total": 412,\n  "status": "ok"\n}\n'
    bad = mutate_output(text, "corrupt").decode()
    assert '"total": 523' in bad and '"status": "bx"' in bad  # keys kept, values changed
    assert mutate_output(b"alpha\nbeta\ngamma\ndelta\n", "truncate") == b"alpha\nbeta\n"
    assert mutate_output(b"300\n", "truncate") == b"30"
    assert mutate_output(b"6\n", "truncate") == b""  # not "6": a shell $(cat) reads that as 6
    assert mutate_output(b"alpha\nbeta\n\n\n", "truncate") == b"alpha\n"
    assert mutate_output(b"ERROR disk full\n", "corrupt") == b"REEBE qvfx shyy\n"
    assert mutate_output(b"anything", "empty") == b""
    blob = bytes(range(30))
    assert mutate_output(blob, "corrupt") != blob and len(mutate_output(blob, "corrupt")) == 30
    with pytest.raises(ValueError, match="unknown output mutation"):
        mutate_output(b"x", "delete")


def test_the_repair_mutant_pairs_each_name_with_another_value_and_keeps_the_multiset():
    """A blind fixture's tests checked the key set, the value types and the sum: an answer
    that pairs no category with its own total passed them all. The mutant is that answer."""
    import json

    text = b'{\n  "food": 12.5,\n  "rent": 800.0,\n  "fun": 3\n}\n'
    was, now = json.loads(text), json.loads(mutate_output(text, "repair"))
    assert set(now) == set(was) and sorted(now.values()) == sorted(was.values())
    assert all(now[k] != was[k] for k in was)
    assert mutate_output(b"name,total\nalice,30\nbob,5\n", "repair") == (
        b"name,total\nalice,5\nbob,30\n"
    )
    # Bare numbers (a list whose order may be free), one named line, equal values: no mutant.
    for same in (b"1\n2\n3\n", b"total: 6\n", b"a 1\nb 1\n", b"\xff\x00 1\nb 2\n"):
        assert mutate_output(same, "repair") == same


def test_a_one_step_solution_still_gets_a_mutant():
    """Regression: mutation testing needed two mutants, so a one-line solution escaped."""
    mutants = make_mutants("#!/bin/bash\necho 300 > /app/out.txt\n")
    assert len(mutants) == 1 and mutants[0].operator == "delete-step"


def test_shortcut_needs_unchanged_outputs_spelled_values_and_a_check_on_them():
    base = {"/app/o/count.txt": "h1", "/app/o/list.txt": "h2"}
    perturbed = {
        "delete": {"/app/o/count.txt": "h1", "/app/o/list.txt": None},
        "shift-digits": {"/app/o/count.txt": "h1", "/app/o/list.txt": "h3"},
    }
    texts = {"/app/o/count.txt": "317\n", "/app/o/list.txt": "amber\n"}
    inputs = {"/app/data/in.log": "x 1\ny 2\n"}
    args = ("echo 317 > /app/o/count.txt", "Count the records.", inputs)
    found = shortcut_findings(base, perturbed, texts, *args, ["317"], False)
    codes = {f.item: f.code for f in found}
    assert codes == {
        "/app/o/count.txt": Code.SOLUTION_SHORTCUT,
        "/app/o/list.txt": Code.INPUTS_PERTURBED,
    }
    # the same output, but no check asserts 317 and the verifier ignores the inputs' content
    quiet = shortcut_findings(base, perturbed, texts, *args, ["other"], False)
    assert all(f.code == Code.INPUTS_PERTURBED for f in quiet)
    # a verifier whose expectation follows the inputs makes the constant matter
    reads = shortcut_findings(base, perturbed, texts, *args, [], True)
    assert Code.SOLUTION_SHORTCUT in {f.code for f in reads}
    # one digit counts only when the verifier's expectation follows the inputs
    one = {"/app/o/count.txt": "7\n", "/app/o/list.txt": "amber\n"}
    args7 = ("echo 7 > /app/o/count.txt", "Count the records.", inputs)
    assert Code.SOLUTION_SHORTCUT in {
        f.code for f in shortcut_findings(base, perturbed, one, *args7, [], True)
    }
    assert Code.SOLUTION_SHORTCUT not in {
        f.code for f in shortcut_findings(base, perturbed, one, *args7, ["7"], False)
    }
    # stated in the instruction: not a hard-coded answer
    stated = shortcut_findings(
        base, perturbed, texts, args[0], "Write 317.", inputs, ["317"], False
    )
    assert all(f.code == Code.INPUTS_PERTURBED for f in stated)
    # the solution stopped before writing it when its inputs were deleted: still the same
    early = {**perturbed, "delete": {"/app/o/count.txt": None, "/app/o/list.txt": None}}
    found = shortcut_findings(base, early, texts, *args, ["317"], False)
    assert {f.item: f.code for f in found}["/app/o/count.txt"] == Code.SOLUTION_SHORTCUT
    # missing under every content perturbation too: nothing shows it is a constant
    gone = {m: {"/app/o/count.txt": None} for m in ("delete", "shift-digits")}
    assert Code.SOLUTION_SHORTCUT not in {
        f.code for f in shortcut_findings(base, gone, texts, *args, ["317"], False)
    }


def test_computed_values_count_only_under_content_perturbations():
    texts = {"/o": "total: 4129\nowner: root\n"}
    runs = {"delete": {}, "shift-digits": {"/o": "total: 5230\nowner: root\n"}}
    assert computed_tokens(texts, runs) == {"/o": {"4129"}}
    assert computed_tokens(texts, {"delete": {}}) == {}  # absent inputs do not make it computed


def test_answer_leaks_are_judged_in_context():
    computed = {"/app/o.txt": {"4129"}}
    texts = {"/app/o.txt": "4129\n"}
    visible = {
        "instruction.md": "Count them (there are many, e.g. 4129 in step 2 of the manual).",
        "environment/app/data.log": "4129 records were rotated\n",
        "environment/app/notes.md": "release notes\nexpected total: 4129\n",
        "environment/app/.state": "4129\n",
    }
    found = {f.evidence.split(" ", 1)[0] for f in answer_leaks(computed, texts, visible, set())}
    assert found == {"environment/app/notes.md", "environment/app/.state"}
    assert labelled_line("tests passed", 'diff a tests/expected.txt && echo "tests passed"') is None
    assert labelled_line("300", "# expected: 300") == "# expected: 300"


def test_every_computed_line_kept_in_one_file_is_a_leak_whatever_joins_them():
    """Two blind fixtures kept the answer as a shell history's printf (lines joined by `\\n`)
    and as a Dockerfile ENV (joined by `;`): no single value was labelled, every line was
    there. An input holding them (a filter's log) is not a leak, nor one line alone."""
    computed = {"/app/o.txt": {"A-1013", "120", "B-1042", "91", "89"}}
    texts = {"/app/o.txt": "A-1013 120 125\nB-1042 91 89\n"}
    visible = {
        "environment/history": "cd /app\nprintf 'A-1013 120 125\\nB-1042 91 89\\n' > o.txt\n",
        "environment/Dockerfile": 'FROM x\nENV WANT="A-1013 120 125;B-1042 91 89"\n',
        "environment/app/moves.log": "in A-1013 120 125\nout B-1042 91 89\n",
        "environment/app/README": "for example: A-1013 120 125\n",
    }
    given = {"environment/app/moves.log"}
    found = {f.evidence.split(" ", 1)[0] for f in answer_leaks(computed, texts, visible, given)}
    assert found == {"environment/history", "environment/Dockerfile"}


def test_a_one_digit_answer_is_a_leak_only_as_a_whole_line_of_a_hidden_channel():
    # a count of 8 has no value long enough to search prose for; a hidden archive member or
    # commit message that holds it as a whole line is the answer, plain files are not judged
    computed = {"/app/results/n.txt": set()}
    texts = {"/app/results/n.txt": "8\n"}
    visible = {
        "environment/app/.cache/b.tar!golden/n.txt": "8\n",
        "environment/app/.git!commit a98c2b44e222": "tree 1\n\nrecord the run\n\n8\n",
        "environment/app/.git!commit 13373de4b300": "tree 1\n\nbump to 8 workers\n",
        "environment/app/VERSION": "8\n",
        "environment/app/data.tar!rows.txt": "8\n",  # an archive the agent is given
        "image:/app/results/n.txt": "8\n",  # a stale output, not a leak
    }
    given = {"environment/app/data.tar!rows.txt"}
    found = {f.evidence.split(" ", 1)[0] for f in answer_leaks(computed, texts, visible, given)}
    assert found == {
        "environment/app/.cache/b.tar!golden/n.txt",
        "environment/app/.git!commit",
    }
    assert answer_leaks({}, texts, visible, given) == []  # an output that does not compute


def _trial(ok: list[bool], mode: FailureMode = FailureMode.NONE) -> TrialResult:
    status = {True: AssertionStatus.PASSED, False: AssertionStatus.FAILED}
    asserts = [AssertionResult(name=f"t{i}", status=status[o]) for i, o in enumerate(ok)]
    r = TrialResult(trial_id="x", task_id="t", task_hash="h", agent="a", backend="local",
                    failure_mode=mode)  # fmt: skip
    r.report.assertions = asserts
    return r


def test_flaky_findings_compare_every_rerun_with_the_base_run():
    base = _trial([True, True, True])
    runs = [
        ("rerun-1", _trial([True, True, True]), True, ""),
        ("clock", _trial([True, False, True]), True, "shifted"),
        ("locale", _trial([True, True, True]), False, "de_DE.UTF-8 not installed"),
        ("order", _trial([], FailureMode.SANDBOX_ERROR), True, ""),
    ]
    out = {f.item: f for f in flaky_findings(base, runs)}
    assert out["rerun-1"].code == Code.RERUN_STABLE
    assert out["clock"].code == Code.FLAKY_VERIFIER and "t1" in out["clock"].evidence
    assert out["locale"].code == Code.RERUN_SKIPPED  # not applied: no verdict
    assert out["order"].code == Code.RERUN_SKIPPED and out["order"].source == Source.INFRA


def test_a_verdict_the_same_entropy_changes_was_decided_by_chance():
    """The `entropy` rerun is read apart from the others: a change there is evidence that the
    verdict depends on chance (`stochastic_verdict`), not proof of a flaky verifier; no change,
    or no rerun, is recorded as `flaky_findings` records it."""
    base = _trial([True, True, True])
    drawn = entropy_finding(base, _trial([True, False, True]), True, "same entropy")
    assert drawn.code == Code.STOCHASTIC_VERDICT and drawn.item == "entropy"
    assert "'t1'" in drawn.evidence and "'t0'" not in drawn.evidence
    same = entropy_finding(base, _trial([True, True, True]), True, "same entropy")
    assert same.code == Code.RERUN_STABLE
    unloaded = entropy_finding(base, _trial([True, False, True]), False, "musl refused it")
    assert unloaded.code == Code.RERUN_SKIPPED  # not applied: no evidence either way
    hung = entropy_finding(base, _trial([], FailureMode.SANDBOX_ERROR), True, "")
    assert hung.code == Code.RERUN_SKIPPED and hung.source == Source.INFRA


def test_the_chance_reruns_fit_their_budget():
    assert chance_rerun_count(20, 300.0, 0.4) == 20  # 3 s a trial: all twenty
    assert chance_rerun_count(20, 300.0, 28.0) == 10  # 30 s a trial: ten
    assert chance_rerun_count(20, 300.0, 900.0) == 1  # never none
    assert chance_rerun_count(0, 300.0, 1.0) == 0  # none asked for


def test_a_rerun_named_by_another_report_source_is_the_same_verdict():
    """Bug pinned: the reruns of a stock pytest task were read from junit.xml
    (`test_outputs::test_x`) while the base run came from pytest's records
    (`test_outputs.py::test_x`): every rerun was `flaky_verifier`."""
    base = _trial([True, False])
    for a, n in zip(base.report.assertions, ["test_x", "test_y"], strict=True):
        a.name = f"test_outputs.py::{n}"
    junit = _trial([True, False])
    for a, n in zip(junit.report.assertions, ["test_x", "test_y"], strict=True):
        a.name = f"tests.test_outputs::{n}"
    bare = _trial([False, True])  # names without their module; one outcome swapped
    for a, n in zip(bare.report.assertions, ["test_y", "test_x"], strict=True):
        a.name = n
    out = {f.item: f for f in flaky_findings(base, [("clock", junit, True, ""),
                                                     ("locale", bare, True, "")])}  # fmt: skip
    assert out["clock"].code == Code.RERUN_STABLE, out["clock"].evidence
    assert out["locale"].code == Code.RERUN_STABLE, out["locale"].evidence
    assert changed_assertions({"m::test_x": True}, {"test_x": False}) == ["m::test_x"]


@pytest.mark.parametrize("name", list(CONDITIONS))
def test_a_rerun_condition_leaves_the_entry_and_its_report_channel_as_they_are(name):
    """The condition is sourced through BASH_ENV; the entry script is the task's own, so the
    harness opens the same report channel and reads the same sources as for the base run
    (before: the entry became a wrapper that exec'ed `.t1-test.sh`, which the channel's
    detector did not follow; the judge now opens the channel for every entry)."""
    test_sh = b"#!/bin/bash\npytest /tests/test_outputs.py -rA\n"
    task = make_task("cond", extra_tests={"test.sh": test_sh, "test_outputs.py": b""})
    variant = condition_task(task, name)
    assert variant.verifier["test.sh"] == task.verifier["test.sh"]
    script = variant.verifier[CONDITION_SCRIPT].decode()
    assert variant.verifier_config.env["BASH_ENV"] == f"/tests/{CONDITION_SCRIPT}"
    assert all(f"export {k}=" in script for k in CONDITIONS[name])
    with pytest.raises(ValueError, match="unknown rerun condition"):
        condition_task(task, "moon")


def test_the_timezone_condition_is_a_timezone_libc_reads():
    """Bug pinned: TZ=T1-14 is no valid POSIX TZ (a name needs 3 letters or <quotes>); libc
    fell back to UTC and the timezone rerun changed nothing."""
    r = subprocess.run(["date", "+%z"], env={"TZ": TZ_FAR}, capture_output=True, text=True)
    assert r.stdout.strip() == "+1400"


@pytest.mark.parametrize(
    "test_sh, want",
    [
        (
            "pytest /tests/test_outputs.py -rA\necho 1 > /logs/verifier/reward.txt",
            Reporting.PER_ASSERTION,
        ),
        ("uv run pytest --ctrf /logs/verifier/ctrf.json /tests", Reporting.PER_ASSERTION),
        ("python3 /tests/run_checks.py /tests/test_outputs.py", Reporting.PER_ASSERTION),
        (
            "pytest /tests -q && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/reward.txt",
            Reporting.REWARD_ONLY,
        ),
        ("./check && echo 1 > /logs/verifier/reward.txt", Reporting.REWARD_ONLY),
        ("make test", Reporting.UNKNOWN),
    ],
)
def test_only_a_reward_only_verifier_is_binary(test_sh: str, want: Reporting):
    task = base_task().model_copy(update={"verifier": {"test.sh": test_sh.encode()}})
    assert verifier_reporting(task) == want
    assert with_reporting(task).binary_verifier is (want == Reporting.REWARD_ONLY)


def test_blend_never_lifts_a_critical_dimension_over_its_minimum():
    assert blend(1.0, 0.0, 0.5, 0.5) == 0.0  # the LLM's own score is under the minimum
    assert blend(0.4, 1.0, 0.5, 0.5) == 0.4  # so is the executable judge's
    assert blend(0.9, 0.7, 0.5, 0.5) == pytest.approx(0.8)
    assert blend(1.0, None, 0.5, 0.5) == 1.0


def test_findings_round_trip_as_rows_and_are_never_parsed():
    f = Finding(code=Code.HIDDEN_REQUIREMENT, source=Source.TRIAL, item="a: b [c]", evidence="x: y")
    assert Finding.from_row(f.row()) == f
    assert f.defect and not Finding(code=Code.LITERAL_STATED).defect
    assert f.text().startswith("hidden_requirement[trial] 'a: b [c]'")


def test_a_cached_answer_is_a_shortcut_whether_or_not_solve_sh_spells_it():
    """The attack: solve.sh copies the answer from a cache no one declared (`cp
    /var/lib/app/a.cache /app/o/count.txt`): the output is unchanged under every
    perturbation, but solve.sh spells no value, so the spelled-values rule accepted it."""
    base = {"/app/o/count.txt": "h1"}
    same = {m: {"/app/o/count.txt": "h1"} for m in ("delete", "shift-digits", "drop-lines")}
    texts = {"/app/o/count.txt": "317\n"}
    inputs = {"/app/data/in.log": "x 1\ny 2\n"}
    sol = "cp /var/lib/app/a.cache /app/o/count.txt"
    args = (base, same, texts, sol, "Count the records.", inputs, ["317"])
    before = shortcut_findings(*args, False)
    assert {f.code for f in before} == {Code.INPUTS_PERTURBED}  # accepted without a trace
    traced = shortcut_findings(*args, False, {"/var/lib/app/a.cache": "317\n"})
    assert [f.code for f in traced] == [Code.SOLUTION_SHORTCUT]
    assert "/var/lib/app/a.cache" in traced[0].evidence
    # a file read that does not hold the output is no cache
    other = shortcut_findings(*args, False, {"/app/lib/helpers.py": "def f(): pass\n"})
    assert {f.code for f in other} == {Code.INPUTS_PERTURBED}
    # that the verifier expects the outputs to follow the inputs is task-wide: alone (no
    # trace, nothing spelled) it names no output (it flagged a clean one that survives the
    # perturbations legitimately)
    tracked = shortcut_findings(*args, True)
    assert {f.code for f in tracked} == {Code.INPUTS_PERTURBED}


def test_an_authored_script_is_no_shortcut():
    """A solution that writes a script (or unit file) from a heredoc: the file is the same
    whatever the inputs, and the verifier checks its content, but its constants are the
    author's work: no shortcut (the false reject the recall run found)."""
    script = "#!/bin/bash\nset -e\nawk '{s+=$3} END{print s}' /app/data/in.log > /app/o/total.txt\n"
    sol = f"cat > /app/bin/report.sh <<'EOF'\n{script}EOF\nchmod +x /app/bin/report.sh\n"
    base = {"/app/bin/report.sh": "h1"}
    same = {m: {"/app/bin/report.sh": "h1"} for m in ("delete", "shift-digits", "rot13-words")}
    texts = {"/app/bin/report.sh": script}
    inputs = {"/app/data/in.log": "x 1 300\ny 2 400\n"}
    for tracks in (False, True):
        found = shortcut_findings(
            base, same, texts, sol, "Write report.sh.", inputs, ["awk", "/app/o/total.txt"], tracks
        )
        assert {f.code for f in found} == {Code.INPUTS_PERTURBED}, found
    # the same content as a data file is still a spelled answer
    data = {"/app/o/total.txt": "4129\n"}
    sol2 = "cat > /app/o/total.txt <<'EOF'\n4129\nEOF\n"
    found = shortcut_findings(
        {"/app/o/total.txt": "h"}, {m: {"/app/o/total.txt": "h"} for m in same}, data, sol2,
        "Sum the values.", inputs, ["4129"], False,
    )  # fmt: skip
    assert [f.code for f in found] == [Code.SOLUTION_SHORTCUT]


def test_traced_reads_parse_strace_and_leave_the_system_out():
    trace = "\n".join(
        [
            '12 openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3</etc/ld.so.cache>',
            '12 openat(AT_FDCWD, "data/in.log", O_RDONLY) = 3</app/data/in.log>',
            '13 openat(AT_FDCWD, "/var/lib/app/a.cache", O_RDONLY) = 4</var/lib/app/a.cache>',
            '13 openat(AT_FDCWD, "/app/o", O_RDONLY|O_DIRECTORY) = 5</app/o>',
            '13 openat(AT_FDCWD, "/app/o/c.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 1</app/o/c.txt>',
            '14 openat(AT_FDCWD, "/usr/lib/python3/x.py", O_RDONLY) = 3</usr/lib/python3/x.py>',
            '14 openat(AT_FDCWD, "/app/o/tmp", O_RDWR) = 3</app/o/tmp>',
        ]
    )
    reads = traced_reads(trace)
    assert reads[:3] == ["/etc/ld.so.cache", "/app/data/in.log", "/var/lib/app/a.cache"]
    assert "/app/o" not in reads and "/app/o/c.txt" not in reads
    assert undeclared_reads(reads, {"/app/o/tmp"}) == ["/app/data/in.log", "/var/lib/app/a.cache"]


def test_the_order_library_reverses_readdir_on_every_open(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from audit.trials import host_readdir_shim

    lib = host_readdir_shim()
    if lib is None:
        pytest.skip("no C compiler on this host")
    (tmp_path / "lib.so").write_bytes(lib)
    d = tmp_path / "d"
    d.mkdir()
    for n in ("a", "bb", "c", "dd", "e"):
        (d / n).touch()
    code = f"import os, json; print(json.dumps([os.listdir({str(d)!r}) for _ in range(2)]))"
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    env = {**os.environ, "LD_PRELOAD": str(tmp_path / "lib.so")}
    shim = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    first = json.loads(plain.stdout)[0]
    assert shim.stderr == "" and json.loads(shim.stdout) == [first[::-1]] * 2


def test_the_order_condition_is_applied_only_where_some_order_changed():
    """Reversed readdir or a moved listing apply the order rerun; neither is a skip."""
    assert moved_dirs("moved /app\nmoved /app/sub\nnoise\n") == 2
    assert order_applied(["/app"], 0, True, "readdir reversed")[0]
    assert order_applied(["/app"], 2, False, "no C compiler")[0]
    applied, detail = order_applied(["/app"], 0, False, "no C compiler")
    assert not applied and "unchanged" in detail and "no C compiler" in detail


def test_only_outputs_written_unchanged_show_that_the_verifier_follows_the_inputs():
    # a public task's solution failed on inputs with words rot13'd (its header no longer
    # parsed) and wrote nothing: the verifier's failure there said nothing of what it
    # expects, yet it made a data word solve.sh names as a default a "spelled answer"
    base = {"/o": "h1"}
    crashed = [("rot13-words", {"/o": None}, False), ("shift-digits", {"/o": None}, False)]
    assert not verifier_tracks_inputs(base, crashed)
    kept = [("drop-lines", {"/o": "h1"}, True)]
    assert not verifier_tracks_inputs(base, crashed + kept)
    rejected = [("drop-lines", {"/o": "h1"}, False)]
    assert verifier_tracks_inputs(base, crashed + rejected)
    assert not verifier_tracks_inputs(base, [("delete", {"/o": "h1"}, False)])  # not content
