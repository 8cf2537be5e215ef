"""The report channel's two ends without a sandbox: pytest with the plugin writes records that
`read_records` accepts under the run's key, and every way of forging or cutting them is
told apart (sandbox.verdict_channel; the attacks in a sandbox are in test_hostile.py)."""

from __future__ import annotations

import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.verdict_channel import (
    CHANNEL_DIR,
    PLUGIN_MODULE,
    RECORDS_FILE,
    REPORT_KEY_FILE,
    Channel,
    RecordsStatus,
    open_channel,
    read_records,
)
from sandbox.verdict_plugin import ratchet
from tasks.reports import CHECKRUNNER_SOURCE
from tasks.results import AssertionStatus, ReportSource

TESTS = """import pytest


def test_ok():
    pass


def test_bad():
    assert 1 == 2


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_known():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("fixture")


def test_error(broken):
    pass


def test_runs_pytest_inside():
    import os

    inner = os.path.join(os.path.dirname(__file__), "inner_x.py")
    assert pytest.main(["-q", "-p", "no:cacheprovider", inner]) == 1
"""
INNER = "def test_inner():\n    assert False\n"


def run_pytest(
    tmp: Path, channel: Channel, *extra_runs: str, prefix: str = "true", **env_extra: str
) -> dict[str, bytes]:
    """pytest on TESTS with the plugin staged as the harness stages it; `extra_runs` are
    further shell commands the entry script runs afterwards."""
    tests, logs = tmp / "tests", tmp / "logs"
    for rel, data in {
        **channel.files(),
        "test_x.py": TESTS.encode(),
        "inner_x.py": INNER.encode(),
    }.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_bytes(data)
    logs.mkdir()
    for name, data in channel.report_files().items():
        (logs / name).write_bytes(data)
    script = "; ".join(
        [
            prefix,
            f"{sys.executable} -m pytest -q -p no:cacheprovider {tests}/test_x.py",
            *extra_runs,
        ]
    )
    (tmp / "entry.sh").write_text(script + "\n")
    env = {**os.environ, **channel.env(str(logs)), **env_extra}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        ["bash", "-c", channel.command(f"bash {tmp}/entry.sh", str(tests))],
        env=env,
        capture_output=True,
        timeout=60,
    )
    return {p.name: p.read_bytes() for p in logs.iterdir()}


def test_pytest_records_are_the_verdict(tmp_path):
    channel = open_channel()
    files = run_pytest(tmp_path, channel)
    assert channel.loaded(files)
    verdict = channel.verdict(files)
    assert verdict.status == RecordsStatus.VERIFIED, verdict.detail
    got = {a.name.rsplit("::", 1)[1]: a.status for a in verdict.report.assertions}
    assert got == {
        "test_ok": AssertionStatus.PASSED,
        "test_bad": AssertionStatus.FAILED,
        "test_skipped": AssertionStatus.SKIPPED,
        "test_known": AssertionStatus.XFAIL,
        "test_error": AssertionStatus.ERROR,
        "test_runs_pytest_inside": AssertionStatus.PASSED,  # its own session adds nothing
    }
    bad = next(a for a in verdict.report.assertions if a.name.endswith("test_bad"))
    assert "assert 1 == 2" in bad.message
    # under another key nothing authenticates
    records = run_pytest(tmp_path / "b", channel)[RECORDS_FILE]
    assert read_records(records, os.urandom(32)).status == RecordsStatus.FORGED


def test_the_tests_the_judge_names_are_left_out(tmp_path):
    """A rerun of the verifier leaves out the tests that ran the agent's code before
    (sandbox.judge.rerun_without): named by node id, one a line; the others run as before."""
    channel = open_channel()
    tests = tmp_path / "tests"
    named = "\n".join(f"{tests}/test_x.py::{n}" for n in ("test_bad", "test_error", "test_nope"))
    files = run_pytest(tmp_path, channel, T1_DESELECT=named.replace(f"{tests}/", ""))
    verdict = channel.verdict(files)
    assert verdict.status == RecordsStatus.VERIFIED, verdict.detail
    got = {a.name.rsplit("::", 1)[1] for a in verdict.report.assertions}
    assert got == {"test_ok", "test_skipped", "test_known", "test_runs_pytest_inside"}


def test_a_pytest_without_plugin_autoload_still_reports(tmp_path):
    """LiveCodeBench Pro's verifiers set PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: the plugin is then
    named in PYTEST_PLUGINS by the staged sitecustomize, in pytest's process only."""
    channel = open_channel()
    files = run_pytest(tmp_path, channel, prefix="export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1")
    assert channel.loaded(files)
    assert channel.verdict(files).status == RecordsStatus.VERIFIED


def test_a_pytest_that_refuses_the_plugin_has_taken_the_key(tmp_path):
    """The channel opens when pytest's process starts, before pytest reads a configuration:
    a pytest told `-p no:t1_verdict` (as a project's configuration can tell it) leaves records
    that never close, a failed attempt, not a key left for the report files to count."""
    channel = open_channel()
    files = run_pytest(tmp_path, channel, prefix="export PYTEST_ADDOPTS='-p no:t1_verdict'")
    assert channel.loaded(files)
    verdict = channel.verdict(files)
    assert verdict.status == RecordsStatus.CUT_SHORT and not verdict.report.assertions


def test_asking_pytest_its_version_takes_no_key(tmp_path):
    channel = open_channel()
    files = run_pytest(tmp_path, channel, prefix=f"{sys.executable} -m pytest --version")
    assert channel.verdict(files).status == RecordsStatus.VERIFIED


def test_an_entry_script_that_replaces_the_python_path_loads_no_plugin(tmp_path):
    """Such a verifier is judged as one without the channel: the key is still in the report
    directory, so the harness knows no pytest consumed it; pytest itself runs as usual."""
    channel = open_channel()
    files = run_pytest(tmp_path, channel, "true", prefix="export PYTHONPATH=/nowhere")
    assert not channel.loaded(files) and RECORDS_FILE not in files
    assert channel.loaded({}) and channel.loaded({REPORT_KEY_FILE: b"0" * 64})


def test_a_second_pytest_run_voids_and_a_nested_one_is_silent(tmp_path):
    channel = open_channel()
    again = f"{sys.executable} -m pytest -q -p no:cacheprovider {tmp_path}/tests/test_x.py"
    assert channel.verdict(run_pytest(tmp_path, channel, again)).status == RecordsStatus.UNKEYED
    # a pytest started from inside the keyed one (its tests' children) writes nothing
    channel = open_channel()
    nested = tmp_path / "n"
    data = run_pytest(
        nested, channel, f"T1_VERDICT_NESTED=1 {again.replace(str(tmp_path), str(nested))}"
    )
    assert channel.verdict(data).status == RecordsStatus.VERIFIED


def _lines(channel: Channel, tmp: Path) -> list[str]:
    return run_pytest(tmp, channel)[RECORDS_FILE].decode().splitlines()


@pytest.mark.parametrize(
    ("edit", "status"),
    [
        (lambda ls: [], RecordsStatus.MISSING),
        (lambda ls: ls[:-1], RecordsStatus.CUT_SHORT),
        (lambda ls: ls[:2] + ls[3:], RecordsStatus.FORGED),  # one outcome dropped
        (lambda ls: ls[:1] + ls[2:3] + ls[1:2] + ls[3:], RecordsStatus.FORGED),  # reordered
        (lambda ls: [*ls, ls[1]], RecordsStatus.FORGED),  # replayed after the end
        (
            lambda ls: [x.replace('\\"failed\\"', '\\"passed\\"') for x in ls],
            RecordsStatus.FORGED,
        ),
        (
            lambda ls: [*ls[:-1], json.dumps({"b": '{"kind":"end"}', "m": "0" * 64}), ls[-1]],
            RecordsStatus.FORGED,
        ),
    ],
    ids=["missing", "cut-short", "dropped", "reordered", "replayed", "flipped", "unsigned"],
)
def test_edited_records_are_told_apart(tmp_path, edit, status):
    channel = open_channel()
    lines = _lines(channel, tmp_path)
    assert read_records("\n".join(lines).encode(), channel.key).status == RecordsStatus.VERIFIED
    edited = "\n".join(edit(lines)).encode()
    assert read_records(edited, channel.key).status == status


def _signed(bodies: list[dict], key: bytes, first: int = 0) -> list[str]:
    """Record lines as the plugin writes them, numbered from `first`: each signed, the key
    ratcheted after an `agent_code` one (the plugin's `_Channel`, with no process around it)."""
    out, k = [], bytearray(key)
    for seq, body in enumerate(bodies, first):
        text = json.dumps({**body, "seq": seq}, sort_keys=True, separators=(",", ":"))
        out.append(json.dumps({"b": text, "m": hmac.new(k, text.encode(), "sha256").hexdigest()}))
        if body["kind"] == "agent_code":
            k = ratchet(k)
    return out


def _outcome(name: str) -> dict:
    return {"kind": "test", "name": name, "outcome": "passed", "message": "", "duration": 0.0}


RUN = [
    {"kind": "start", "runner": "pytest", "pid": 1},
    _outcome("t::a"),
    {"kind": "agent_code", "path": "/app/solution.py", "tests": 1, "test": "t::b"},
    _outcome("t::b"),
    {"kind": "end", "exitstatus": 0, "tests": 2},
]


def test_the_agents_code_in_the_runner_is_listed_and_signs_on_under_the_next_key():
    """The mark is listed with the outcomes before it; what the agent's code can write once
    it runs (it holds only the next key) never makes records without the mark verify."""
    key, data = os.urandom(32), lambda lines: "\n".join(lines).encode()
    lines = _signed(RUN, key)
    v = read_records(data(lines), key)
    assert v.status == RecordsStatus.VERIFIED, v.detail
    assert [(c.path, c.after, c.test) for c in v.report.agent_code] == [
        ("/app/solution.py", 1, "t::b")
    ]
    assert not v.report.independent and v.report.passed == 2
    after = bytes(ratchet(bytearray(key)))  # all the agent's code can sign with
    for forged in (
        lines[:2] + lines[3:],  # the mark dropped
        lines[:2] + _signed(RUN[3:], after, first=2),  # dropped, the rest signed anew
        _signed([*RUN[:2], {**RUN[2], "tests": 0}, *RUN[3:]], key),  # misplaced
        _signed([*RUN[:2], {**RUN[2], "test": 7}, *RUN[3:]], key),  # no test's name
        _signed(RUN[:3], key) + _signed([{**RUN[3], "outcome": "failed"}, RUN[4]], key, 3),
    ):
        assert read_records(data(forged), key).status == RecordsStatus.FORGED
    assert read_records(data(_signed([*RUN[:2], *RUN[3:]], key)), key).report.independent


def test_the_channel_stages_no_key_with_the_tests():
    """The key goes to the report directory, the judge's alone; /tests is readable by the
    agent's programs the tests run."""
    channel = open_channel()
    assert f"{CHANNEL_DIR}/{PLUGIN_MODULE}.py" in channel.files()
    assert not any(channel.key.hex().encode() in b for b in channel.files().values())
    assert channel.report_files() == {REPORT_KEY_FILE: channel.key.hex().encode()}


CHECKS = """import subprocess
import sys


def test_ok():
    pass


def test_bad():
    assert 1 == 2, "one is not two"


def test_crash():
    raise RuntimeError("boom")


def test_runs_pytest_inside(tmp_path=None):
    import os

    inner = os.path.join(os.path.dirname(__file__), "inner_x.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", inner])
    assert r.returncode == 1
"""


def run_checks(tmp: Path, channel: Channel, runner: bytes = CHECKRUNNER_SOURCE) -> dict[str, bytes]:
    """The seeds' runner on CHECKS, staged and run as the harness runs a seed's verifier."""
    tests, logs = tmp / "tests", tmp / "logs"
    for rel, data in {
        **channel.files(),
        "run_checks.py": runner,
        "test_outputs.py": CHECKS.encode(),
        "inner_x.py": INNER.encode(),
    }.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_bytes(data)
    logs.mkdir()
    for name, data in channel.report_files().items():
        (logs / name).write_bytes(data)
    entry = f"{sys.executable} {tests}/run_checks.py {tests}/test_outputs.py --out {logs}"
    env = {**os.environ, **channel.env(str(logs))}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        ["bash", "-c", channel.command(entry, str(tests))],
        env=env,
        capture_output=True,
        timeout=60,
    )
    return {p.name: p.read_bytes() for p in logs.iterdir()}


def test_the_seeds_runner_records_through_the_channel(tmp_path):
    """run_checks.py records each check's outcome as pytest's plugin does, names itself in the
    records (the verdict's source), and a pytest a check starts stays silent."""
    channel = open_channel()
    files = run_checks(tmp_path, channel)
    assert channel.loaded(files) and "ctrf.json" in files  # the files are still written
    verdict = channel.verdict(files)
    assert verdict.status == RecordsStatus.VERIFIED, verdict.detail
    assert verdict.report.source == ReportSource.RUN_CHECKS
    got = {a.name: a.status for a in verdict.report.assertions}
    assert got == {
        "test_ok": AssertionStatus.PASSED,
        "test_bad": AssertionStatus.FAILED,
        "test_crash": AssertionStatus.FAILED,
        "test_runs_pytest_inside": AssertionStatus.PASSED,
    }
    bad = next(a for a in verdict.report.assertions if a.name == "test_bad")
    assert bad.message == "one is not two"


def test_the_seeds_runner_without_a_channel_is_unchanged(tmp_path):
    """Outside a channel run (the runner's own use, a verifier of another harness) it writes
    ctrf.json and reward.txt and records nothing."""
    tests, logs = tmp_path / "tests", tmp_path / "logs"
    tests.mkdir()
    (tests / "run_checks.py").write_bytes(CHECKRUNNER_SOURCE)
    (tests / "test_outputs.py").write_text("def test_ok():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("T1_VERDICT")}
    r = subprocess.run(
        [sys.executable, tests / "run_checks.py", tests / "test_outputs.py", "--out", logs],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in logs.iterdir()) == ["ctrf.json", "reward.txt"]
