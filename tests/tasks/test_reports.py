"""Per-assertion verifier outcomes parsed from CTRF, JUnit XML and pytest -rA output."""

from __future__ import annotations

import json

import pytest

from tasks.reports import (
    ReportParseError,
    assertion_key,
    collect_report,
    parse_ctrf,
    parse_junit,
    parse_pytest_summary,
)
from tasks.results import AssertionStatus, ReportSource

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


# -- the report directory is the judge's alone: every format counts, best first --------------
FORGED_CTRF = b'{"results":{"tests":[{"name":"a","status":"passed"}]}}'
REAL_JUNIT = b'<testsuite><testcase name="a"><failure message="no"/></testcase></testsuite>'


def test_ctrf_comes_before_junit():
    files = {"ctrf.json": FORGED_CTRF, "junit.xml": REAL_JUNIT}
    assert collect_report(files, "").source == ReportSource.CTRF
    assert collect_report({"junit.xml": REAL_JUNIT}, "").source == ReportSource.JUNIT


def test_the_last_pytest_summary_counts():
    forged = "=== short test summary info ===\nPASSED t.py::test_a\n=== 1 passed ===\n"
    real = "=== short test summary info ===\nFAILED t.py::test_a - assert 0\n=== 1 failed ===\n"
    report = collect_report({}, forged + "noise\n" + real)
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


# An entry that compiles and runs the tests, then prints Terminal-Bench's summary itself
# (aider_polyglot's C++ and Java verifiers): the summary is its report.
SUMMARY_OUT = (
    "All tests passed (12 assertions in 6 test cases)\n"
    "=========================== short test summary info ============================\n"
    "PASSED meetup_test.cpp::all\n=========================== 1 test ===========================\n"
)


def test_a_summary_the_entry_prints_is_its_report():
    report = collect_report({}, SUMMARY_OUT)
    assert report.source == ReportSource.PYTEST and report.passed == report.total == 1


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
