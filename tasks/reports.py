"""Parse per-assertion verifier output as it exists in the wild.

CTRF JSON (`pytest --ctrf`), JUnit XML, and pytest's `-rA` short test summary block. Missing
or garbage output yields a report with `parse_error` set, never an exception. A verifier that
only wrote reward.txt yields a binary report.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tasks.results import AssertionResult, AssertionStatus, ReportSource, VerifierReport

_CTRF_STATUS = {
    "passed": AssertionStatus.PASSED,
    "failed": AssertionStatus.FAILED,
    "skipped": AssertionStatus.SKIPPED,
    "pending": AssertionStatus.SKIPPED,
    "other": AssertionStatus.ERROR,
}


class ReportParseError(ValueError):
    """The verifier output is present but not in the expected format."""


def parse_ctrf(text: str) -> list[AssertionResult]:
    try:
        doc = json.loads(text)
        tests = doc["results"]["tests"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ReportParseError(f"not CTRF JSON: {e}") from e
    if not isinstance(tests, list):
        raise ReportParseError("CTRF results.tests is not a list")
    out = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or "name" not in t or "status" not in t:
            raise ReportParseError(f"CTRF test #{i} lacks name/status")
        raw = str(t["status"]).lower()
        status = _CTRF_STATUS.get(raw)
        if status is None:
            raise ReportParseError(f"CTRF test {t['name']!r} has unknown status {raw!r}")
        out.append(
            AssertionResult(
                name=str(t["name"]),
                status=status,
                message=str(t.get("message") or t.get("trace") or ""),
                duration_s=float(t.get("duration", 0) or 0) / 1000.0,
            )
        )
    return out


def parse_junit(text: str) -> list[AssertionResult]:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ReportParseError(f"not JUnit XML: {e}") from e
    cases = list(root.iter("testcase"))
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportParseError(f"JUnit root is <{root.tag}>, expected <testsuite(s)>")
    out = []
    for case in cases:
        name = case.get("name", "")
        cls = case.get("classname")
        full = f"{cls}::{name}" if cls else name
        status, message = AssertionStatus.PASSED, ""
        for child in case:
            if child.tag == "failure":
                status, message = AssertionStatus.FAILED, child.get("message") or child.text or ""
            elif child.tag == "error":
                status, message = AssertionStatus.ERROR, child.get("message") or child.text or ""
            elif child.tag == "skipped":
                msg = child.get("message") or ""
                is_xfail = child.get("type") == "pytest.xfail"
                status = AssertionStatus.XFAIL if is_xfail else AssertionStatus.SKIPPED
                message = msg
        out.append(
            AssertionResult(
                name=full,
                status=status,
                message=message.strip(),
                duration_s=float(case.get("time", 0) or 0),
            )
        )
    return out


_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$", re.M)
_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S.*?)$")


def parse_pytest_summary(text: str) -> list[AssertionResult]:
    """Parse the `-rA` short test summary block (Terminal-Bench semantics).

    The last block counts: pytest prints its own at the very end, so a block printed earlier
    (by a program the tests ran, writing to the inherited stdout) cannot stand in for it.
    """
    matches = list(_SUMMARY_HEADER.finditer(text))
    m = matches[-1] if matches else None
    if m is None:
        raise ReportParseError("no 'short test summary info' block in the verifier output")
    out = []
    for line in text[m.end() :].splitlines():
        if line.startswith("="):
            break
        lm = _SUMMARY_LINE.match(line.strip())
        if lm is None:
            continue
        status = AssertionStatus(lm.group(1).lower())
        rest = lm.group(2)
        if status == AssertionStatus.SKIPPED:
            rest = re.sub(r"^\[\d+\]\s*", "", rest)
        name, _, message = rest.partition(" - ")
        out.append(AssertionResult(name=name.strip(), status=status, message=message.strip()))
    if not out:
        raise ReportParseError("the short test summary block lists no tests")
    return out


def assertion_key(name: str) -> str:
    """One assertion's identity whatever report source named it (pure): pytest's node id as
    its own records, CTRF and the `-rA` summary write it (`test_outputs.py::test_x`,
    `../tests/test_outputs.py::TestA::test_x[1]`) and JUnit's `classname::name`
    (`test_outputs::test_x`, `tests.test_outputs.TestA::test_x[1]`) all become
    `module::[Class::]test[param]` (`test_outputs::TestA::test_x[1]`). A name without `::`
    (a shell verifier's own) is its own key. Bug pinned: a rerun read from junit.xml and a
    base run read from the channel named every assertion differently, so every rerun of a
    stock pytest task looked changed."""
    name = name.strip()
    cut = name.find("[")
    head, param = (name, "") if cut < 0 else (name[:cut], name[cut:])
    parts = head.split("::")
    if len(parts) == 1:
        return name
    first, rest = parts[0], parts[1:]
    if first.endswith(".py") or "/" in first:
        prefix = [first.rsplit("/", 1)[-1].removesuffix(".py")]
    else:  # a dotted JUnit classname: packages, the module, then classes (capitalized)
        segs = first.split(".")
        j = next((i for i, seg in enumerate(segs) if seg[:1].isupper()), len(segs))
        prefix = ([segs[j - 1]] if j > 0 else []) + segs[j:]
    return "::".join([*prefix, *rest]) + param


def parse_reward(text: str) -> float:
    try:
        return float(text.strip().splitlines()[0])
    except (ValueError, IndexError) as e:
        raise ReportParseError(f"reward.txt is not a number: {text[:40]!r}") from e


def parse_reward_json(text: str) -> float:
    """Harbor's reward.json: named rewards. Its `reward` key, else its only value, else the
    mean of its values (a float per name)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportParseError(f"reward.json is not JSON: {e}") from e
    if not isinstance(doc, dict) or not doc:
        raise ReportParseError("reward.json is not an object of named rewards")
    values = {
        k: v for k, v in doc.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if len(values) != len(doc):
        raise ReportParseError(
            f"reward.json has non-numeric rewards: {sorted(set(doc) - set(values))}"
        )
    if "reward" in values:
        return float(values["reward"])
    return float(sum(values.values()) / len(values))


REPORT_FILES = ("ctrf.json", "junit.xml", "results.xml", "report.xml")
# The seeds' runner (tasks/checkrunner.py), shipped in a task's tests/ as run_checks.py.
CHECKRUNNER_SOURCE = (Path(__file__).parent / "checkrunner.py").read_bytes()


def collect_report(files: dict[str, bytes], stdout: str) -> VerifierReport:
    """Build a report from /logs/verifier files and the verifier's stdout, best source first.

    Order: CTRF, JUnit, the pytest summary in stdout, then reward.txt (or Harbor's
    reward.json) alone (binary). The first source present decides; if it is present but
    garbage, that is a PARSE_ERROR report.
    """
    reward: float | None = None
    reward_error: str | None = None
    if "reward.txt" in files:  # reward.txt wins over reward.json, as in Harbor
        try:
            reward = parse_reward(files["reward.txt"].decode("utf-8", "replace"))
        except ReportParseError as e:
            reward_error = str(e)
    elif "reward.json" in files:
        try:
            reward = parse_reward_json(files["reward.json"].decode("utf-8", "replace"))
        except ReportParseError as e:
            reward_error = str(e)
    attempts: list[tuple[ReportSource, str]] = []
    if "ctrf.json" in files:
        attempts.append((ReportSource.CTRF, "ctrf.json"))
    for name in ("junit.xml", "results.xml", "report.xml"):
        if name in files:
            attempts.append((ReportSource.JUNIT, name))
    for source, name in attempts:
        text = files[name].decode("utf-8", "replace")
        try:
            parsed = parse_ctrf(text) if source == ReportSource.CTRF else parse_junit(text)
        except ReportParseError as e:
            return VerifierReport(source=source, reward=reward, parse_error=f"{name}: {e}")
        return VerifierReport(assertions=parsed, source=source, reward=reward)
    if _SUMMARY_HEADER.search(stdout):
        try:
            parsed = parse_pytest_summary(stdout)
        except ReportParseError as e:
            return VerifierReport(source=ReportSource.PYTEST, reward=reward, parse_error=str(e))
        return VerifierReport(assertions=parsed, source=ReportSource.PYTEST, reward=reward)
    if reward is not None:
        status = AssertionStatus.PASSED if reward >= 1.0 else AssertionStatus.FAILED
        verdict = AssertionResult(name="reward", status=status, message=f"reward={reward}")
        return VerifierReport(assertions=[verdict], source=ReportSource.REWARD, reward=reward)
    if reward_error is not None:
        return VerifierReport(source=ReportSource.REWARD, parse_error=reward_error)
    return VerifierReport(parse_error="the verifier wrote no report and no reward.txt/reward.json")
