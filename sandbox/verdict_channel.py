"""The verifier's report channel: what the test runner itself reported (pytest, or the seeds'
run_checks.py), authenticated (docs/sandbox.md, "The judge").

Every verifier run gets the channel; whether a test runner spoke through it is read from what
the run left, never guessed from the verifier's scripts:

1. `open_channel()` makes a fresh 32-byte key; `files()` are the plugin (with a `pytest11`
   entry point) and its loader to stage under /tests/.t1-verdict; `report_files()` the key, to
   stage in the report directory (the judge's alone); `command()` puts the plugin's directory
   on the Python path of the entry script.
2. In a test runner the plugin reads and destroys the key before any test module is imported,
   makes the runner non-dumpable, starts every program in the agent's domain, and appends one
   HMAC-authenticated, sequence-numbered record per outcome and a closing one
   (sandbox/verdict_plugin.py).
3. `verdict()` checks the records (pure): authenticated, contiguous and closed is the verdict
   (its first record names the runner); a line that does not authenticate is tampering; records
   cut short, or a second session's, mean the runner did not finish. An `agent_code` record
   (the runner is about to execute a file of the agent's in its own process) is listed in the
   report, and the records after it are signed under `ratchet(key)`: the runner wiped the key
   before the agent's code ran, so that code can add records but not hide the mark. When no
   runner loaded the plugin (`loaded()`: the key is still there as staged), the report
   directory is read. In an isolated rerun (sandbox/verdict_isolate.py) an `agent_word`
   record names a test that handed its judgment to a value of the agent's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from sandbox.verdict_plugin import ratchet
from tasks.results import (
    AgentCode,
    AssertionResult,
    AssertionStatus,
    ReportSource,
    VerifierReport,
)

CHANNEL_DIR = ".t1-verdict"  # under /tests: the plugin, its entry point, the staged key
PLUGIN_MODULE = "t1_verdict"
DIST_INFO = f"{CHANNEL_DIR}/t1_verdict-1.0.dist-info"
RECORDS_FILE = "t1-verdict.jsonl"  # in the report directory
REPORT_KEY_FILE = ".t1-verdict-key"  # in the report directory, until a runner consumes it
PLUGIN_SOURCE = (Path(__file__).parent / "verdict_plugin.py").read_bytes()
SITECUSTOMIZE_SOURCE = (Path(__file__).parent / "verdict_sitecustomize.py").read_bytes()
ISOLATE_SOURCE = (Path(__file__).parent / "verdict_isolate.py").read_bytes()
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


@dataclass(frozen=True)
class Channel:
    """One verifier run's channel: its key, and what the run needs to load the plugin."""

    key: bytes

    def files(self) -> dict[str, bytes]:
        """Files to stage under /tests along with the task's tests (readable by every process
        of the verifier: nothing secret)."""
        return {
            f"{CHANNEL_DIR}/{PLUGIN_MODULE}.py": PLUGIN_SOURCE,
            f"{DIST_INFO}/METADATA": b"Metadata-Version: 2.1\nName: t1-verdict\nVersion: 1.0\n",
            f"{DIST_INFO}/entry_points.txt": ENTRY_POINTS,
            f"{CHANNEL_DIR}/sitecustomize.py": SITECUSTOMIZE_SOURCE,
            f"{CHANNEL_DIR}/t1_isolate.py": ISOLATE_SOURCE,
        }

    def report_files(self) -> dict[str, bytes]:
        """Files to stage in the report directory, the judge's alone: the key."""
        return {REPORT_KEY_FILE: self.key.hex().encode()}

    def env(self, report_dir: str) -> dict[str, str]:
        return {
            "T1_VERDICT_KEY": f"{report_dir}/{REPORT_KEY_FILE}",
            "T1_VERDICT_RECORDS": f"{report_dir}/{RECORDS_FILE}",
        }

    def command(self, entry: str, tests_dir: str) -> str:
        """`entry` with the plugin's directory first on the Python path (added to what the
        image or the task set): every Python of the verifier imports its loader."""
        return (
            f'export PYTHONPATH="{tests_dir}/{CHANNEL_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"; {entry}'
        )

    def loaded(self, files: dict[str, bytes]) -> bool:
        """Whether a test runner opened the channel: the key left in the report directory is
        gone or changed."""
        return files.get(REPORT_KEY_FILE) != self.key.hex().encode()

    def verdict(self, files: dict[str, bytes]) -> ChannelVerdict:
        return read_records(files.get(RECORDS_FILE), self.key)


def open_channel() -> Channel:
    return Channel(os.urandom(KEY_BYTES))


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


def read_records(data: bytes | None, key: bytes) -> ChannelVerdict:
    """Check the records under `key` (pure; the rules in the module docstring); the report's
    source is the runner the first record names."""
    runner, source = "the test runner", ReportSource.PYTEST
    if not data:
        return ChannelVerdict(RecordsStatus.MISSING, VerifierReport(), f"{runner} left no records")
    assertions: list[AssertionResult] = []
    agent_code: list[AgentCode] = []
    agent_word: list[str] = []
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
        if kind == "start":
            named = RUNNERS.get(str(record.get("runner")))
            if named is None:
                return ChannelVerdict(
                    RecordsStatus.FORGED,
                    VerifierReport(),
                    f"the records name no known runner: {record.get('runner')!r}",
                )
            runner, source = named.value, named
        if kind == "test":
            assertion = _assertion(record)
            if assertion is None:
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), f"record {seq} is no test outcome"
                )
            assertions.append(assertion)
        elif kind == "agent_code":
            test = record.get("test", "")
            if (
                not isinstance(record.get("path"), str)
                or record.get("tests") != len(assertions)
                or not isinstance(test, str)
            ):
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), f"record {seq} is no agent code"
                )
            agent_code.append(AgentCode(path=str(record["path"]), after=len(assertions), test=test))
            key = bytes(ratchet(key))  # what follows is signed under the next key
        elif kind == "agent_word":
            test = record.get("test")
            if not isinstance(test, str):
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), f"record {seq} is no agent word"
                )
            if test not in agent_word:
                agent_word.append(test)
        elif kind == "end":
            closed = record.get("tests") == len(assertions)
            if not closed:
                return ChannelVerdict(
                    RecordsStatus.FORGED, VerifierReport(), "the closing record's count differs"
                )
    report = VerifierReport(
        assertions=assertions, source=source, agent_code=agent_code, agent_word=agent_word
    )
    if not closed:
        return ChannelVerdict(
            RecordsStatus.CUT_SHORT,
            report,
            f"{runner}'s records end after {len(assertions)} outcomes without its closing record",
        )
    return ChannelVerdict(RecordsStatus.VERIFIED, report)
