"""The pure pieces of the evidence by behaviour (audit.behaviour, audit.traces, the static
race check): traces parsed from strace's own output, other well-formed answers, outputs the
image ships, files the verifier opens, network use. The trials that feed them are pinned in
test_behaviour_forms.py (one small task per class)."""

from __future__ import annotations

from audit.behaviour import (
    answer_swaps,
    derivable,
    free_reward_findings,
    lost_on_other_inputs,
    network_findings,
    network_use,
    other_inputs_findings,
    runtime_hidden,
    stale_outputs,
    swap_findings,
    worked_for_findings,
)
from audit.judge_exec import retry_timeouts
from audit.perturbation import keeps_form, reverse_records
from audit.static_checks import races, under_named_dir
from audit.traces import checked_files, parse_trace
from audit.variants import flaky_findings
from audit.verdict import Code
from tasks.model import EnvironmentSpec
from tasks.results import AssertionResult, AssertionStatus, FailureMode, TrialResult
from tests.factories import make_task

# strace -f -y -s 512 output, as the shipped strace writes it (abridged)
TRACE = "\n".join(
    [
        '100 execve("/usr/bin/bash", ["bash", "/tests/test.sh"], 0x7ffd /* 9 vars */) = 0',
        "100 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD) = 101",
        '101 execve("/usr/bin/python3", ["python3", "-m", "pytest", "/tests/t.py"], 0x5 /* 9 '
        "vars */) = 0",
        '101 openat(AT_FDCWD</app>, "/tests/t.py", O_RDONLY|O_CLOEXEC) = 3</tests/t.py>',
        '101 newfstatat(AT_FDCWD</app>, "reports/202403-levels.txt", {st_mode=S_IFREG|0644, '
        "st_size=40, ...}, 0) = 0",
        '101 openat(AT_FDCWD</app>, "/app/reports/202403-levels.txt", O_RDONLY|O_CLOEXEC) = '
        "3</app/reports/202403-levels.txt>",
        '101 newfstatat(AT_FDCWD</app>, "/app/reports", {st_mode=S_IFDIR|0755, ...}, 0) = 0',
        '101 openat(AT_FDCWD</app>, "/app/home", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = '
        "4</app/home>",
        '101 openat(AT_FDCWD</app>, "/app/home/alice.txt", O_RDONLY) = 4</app/home/alice.txt>',
        '101 openat(AT_FDCWD</app>, "/app/missing.txt", O_RDONLY) = -1 ENOENT (No such file or '
        "directory)",
        '101 openat(AT_FDCWD</app>, "/logs/verifier/reward.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) '
        "= 5</logs/verifier/reward.txt>",
        "101 connect(6<socket:[1]>, {sa_family=AF_INET, sin_port=htons(53), "
        'sin_addr=inet_addr("10.0.2.3")}, 16) = -1 ENETUNREACH (Network is unreachable)',
        "101 connect(7<socket:[2]>, {sa_family=AF_INET, sin_port=htons(8000), "
        'sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
        "101 clone(child_stack=NULL, flags=SIGCHLD) = 102",
        '102 execve("/usr/bin/python3", ["python3", "/app/tool.py"], 0x5 /* 9 vars */) = 0',
        '102 openat(AT_FDCWD</app>, "/app/tool.cfg", O_RDONLY) = 3</app/tool.cfg>',
        "100 clone(child_stack=NULL, flags=SIGCHLD) = 103",
        '103 execve("/usr/bin/pip", ["pip", "install", "pytest"], 0x5 /* 9 vars */) = 0',
        "103 connect(3<socket:[3]>, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo="
        'htonl(0), inet_pton(AF_INET6, "2a04::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
    ]
)


def _result(ok: list[bool], names: list[str] | None = None) -> TrialResult:
    status = {True: AssertionStatus.PASSED, False: AssertionStatus.FAILED}
    names = names or [f"t.py::test_{i}" for i in range(len(ok))]
    r = TrialResult(trial_id="x", task_id="t", task_hash="h", agent="a", backend="local")
    r.report.assertions = [
        AssertionResult(name=n, status=status[o]) for n, o in zip(names, ok, strict=True)
    ]
    return r


def test_a_trace_says_which_files_a_verifier_checked_and_where_it_connected():
    t = parse_trace(TRACE)
    checked = checked_files(t, programs={"/app/tool.py"})
    # a relative stat resolved against the cwd; the failed open, the directory, the report it
    # writes, the file found by listing its directory and the agent's program's reads are out
    assert checked == ["/app/reports/202403-levels.txt"]
    assert t.network() == ["AF_INET 10.0.2.3:53", "AF_INET6 2a04::1:443"]
    assert network_use(t) == ["AF_INET 10.0.2.3:53"]  # pip's own connection is an install


def test_first_opens_tell_an_edit_from_an_overwrite():
    t = parse_trace(
        '1 openat(AT_FDCWD</app>, "/app/a.ini", O_RDONLY) = 3</app/a.ini>\n'
        '1 openat(AT_FDCWD</app>, "/app/a.ini", O_WRONLY|O_TRUNC) = 3</app/a.ini>\n'
        '1 openat(AT_FDCWD</app>, "/app/out.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3'
        "</app/out.txt>\n"
        '1 openat(AT_FDCWD</app>, "/app/out.txt", O_RDONLY) = 3</app/out.txt>\n'
        # GNU tar writes its archive with creat(2), which has no flags to read; another
        # process (gzip) interrupts the call, so strace splits it over two lines
        '2 creat("dist/a.tar.gz", 0666 <unfinished ...>\n'
        '3 execve("/usr/bin/gzip", ["gzip"], 0x1 /* 1 vars */) = 0\n'
        "2 <... creat resumed>)    = 3</app/dist/a.tar.gz>\n"
    )
    first = t.first_opens()
    assert first == {"/app/a.ini": "read", "/app/out.txt": "write", "/app/dist/a.tar.gz": "write"}
    git = "/app/repo/.git/COMMIT_EDITMSG"  # git's own state, rewritten unread by a commit
    first[git] = "write"
    made = ["/app/a.ini", "/app/out.txt", "/app/new.txt", git]
    assert stale_outputs(made, {"/app/a.ini", "/app/out.txt", git}, first) == ["/app/out.txt"]
    # a repository's work tree, rewritten unread by a checkout, is its state too
    tracked = "/app/repo/README.md"
    first[tracked] = "write"
    given = {"/app/a.ini", "/app/out.txt", git, tracked}
    assert stale_outputs([*made, tracked], given, first) == ["/app/out.txt"]


def test_free_reward_is_what_the_shipped_outputs_alone_earn():
    nop = _result([True, True, False])
    without = _result([True, False, False])  # a guard still passes; the shipped output's not
    found = free_reward_findings(nop, without, ["/app/out/result.txt"])
    assert [f.code for f in found] == [Code.FREE_REWARD]
    assert "1/3" in found[0].evidence and "test_1" in found[0].evidence
    assert free_reward_findings(nop, nop, ["/app/out/result.txt"]) == []


def test_free_reward_is_also_what_the_shipped_data_already_did():
    # test_0: the work the shipped data had done (fails on other data, the solution passes);
    # test_1: a guard that holds on any data; test_2: a value to keep (the solution, keeping
    # the other value, fails it too); test_3: the nop never passes it
    nop = _result([True, True, True, False])
    idle = _result([False, True, False, False])
    solved = _result([True, True, False, True])
    found = worked_for_findings(nop, [("shift-digits", idle, solved)])
    assert [f.code for f in found] == [Code.FREE_REWARD] and found[0].item == "t.py::test_0"
    assert "1/4" in found[0].evidence and "shift-digits" in found[0].evidence
    assert worked_for_findings(nop, [("shift-digits", nop, solved)]) == []  # a guard, all
    assert worked_for_findings(nop, [("rot13-words", idle, idle)]) == []  # the solution fails
    assert worked_for_findings(_result([False] * 4), [("shift-digits", idle, solved)]) == []


def _failing(messages: list[str | None], exit_code: int | None = 0) -> TrialResult:
    """A run whose assertion i passes (None) or fails with messages[i]."""
    r = _result([m is None for m in messages])
    r.agent_exit_code = exit_code
    for a, m in zip(r.report.assertions, messages, strict=True):
        a.message = m or ""
    return r


def test_a_solution_that_misses_what_other_records_ask_for_is_a_shortcut():
    # test_0 checks work (the nop fails it); test_1 is a guard the nop passes; test_2 the
    # solution passes on the shipped inputs only through its picked lines
    oracle, nop = _result([True, True, True]), _result([False, True, False])
    solved = _failing([None, "guard: input changed", "got [l1, l3] != want [l1, l2]"])
    base, other = {"/app/out.csv": "h1", "/app/log": None}, {"/app/out.csv": "h2"}
    lost = lost_on_other_inputs("reverse-records", oracle, nop, solved, base, other)
    assert lost is not None and list(lost.assertions) == ["t.py::test_2"]
    # the shipped answer fails it there too, with another message: the expectation moved
    shipped = _failing([None, "guard: input changed", "got [l1, l2, l4] != want [l1, l2]"])
    found = other_inputs_findings([(lost, shipped)])
    assert [(f.code, f.item) for f in found] == [(Code.SOLUTION_SHORTCUT, "/app/out.csv")]
    assert "reverse-records" in found[0].evidence and "test_2" in found[0].evidence
    # no evidence: a fixed expectation (the shipped answer passes), a verifier that fails
    # whatever the answer (the same message: a record another refers to was dropped)
    assert other_inputs_findings([(lost, _failing([None, "x", None]))]) == []
    crash = _failing([None, "x", "got [l1, l3] != want [l1, l2]"])
    assert other_inputs_findings([(lost, crash)]) == []
    # no loss measured: the solution stopped on the inputs, wrote nothing new, lost only
    # a guard, or kept its output (an unchanged output is the older shortcut evidence's)
    assert (
        lost_on_other_inputs(
            "reverse-records", oracle, nop, _failing([None, "g", "w"], 1), base, other
        )
        is None
    )
    assert (
        lost_on_other_inputs("reverse-records", oracle, nop, solved, base, {"/app/out.csv": None})
        is None
    )
    assert (
        lost_on_other_inputs(
            "reverse-records", oracle, nop, _failing([None, "g", None]), base, other
        )
        is None
    )
    assert (
        lost_on_other_inputs("reverse-records", oracle, nop, solved, base, {"/app/out.csv": "h1"})
        is None
    )


def test_other_records_keep_the_header_and_a_json_document_is_checked_for_its_form():
    rows = "id,v\n1,a\n2,b\n3,c"
    assert reverse_records(rows) == "id,v\n3,c\n2,b\n1,a\n"  # every record kept
    assert keeps_form(rows, reverse_records(rows))
    doc = '{\n "a": [\n  1,\n  2\n ]\n}\n'
    assert not keeps_form(doc, reverse_records(doc))
    lines = '{"a": 1}\n{"a": 2}\n{"a": 3}\n'  # JSON lines: each record still parses
    assert keeps_form(lines, reverse_records(lines))


def test_other_answers_are_the_outputs_a_perturbation_changed():
    oracle = {"/app/s.json": '{"n": 3}', "/app/log.txt": "ok"}
    perturbed = {
        "shift-digits": {"/app/s.json": '{"n": 4}', "/app/log.txt": "ok"},
        "drop-lines": {"/app/s.json": '{"n": 3}'},  # unchanged: no other answer
        "rot13-words": {"/app/s.json": ""},  # empty: not well-formed
    }
    swaps = answer_swaps(oracle, perturbed, ["/app/s.json", "/app/log.txt"])
    assert swaps == {"shift-digits": {"/app/s.json": '{"n": 4}'}}
    passed, failed = _result([True, True]), _result([True, False])
    codes = [f.code for f in swap_findings([("a", swaps["shift-digits"], passed),
                                             ("b", swaps["shift-digits"], failed)])]  # fmt: skip
    assert codes == [Code.WEAK_VERIFIER, Code.MUTANT_KILLED]


def test_a_file_the_verifier_opens_is_hidden_only_when_no_agent_could_name_it():
    env = EnvironmentSpec(files={"app/users.txt": b"alice\nbob\n"})
    task = make_task("h", environment=env).model_copy(
        update={"instruction": "Write one file per user into `/app/home/` and `/app/s.txt`."}
    )
    t = parse_trace(TRACE)
    made = ["/app/reports/202403-levels.txt", "/app/home/alice.txt", "/app/s.txt"]
    texts = {"app/users.txt": "alice\nbob\n"}
    found = runtime_hidden(t, task, made, set(), texts, verifier_text="")
    assert [f.item for f in found] == ["/app/reports/202403-levels.txt"]
    assert runtime_hidden(t, task, made, set(), texts, "202403-levels.txt") == []  # spelled
    stated = task.model_copy(update={"instruction": "Write `reports/202403-levels.txt`."})
    assert runtime_hidden(t, stated, made, set(), texts, "") == []


def test_network_use_of_the_verifier_is_flaky_and_of_the_solution_recorded():
    codes = [f.code for f in network_findings(["AF_INET 1.2.3.4:443"], ["AF_INET 5.6.7.8:80"])]
    assert codes == [Code.FLAKY_VERIFIER, Code.NETWORK_USE]
    assert network_findings([], []) == []


def test_races_are_background_jobs_never_waited_for_and_random_sleeps():
    racy = "#!/bin/bash\npython3 job.py > out.txt &\nhead -1 in > n.txt\nsleep 3\n"
    (where, why), *_ = races("solve.sh", racy)
    assert where == "solve.sh:2" and "line 4 sleeps" in why
    assert races("s", "cmd &\npid=$!\nwait $pid\n") == []
    assert races("s", "a 2>&1 && b &>/dev/null || c |& d\n") == []
    assert races("s", "[ $(( 0$perm & 04 )) -eq 0 ] && echo private\n(( m & 2 )) || x\n") == []
    assert races("s", "python3 - <<'EOF'\nx = a & b\nEOF\n") == []  # another language's `&`
    assert "random delay" in races("s", "sleep $((RANDOM % 3))\n")[0][1]


def test_files_of_a_directory_the_instruction_names_are_no_cache():
    """The shortcut rule deletes the undeclared files a solution read; the files of a named
    directory (`the logs in /workspace/logs/`) are the agent's data, named or not."""
    task = make_task("d").model_copy(
        update={"instruction": "Summarize the logs in `/workspace/logs/` and `text/`."}
    )
    assert under_named_dir("/workspace/logs/v1.log", task)
    assert under_named_dir("/app/text/a/b.txt", task)  # relative to the working directory
    assert not under_named_dir("/solution/cache.pkl.gz", task)
    assert not under_named_dir("/app/x.txt", task)  # the working directory itself names nothing


def test_a_name_the_instruction_gives_as_a_template_or_the_data_gives_is_derivable():
    env = EnvironmentSpec(files={"app/in/b.txt": b"x\n"})
    task = make_task("t", environment=env).model_copy(
        update={"instruction": "Write each count to `/app/out/<name>.count`."}
    )
    assert derivable("/app/out/zeta.count", task, {})  # the template
    assert derivable("/app/home/b.log", task, {"app/in/b.txt": "x\n"})  # a given file's stem
    assert not derivable("/app/out/zeta.total", task, {})
    assert not derivable("/app/reports/202403-levels.txt", task, {"app/in/b.txt": "x\n"})


def test_a_rerun_that_timed_out_is_retried_once_and_the_retry_counts():
    """Clean controls were called flaky on a machine at load 30-60: a condition rerun hit
    the verifier's timeout. A timeout the base run did not have is retried once."""
    base, ok = _result([True]), _result([True])
    slow = _result([])
    slow.failure_mode = FailureMode.VERIFIER_TIMEOUT
    calls = []

    def again():
        calls.append(1)
        return ok, True, "shifted"

    runs = [("clock", slow, True, "shifted"), ("locale", ok, True, "")]
    out = retry_timeouts(base, runs, {"clock": again, "locale": again}, workers=1)
    assert len(calls) == 1 and out[0][1] is ok and "retried once" in out[0][3]
    assert out[1] == runs[1]
    hung = retry_timeouts(base, runs, {"clock": lambda: (slow, True, "")}, workers=1)
    assert [f.code for f in flaky_findings(base, hung[:1])] == [Code.FLAKY_VERIFIER]
