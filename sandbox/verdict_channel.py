"""The verifier's report channel: what the test runner itself reported (pytest, or the seeds'
run_checks.py), authenticated, so that no program the tests run can write a verdict
(docs/sandbox.md, "The report channel").

The verifier's report directory is writable by every process of the verifier, the agent's
programs its tests run included; a report file there (CTRF, JUnit, reward.txt) or a summary on
its stdout proves nothing. For a verifier that runs pytest, the harness instead takes the
verdict from records its own plugin (`sandbox/verdict_plugin.py`) writes from inside the
pytest process, authenticated with a per-run key that only that process holds once tests run:

1. `open_channel()` makes a fresh 32-byte key; `files()` stages it and the plugin (with a
   `pytest11` entry point) under /tests/.t1-verdict; `command()` puts that directory on the
   Python path and moves the key into the report directory before the entry script runs.
2. The plugin reads and destroys the key before any test module is imported, makes pytest
   non-dumpable and appends one HMAC-authenticated, sequence-numbered record per outcome and a
   closing one.
3. `verdict()` checks the records (pure): authenticated, contiguous and closed is the verdict;
   a line that does not authenticate is tampering (only a writer without the key makes one);
   records missing or cut short are a failed attempt (the agent's program deleted them, or
   stopped or killed the test runner), never infrastructure. When no pytest loaded the plugin
   (`loaded()`: the key is still in the report directory, e.g. the entry script replaced
   PYTHONPATH), the report is read as for any other verifier.

The seeds' runner (`tasks/checkrunner.py`, shipped as run_checks.py) loads the plugin file by
path and records through it (`open_runner`); its first record names it, and the harness
checks that the runner it expected wrote the records (`Channel.runner`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tasks.results import AssertionResult, AssertionStatus, ReportSource, VerifierReport

CHANNEL_DIR = ".t1-verdict"  # under /tests: the plugin, its entry point, the staged key
PLUGIN_MODULE = "t1_verdict"
DIST_INFO = f"{CHANNEL_DIR}/t1_verdict-1.0.dist-info"
KEY_FILE = f"{CHANNEL_DIR}/key"
KEY_FILE_MODE = 0o666  # a verifier user other than root must be able to empty it
RECORDS_FILE = "t1-verdict.jsonl"  # in the report directory
REPORT_KEY_FILE = ".t1-verdict-key"  # in the report directory, until pytest consumes it
PLUGIN_SOURCE = (Path(__file__).parent / "verdict_plugin.py").read_bytes()
SITECUSTOMIZE_SOURCE = (Path(__file__).parent / "verdict_sitecustomize.py").read_bytes()
ENTRY_POINTS = f"[pytest11]\n{PLUGIN_MODULE} = {PLUGIN_MODULE}\n".encode()
KEY_BYTES = 32
RUNNERS = {"pytest": ReportSource.PYTEST, "run_checks": ReportSource.RUN_CHECKS}
MAX_RECORDS = 100_000
_OUTCOMES = {
    "passed": AssertionStatus.PASSED,
    "failed": AssertionStatus.FAILED,
    "error": AssertionStatus.ERROR,
    "skipped": AssertionStatus.SKIPPED,
    "xfail": AssertionStatus.XFAIL,
    "xpass": AssertionStatus.XPASS,
}


class RecordsStatus(StrEnum):
    VERIFIED = "verified"  # authenticated, contiguous, closed: the verdict
    MISSING = "missing"  # no records: pytest never reported, or they were removed
    CUT_SHORT = "cut_short"  # authenticated but not closed: the runner never finished
    UNKEYED = "unkeyed"  # a later pytest of the run found the key gone: one run is vouched for
    FORGED = "forged"  # a line that does not authenticate, or out of sequence


@dataclass(frozen=True)
class ChannelVerdict:
    status: RecordsStatus
    report: VerifierReport
    detail: str = ""


def staged_file_mode(rel: str) -> int:
    """The mode a backend gives a file it stages under /tests."""
    if rel == KEY_FILE:
        return KEY_FILE_MODE
    return 0o755 if rel.endswith(".sh") else 0o644


@dataclass(frozen=True)
class Channel:
    """One verifier run's channel: its key, the test runner expected to record, and what the
    run needs to load the plugin."""

    key: bytes
    runner: ReportSource = ReportSource.PYTEST

    def files(self) -> dict[str, bytes]:
        """Files to stage under /tests along with the task's tests."""
        return {
            f"{CHANNEL_DIR}/{PLUGIN_MODULE}.py": PLUGIN_SOURCE,
            f"{DIST_INFO}/METADATA": b"Metadata-Version: 2.1\nName: t1-verdict\nVersion: 1.0\n",
            f"{DIST_INFO}/entry_points.txt": ENTRY_POINTS,
            f"{CHANNEL_DIR}/sitecustomize.py": SITECUSTOMIZE_SOURCE,
            KEY_FILE: self.key.hex().encode(),
        }

    def env(self, report_dir: str) -> dict[str, str]:
        return {
            "T1_VERDICT_KEY": f"{report_dir}/{REPORT_KEY_FILE}",
            "T1_VERDICT_RECORDS": f"{report_dir}/{RECORDS_FILE}",
        }

    def command(self, entry: str, tests_dir: str, report_dir: str) -> str:
        """`entry` with the plugin on the Python path (added to what the image or the task
        set), where pytest finds it by its `pytest11` entry point; the key moved to the report
        directory (emptied in /tests), where the harness sees whether pytest consumed it."""
        staged, moved = f"{tests_dir}/{KEY_FILE}", f"{report_dir}/{REPORT_KEY_FILE}"
        return (
            f'export PYTHONPATH="{tests_dir}/{CHANNEL_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"; '
            f"{{ cat {staged} > {moved} && : > {staged}; }} 2>/dev/null; exec {entry}"
        )

    def loaded(self, files: dict[str, bytes]) -> bool:
        """Whether a pytest loaded the plugin: the key left in the report directory is gone or
        changed. Only the plugin, or a program that read the key before it, removes it; a
        program the tests run cannot put it back without knowing it."""
        return files.get(REPORT_KEY_FILE) != self.key.hex().encode()

    def verdict(self, files: dict[str, bytes]) -> ChannelVerdict:
        return read_records(files.get(RECORDS_FILE), self.key, self.runner)


def open_channel(runner: ReportSource = ReportSource.PYTEST) -> Channel:
    if runner not in RUNNERS.values():
        raise ValueError(f"no report channel for runner {runner!r}")
    return Channel(os.urandom(KEY_BYTES), runner)


def _record(line: str, key: bytes) -> dict[str, object] | None:
    """The record a line carries when it authenticates under `key`, else None."""
    try:
        outer = json.loads(line)
        body, mac = outer["b"], outer["m"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if not isinstance(body, str) or not isinstance(mac, str):
        return None
    want = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, mac):
        return None
    try:
        record = json.loads(body)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _unkeyed(line: str) -> bool:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and "unkeyed" in doc


def _assertion(record: dict[str, object]) -> AssertionResult | None:
    status = _OUTCOMES.get(str(record.get("outcome")))
    if status is None or not isinstance(record.get("name"), str):
        return None
    duration = record.get("duration")
    return AssertionResult(
        name=str(record["name"]),
        status=status,
        message=str(record.get("message") or ""),
        duration_s=float(duration) if isinstance(duration, int | float) else 0.0,
    )


def read_records(
    data: bytes | None, key: bytes, runner: ReportSource = ReportSource.PYTEST
) -> ChannelVerdict:
    """Check the records of `runner` under `key` (pure; the rules in the module docstring)."""
    if not data:
        return ChannelVerdict(RecordsStatus.MISSING, VerifierReport(), f"{runner} left no records")
    assertions: list[AssertionResult] = []
    closed = False
    lines = data.decode("utf-8", "replace").splitlines()[:MAX_RECORDS]
    for seq, line in enumerate(lines):
        if _unkeyed(line):
            return ChannelVerdict(
                RecordsStatus.UNKEYED,
                VerifierReport(),
                f"a {runner} of the verifier ran without the run's key (only one session per"
                " verifier run is vouched for)",
            )
        record = _record(line, key)
        if record is None or record.get("seq") != seq or closed:
            why = "does not authenticate" if record is None else "is out of sequence"
            return ChannelVerdict(
                RecordsStatus.FORGED, VerifierReport(), f"record {seq} of {runner}'s {why}"
            )
        kind = record.get("kind")
        if (seq == 0) != (kind == "start"):
            return ChannelVerdict(
                RecordsStatus.FORGED, VerifierReport(), f"record {seq} is a misplaced {kind!r}"
            )
        if kind == "start" and RUNNERS.get(str(record.get("runner"))) != runner:
            return ChannelVerdict(
                RecordsStatus.FORGED,
                VerifierReport(),
                f"the records are {record.get('runner')!r}'s, not {runner}'s",
            )
        if kind == "test":
            assertion = _assertion(record)
            if assertion is None:
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), f"record {seq} is no test outcome"
                )
            assertions.append(assertion)
        elif kind == "end":
            closed = record.get("tests") == len(assertions)
            if not closed:
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), "the closing record's count differs"
                )
    report = VerifierReport(assertions=assertions, source=runner)
    if not closed:
        return ChannelVerdict(
            RecordsStatus.CUT_SHORT,
            report,
            f"{runner}'s records end after {len(assertions)} outcomes without its closing record",
        )
    return ChannelVerdict(RecordsStatus.VERIFIED, report)
