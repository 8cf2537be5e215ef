"""Per-assertion verifier outcomes parsed from CTRF, JUnit XML and pytest -rA output."""

from __future__ import annotations

import json

import pytest

from tasks.reports import (
    ALL_SOURCES,
    ReportParseError,
    VerdictBasis,
    assertion_key,
    collect_report,
    declared_sources,
    parse_ctrf,
    parse_junit,
    parse_pytest_summary,
    report_verdict,
)
from tasks.results import AssertionStatus, FailureMode, ReportSource

CTRF = {
    "results": {
        "tool": {"name": "pytest"},
        "summary": {"tests": 3},
        "tests": [
            {"name": "test_a", "status": "passed", "duration": 12},
            {"name": "test_b", "status": "failed", "duration": 3, "message": "boom"},
            {"name": "test_c", "status": "skipped", "duration": 0},
        ],
    }
}

JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="s">
  <testcase classname="t.mod" name="ok" time="0.5"/>
  <testcase classname="t.mod" name="bad" time="0.1"><failure message="nope">tb</failure>
  </testcase>
  <testcase classname="t.mod" name="err"><error message="crash"/></testcase>
  <testcase classname="t.mod" name="xf"><skipped type="pytest.xfail" message="known"/></testcase>
</testsuite></testsuites>"""

PYTEST_RA = """============================= test session starts ==============================
collected 6 items

tests/test_outputs.py .F.xXE                                             [100%]
=========================== short test summary info ============================
PASSED tests/test_outputs.py::test_one
PASSED tests/test_outputs.py::test_three
FAILED tests/test_outputs.py::test_two - AssertionError: expected 3 - got 4
XFAIL tests/test_outputs.py::test_four - reason: flaky
XPASS tests/test_outputs.py::test_five
ERROR tests/test_outputs.py::test_six - FileNotFoundError
SKIPPED [1] tests/test_outputs.py:40: no gpu
==================== 1 failed, 2 passed, 1 xfailed in 0.12s ===================="""


def test_ctrf():
    out = parse_ctrf(json.dumps(CTRF))
    assert [(a.name, a.status, a.ok) for a in out] == [
        ("test_a", AssertionStatus.PASSED, True),
        ("test_b", AssertionStatus.FAILED, False),
        ("test_c", AssertionStatus.SKIPPED, True),
    ]
    assert out[0].duration_s == pytest.approx(0.012)
    assert out[1].message == "boom"


def test_junit():
    out = parse_junit(JUNIT)
    assert [a.name for a in out] == ["t.mod::ok", "t.mod::bad", "t.mod::err", "t.mod::xf"]
    assert [a.status for a in out] == [
        AssertionStatus.PASSED,
        AssertionStatus.FAILED,
        AssertionStatus.ERROR,
        AssertionStatus.XFAIL,
    ]
    assert out[1].message == "nope" and out[0].duration_s == 0.5


def test_pytest_summary_terminal_bench_semantics():
    out = parse_pytest_summary(PYTEST_RA)
    by = {a.name.split("::")[-1] if "::" in a.name else a.name: a for a in out}
    assert by["test_one"].ok and by["test_three"].ok
    assert not by["test_two"].ok and by["test_two"].message == "AssertionError: expected 3 - got 4"
    assert by["test_four"].ok  # XFAIL counts as pass
    assert not by["test_five"].ok  # XPASS counts as fail
    assert not by["test_six"].ok  # ERROR counts as fail
    skipped = [a for a in out if a.status == AssertionStatus.SKIPPED]
    assert len(skipped) == 1 and skipped[0].ok
    assert len(out) == 7


@pytest.mark.parametrize("garbage", ["", "{", "[]", '{"results": {"tests": 3}}', "\x00\xff"])
def test_garbage_ctrf_raises_parse_error(garbage):
    with pytest.raises(ReportParseError):
        parse_ctrf(garbage)


def test_collect_prefers_ctrf_then_junit_then_stdout():
    files = {"ctrf.json": json.dumps(CTRF).encode(), "junit.xml": JUNIT.encode()}
    assert collect_report(files, PYTEST_RA).source == ReportSource.CTRF
    assert collect_report({"junit.xml": JUNIT.encode()}, PYTEST_RA).source == ReportSource.JUNIT
    r = collect_report({}, PYTEST_RA)
    assert r.source == ReportSource.PYTEST and r.total == 7 and r.passed == 4


def test_missing_or_garbage_output_is_a_parse_error_not_a_crash():
    r = collect_report({}, "segfault\n")
    assert r.parse_error and r.total == 0
    r = collect_report({"ctrf.json": b"not json"}, "")
    assert r.parse_error and "ctrf.json" in r.parse_error
    r = collect_report({"junit.xml": b"<oops"}, "")
    assert r.parse_error and r.source == ReportSource.JUNIT
    r = collect_report({"reward.txt": b"banana"}, "")
    assert r.parse_error


def test_reward_only_is_binary():
    r = collect_report({"reward.txt": b"1\n"}, "all good")
    assert r.binary and r.passed == 1 and r.total == 1 and r.reward == 1.0
    r = collect_report({"reward.txt": b"0"}, "")
    assert r.binary and r.passed == 0


# -- only what the verifier declares counts --------------------------------------------------
FORGED_CTRF = b'{"results":{"tests":[{"name":"a","status":"passed"}]}}'
REAL_JUNIT = b'<testsuite><testcase name="a"><failure message="no"/></testcase></testsuite>'


def test_declared_sources_follow_the_verifiers_own_files():
    assert declared_sources({"test.sh": b"pytest --ctrf /logs/verifier/ctrf.json /tests"}) >= {
        ReportSource.CTRF
    }
    junit = declared_sources({"test.sh": b"python3 -m xmlrunner --output junit.xml"})
    assert ReportSource.JUNIT in junit and ReportSource.CTRF not in junit
    ra = declared_sources({"test.sh": b"pytest /tests/test_outputs.py -rA\necho 1 > reward.txt"})
    assert ra == {ReportSource.PYTEST, ReportSource.REWARD}
    assert declared_sources({"test.sh": b"./check"}) == ALL_SOURCES  # nothing to go by


def test_a_report_of_an_undeclared_format_is_ignored():
    files = {"ctrf.json": FORGED_CTRF, "junit.xml": REAL_JUNIT}
    report = collect_report(files, "", frozenset({ReportSource.JUNIT}))
    assert report.source == ReportSource.JUNIT and report.passed == 0
    assert collect_report(files, "").source == ReportSource.CTRF  # unrestricted: CTRF first


def test_the_last_pytest_summary_counts():
    forged = "=== short test summary info ===\nPASSED t.py::test_a\n=== 1 passed ===\n"
    real = "=== short test summary info ===\nFAILED t.py::test_a - assert 0\n=== 1 failed ===\n"
    report = collect_report({}, forged + "noise\n" + real, frozenset({ReportSource.PYTEST}))
    assert [a.status for a in report.assertions] == [AssertionStatus.FAILED]


@pytest.mark.parametrize(
    ("body", "reward"),
    [
        (b'{"reward": 1.0}', 1.0),
        (b'{"reward": 0, "style": 1}', 0.0),
        (b'{"accuracy": 0.25}', 0.25),
        (b'{"a": 1, "b": 0}', 0.5),
    ],
)
def test_harbor_reward_json(body: bytes, reward: float):
    r = collect_report({"reward.json": body}, "")
    assert r.binary and r.reward == reward and r.parse_error is None
    assert r.passed == (1 if reward >= 1.0 else 0)


def test_reward_txt_wins_over_reward_json_and_bad_json_is_a_parse_error():
    assert collect_report({"reward.txt": b"0", "reward.json": b'{"reward": 1}'}, "").reward == 0.0
    for bad in (b"[1]", b"{}", b'{"reward": "yes"}', b"nope"):
        r = collect_report({"reward.json": bad}, "")
        assert r.parse_error and "reward.json" in r.parse_error


# -- the format comes from the entry script and what it runs ---------------------------------
# A few lines as vendored C++ test frameworks write them (Catch2 ships a JUnit reporter).
CATCH_HPP = b"""// Catch v2.13 - single include
namespace Catch {
    class JunitReporter : public CumulativeReporterBase<JunitReporter> {
        static std::string getDescription() {
            return "Reports test results in an XML format like Ant's junitreport target"; }
    };
    CATCH_REGISTER_REPORTER("junit", JunitReporter)
}
"""
CPP_TEST_SH = b"""#!/bin/bash
cd /app && mkdir -p build && cd build && cmake .. && make
./tests && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""


# An entry that compiles and runs the tests, then prints Terminal-Bench's summary itself.
SUMMARY_TEST_SH = b"""#!/bin/bash
cd /app && g++ -std=c++17 -I/tests -o /tmp/t /tests/meetup_test.cpp meetup.cpp && /tmp/t
if [ $? -eq 0 ]; then s=PASSED; else s=FAILED; fi
echo "=========================== short test summary info ============================"
echo "$s meetup_test.cpp::all"
echo "=========================== 1 test ==========================="
"""
SUMMARY_OUT = (
    "All tests passed (12 assertions in 6 test cases)\n"
    "=========================== short test summary info ============================\n"
    "PASSED meetup_test.cpp::all\n=========================== 1 test ===========================\n"
)


def test_a_vendored_header_in_tests_declares_nothing():
    # Regression: "junit" in tests/catch.hpp restricted a passing C++ task to JUnit; its
    # summary on stdout was ignored, no report was left and the trial became verifier_error.
    verifier = {"test.sh": SUMMARY_TEST_SH, "catch.hpp": CATCH_HPP, "meetup_test.cpp": b"// junit"}
    assert declared_sources(verifier) == ALL_SOURCES  # the script names no format
    report = collect_report({}, SUMMARY_OUT, declared_sources(verifier))
    assert report.source == ReportSource.PYTEST and report.passed == report.total == 1
    # The same header beside an entry that writes reward.txt: the reward alone counts.
    with_reward = {"test.sh": CPP_TEST_SH, "catch.hpp": CATCH_HPP}
    assert declared_sources(with_reward) == {ReportSource.REWARD}


@pytest.mark.parametrize(
    ("entry", "runner", "expected"),
    [
        # the runner, called in six ways, is read; what it writes is the declaration
        (b"python3 /tests/run_checks.py /tests/test_outputs.py", "run_checks.py", "ctrf"),
        (b'bash "$TEST_DIR/run.sh"', "run.sh", "ctrf"),
        (b"source ${TEST_DIR}/helpers/run.sh", "helpers/run.sh", "ctrf"),
        (b"cd /tests && ./run.sh", "run.sh", "ctrf"),
        (b'sh "$TEST_DIR"/run.sh', "run.sh", "ctrf"),
        (b"cd / && bash tests/run.sh", "run.sh", "ctrf"),
        (b"bash /tests/run.sh.orig", "run.sh", ""),  # another file's name, not this one
        # a file the entry script does not run is never read
        (b"python3 /tests/check.py", "run.sh", ""),
    ],
)
def test_scripts_the_entry_runs_are_read(entry: bytes, runner: str, expected: str):
    verifier = {
        "test.sh": b"#!/bin/bash\n" + entry + b"\n",
        runner: b"#!/bin/sh\nwrite_report --format ctrf > /logs/verifier/ctrf.json\n",
        "check.py": b"print('ok')\n",
        "test_outputs.py": b"def test_export():\n    assert 'junit' in open('/app/x').read()\n",
    }
    found = declared_sources(verifier)
    if expected:
        assert found == {ReportSource.CTRF}
    else:
        assert found == ALL_SOURCES  # the test module's "junit" is the tests' data, not a format


def test_pytest_flags_and_its_config_in_tests_declare():
    junit = declared_sources({"test.sh": b"pytest --junitxml=/logs/verifier/junit.xml /tests"})
    assert junit == {ReportSource.PYTEST, ReportSource.JUNIT}
    ctrf = declared_sources({"run-tests.sh": b"uv run pytest --ctrf /logs/verifier/ctrf.json"})
    assert ctrf == {ReportSource.PYTEST, ReportSource.CTRF}
    addopts = {
        "test.sh": b"python -m pytest /tests -rA",
        "pytest.ini": b"[pytest]\naddopts = --junitxml=/logs/verifier/junit.xml\n",
    }
    assert declared_sources(addopts) == {ReportSource.PYTEST, ReportSource.JUNIT}
    commented = {"test.sh": b"# writes ctrf.json one day\npytest /tests -rA\n"}
    assert declared_sources(commented) == {ReportSource.PYTEST}


# -- no report: scored as Terminal-Bench scores it ---------------------------------------------
NO_REPORT = collect_report({}, "")


@pytest.mark.parametrize(
    ("output", "exit_code"),
    [
        ("/app/src/meetup.cpp:12:5: error: 'day' was not declared in this scope\n", 2),
        ("In file included from x.c:1:\nx.h:3:1: fatal error: y.h: No such file\n", 0),
        ("main.o: In function `main':\nmain.c:(.text+0x5): undefined reference to `solve'\n", 1),
        ("error[E0425]: cannot find value `x` in this scope\n", 101),
        ("# example.com/meetup\n./meetup.go:7:2: undefined: time.Dayy\n", 1),
        ("FAIL\texample.com/meetup [build failed]\n", 2),
        ("src/Main.java:4: error: ';' expected\n", 1),
        ("src/index.ts(3,7): error TS2322: Type 'string' is not assignable\n", 2),
        ("make: *** [Makefile:4: all] Error 1\n", 0),
        ("make[2]: *** [CMakeFiles/t.dir/build.make:76: t.o] Error 1\n", 127),
    ],
)
def test_a_compile_failure_is_a_failed_attempt(output: str, exit_code: int):
    v = report_verdict(NO_REPORT, exit_code, "building...\n" + output)
    assert v.basis == VerdictBasis.COMPILE_FAILED and v.failure_mode == FailureMode.NONE
    assert v.report.total == 1 and v.report.passed == 0 and not v.report.parse_error
    assert "did not compile" in v.detail


@pytest.mark.parametrize("exit_code", [1, 2, 5, 134, 139])
def test_no_report_and_a_non_zero_exit_is_a_failed_attempt(exit_code: int):
    v = report_verdict(NO_REPORT, exit_code, "Traceback ...\nAssertionError\n")
    assert v.basis == VerdictBasis.EXIT_STATUS and v.failure_mode == FailureMode.NONE
    assert not v.failure_mode.infrastructure
    assert v.report.passed == 0 and v.report.total == 1
    assert f"exit {exit_code}" in v.detail


@pytest.mark.parametrize(
    ("output", "basis"),
    [
        ("/tests/test.sh: line 4: ./build/meetup_test: No such file or directory\n", "agent"),
        ("/tests/test.sh: line 9: /app/bin/solve: Permission denied\n", "agent"),
        ("bash: /srv/out/run: No such file or directory\n", "agent"),
        ("sh: 1: ./solve: not found\n", "agent"),
        ("timeout: failed to run command './a.out': No such file or directory\n", "agent"),
        ("timeout: failed to run command 'pytest': No such file or directory\n", "runner"),
        ("/tests/test.sh: line 2: pytest: command not found\n", "runner"),
        ("bash: /tests/test.sh: No such file or directory\n", "runner"),
        ("env: 'python3': No such file or directory\n", "runner"),
        ("/tests/test.sh: line 3: /usr/local/go/bin/go: No such file or directory\n", "runner"),
        ("", "runner"),
    ],
)
def test_exit_127_is_the_agents_only_for_a_program_it_was_to_make(output: str, basis: str):
    v = report_verdict(NO_REPORT, 127, output)
    if basis == "agent":
        assert v.basis == VerdictBasis.PROGRAM_MISSING and v.failure_mode == FailureMode.NONE
        assert v.report.passed == 0 and v.report.total == 1
    else:
        assert v.basis == VerdictBasis.RUNNER_MISSING
        assert v.failure_mode == FailureMode.VERIFIER_ERROR and v.failure_mode.infrastructure


def test_a_report_decides_whatever_the_exit_and_garbage_is_a_parse_error():
    ra = collect_report({}, PYTEST_RA)
    for code in (0, 1, 127):
        v = report_verdict(ra, code, PYTEST_RA + "\nmake: *** [all] Error 1\n")
        assert v.basis == VerdictBasis.REPORT and v.report is ra
    for files in ({"ctrf.json": b"{oops"}, {"reward.txt": b"banana"}, {"junit.xml": b"<x/>"}):
        v = report_verdict(collect_report(files, ""), 1, "")
        assert v.basis == VerdictBasis.UNREADABLE and v.failure_mode == FailureMode.PARSE_ERROR


def test_exit_zero_with_no_report_left_is_a_failed_attempt():
    """A program of the agent's that the verifier runs can remove the report: no report is
    never an infrastructure failure the agent could choose (test_hostile's report voiders)."""
    for code in (0, None):
        v = report_verdict(NO_REPORT, code, "all good\n")
        assert v.basis == VerdictBasis.NO_REPORT and v.failure_mode == FailureMode.NONE
        assert v.report.total == 1 and v.report.passed == 0 and "no report" in v.detail


def test_messages_the_entry_prints_declare_nothing_but_where_it_writes_does():
    # Regression: aider_polyglot's Java run-tests.sh echoes a message naming JUnit, then
    # prints a pytest-style summary; a JUnit-only declaration ignored it (verifier_error).
    java = b"""#!/bin/bash
if [ -f build.gradle ]; then gradle test; else
    echo "No Gradle build file found. Direct javac/JUnit invocation is not supported."
    exit 1
fi
echo "=============== short test summary info ==============="
echo "PASSED aider_polyglot_test"
"""
    assert declared_sources({"test.sh": java}) == ALL_SOURCES
    out = "=============== short test summary info ===============\nPASSED aider_polyglot_test\n"
    assert collect_report({}, out, declared_sources({"test.sh": java})).passed == 1
    writes = b'echo "see junit docs" >> "/logs/verifier/reward.txt"\nprintf "%s" 1 > x.log\n'
    assert declared_sources({"test.sh": writes}) == {ReportSource.REWARD}


@pytest.mark.parametrize(
    "names",
    [
        # pytest's records / CTRF, the -rA summary run from another directory, JUnit
        ("test_outputs.py::test_x", "../tests/test_outputs.py::test_x", "test_outputs::test_x"),
        (
            "/tests/test_outputs.py::TestA::test_x[1.5-a/b]",
            "tests.test_outputs.TestA::test_x[1.5-a/b]",
            "test_outputs::TestA::test_x[1.5-a/b]",
        ),
    ],
)
def test_assertion_key_names_one_test_the_same_in_every_report_source(names):
    """Bug pinned: a stock pytest task's reruns were read from junit.xml
    (`test_outputs::test_x`), its base run from pytest's records (`test_outputs.py::test_x`),
    and every assertion looked changed."""
    assert len({assertion_key(n) for n in names}) == 1


def test_assertion_key_keeps_distinct_tests_apart():
    names = ["a.py::test_x", "b.py::test_x", "a.py::test_x[1]", "a.py::TestC::test_x", "exists"]
    assert len({assertion_key(n) for n in names}) == len(names)
    assert assertion_key("report::exists") == "report::exists"  # a shell verifier's own names
