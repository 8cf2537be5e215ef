"""Parse per-assertion verifier output as it exists in the wild.

CTRF JSON (`pytest --ctrf`), JUnit XML, and pytest's `-rA` short test summary block. Missing
or garbage output yields a report with `parse_error` set, never an exception. A verifier that
only wrote reward.txt yields a binary report.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tasks.literals.model import RUNNER
from tasks.results import (
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    VerifierReport,
)

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
ALL_SOURCES = frozenset(
    {ReportSource.CTRF, ReportSource.JUNIT, ReportSource.PYTEST, ReportSource.REWARD}
)
ENTRY_SCRIPTS = ("test.sh", "run-tests.sh")
_DECLARES: tuple[tuple[ReportSource, re.Pattern[str]], ...] = (
    (ReportSource.CTRF, re.compile(r"ctrf", re.I)),
    # only these file names are read (REPORT_FILES), so only they, or pytest's flag, declare
    (ReportSource.JUNIT, re.compile(r"(junit|results|report)\.xml|--junit-?xml", re.I)),
    (ReportSource.PYTEST, re.compile(r"pytest|py\.test")),
    (ReportSource.REWARD, re.compile(r"reward\.(txt|json)")),
)
# Files the entry script runs as programs (their text says what they write): scripts, and
# pytest's own configuration (addopts such as --junitxml). Test modules, sources compiled by
# the script and vendored headers are data to the runner, never read for a declaration.
_RUNNER_SUFFIXES = ("", ".sh", ".bash", ".py")
_PYTEST_CONFIG = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_TEST_MODULE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")
MAX_INVOKED = 32


_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_PRINTS = re.compile(r"^\s*(echo|printf)\b")


def _code(text: str) -> str:
    """Shell or Python text without whole-line comments, and without the quoted text of
    `echo`/`printf` lines (their redirections kept): a comment or a message declares nothing
    (bug pinned: aider_polyglot's Java run-tests.sh echoes "... javac/JUnit invocation is not
    supported" and prints a pytest-style summary, which a JUnit-only declaration ignored)."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if _PRINTS.match(line):
            message, redirect, target = line.partition(">")
            line = _QUOTED.sub("''", message) + redirect + target
        lines.append(line)
    return "\n".join(lines)


def _invoked(text: str, verifier: dict[str, bytes]) -> list[str]:
    """The verifier files `text` names as programs to run: /tests/X, tests/X, $TEST_DIR/X,
    ${TEST_DIR}/X, "$TEST_DIR"/X, or X itself as a word (after `cd /tests`), for runner-like
    X."""
    out = []
    for rel in verifier:
        name = rel.rsplit("/", 1)[-1]
        suffix = "." + name.rsplit(".", 1)[1] if "." in name else ""
        if suffix not in _RUNNER_SUFFIXES or _TEST_MODULE.search(rel):
            continue
        ref = re.escape(rel)
        if re.search(
            rf"(/tests/|(?<![\w./-])tests/|\$\{{?TEST_DIR\}}?[\"']?/|(?<![\w./-])(\./)?){ref}"
            rf"(?![\w.-])",
            text,
        ):
            out.append(rel)
    return out


def _scripts(verifier: dict[str, bytes]) -> dict[str, str]:
    """The entry script and the scripts it runs, transitively: name -> text as code."""
    entry = next((name for name in ENTRY_SCRIPTS if name in verifier), None)
    if entry is None:
        return {}
    texts: dict[str, str] = {}
    seen, queue = {entry}, [entry]
    while queue and len(seen) <= MAX_INVOKED:
        name = queue.pop(0)
        texts[name] = _code(verifier[name].decode("utf-8", "replace"))
        for rel in _invoked(texts[name], verifier):
            if rel not in seen:
                seen.add(rel)
                queue.append(rel)
    return texts


def _found_sources(verifier: dict[str, bytes]) -> frozenset[ReportSource]:
    """The formats the entry script and the scripts it runs name (empty: none, or no entry)."""
    texts = list(_scripts(verifier).values())
    found = {src for src, pattern in _DECLARES if any(pattern.search(t) for t in texts)}
    if ReportSource.PYTEST in found:
        for name in _PYTEST_CONFIG:
            if name in verifier:
                config = _code(verifier[name].decode("utf-8", "replace"))
                found |= {src for src, pattern in _DECLARES[:2] if pattern.search(config)}
    return frozenset(found)


def declared_sources(verifier: dict[str, bytes]) -> frozenset[ReportSource]:
    """The report formats a task's verifier can write, read from its entry script
    (tests/test.sh, else run-tests.sh) and the scripts it runs, transitively (pure).

    Only these are parsed after a trial, so a report of another format that code run during
    the verifier (the agent's program, say) drops into /logs/verifier is ignored. Other files
    of tests/ do not count (bug pinned: a vendored C++ test framework header mentioning
    "junit" restricted a pytest-summary task to JUnit and voided it); when the script uses
    pytest, its configuration files in tests/ do (addopts). A verifier with no entry script,
    or whose scripts name no format, keeps every source (nothing to restrict by).
    """
    return _found_sources(verifier) or ALL_SOURCES


_INSTALLS = re.compile(r"\b(pip3?|uv\s+pip|uv\s+add|apt(-get)?|apk|conda|poetry)\s+(install|add)\b")
_RUNS_PYTEST = re.compile(r"(?<![\w.-])(pytest|py\.test)(-3)?(?![\w.-])")


def runs_pytest(verifier: dict[str, bytes]) -> bool:
    """The verifier's entry script, or a shell script it runs, runs pytest (pure): its
    verdict is then what pytest itself reports through the report channel
    (sandbox.verdict_channel). Lines that install packages do not count, nor do Python files
    (bug pinned: the seeds' run_checks.py mentions pytest in its docstring and runs none)."""
    for name, text in _scripts(verifier).items():
        if name.endswith(".py"):
            continue
        lines = (line for line in text.splitlines() if not _INSTALLS.search(line))
        if any(_RUNS_PYTEST.search(line) for line in lines):
            return True
    return False


# The seeds' runner (tasks/checkrunner.py), shipped in a task's tests/ as run_checks.py. Tasks
# stored before it spoke the report channel carry an earlier version (sha256 below): the
# harness stages the current one in its place, which runs the same checks and writes the same
# files, and records through the channel besides.
CHECKRUNNER_SOURCE = (Path(__file__).parent / "checkrunner.py").read_bytes()
CHECKRUNNER_EARLIER = frozenset(
    {"8b475d20dea32c60f0b97273ad0de902acb573d1c2841c110ac50f9d0483f821"}
)
_RUNS_CHECKRUNNER = re.compile(r"(?<![\w.-])" + re.escape(RUNNER) + r"(?![\w.-])")


def runs_checkrunner(verifier: dict[str, bytes]) -> bool:
    """The verifier ships the seeds' runner (this version or an earlier one) and its entry
    script, or a shell script it runs, runs it (pure): its verdict is then what the runner
    reports through the report channel."""
    shipped = verifier.get(RUNNER)
    if shipped is None or (
        shipped != CHECKRUNNER_SOURCE
        and hashlib.sha256(shipped).hexdigest() not in CHECKRUNNER_EARLIER
    ):
        return False
    scripts = _scripts(verifier)
    return any(
        _RUNS_CHECKRUNNER.search(text) for name, text in scripts.items() if not name.endswith(".py")
    )


def report_runner(verifier: dict[str, bytes]) -> ReportSource | None:
    """The test runner whose own authenticated records are the verifier's verdict (pure):
    pytest when the scripts run it, else the seeds' runner; None for any other verifier, whose
    report is read from the report directory (docs/sandbox.md, "The report channel")."""
    if runs_pytest(verifier):
        return ReportSource.PYTEST
    if runs_checkrunner(verifier):
        return ReportSource.RUN_CHECKS
    return None


def collect_report(
    files: dict[str, bytes], stdout: str, sources: frozenset[ReportSource] = ALL_SOURCES
) -> VerifierReport:
    """Build a report from /logs/verifier files and the verifier's stdout, best source first.

    Order: CTRF, JUnit, the pytest summary in stdout, then reward.txt (or Harbor's
    reward.json) alone (binary); only `sources` are considered. The first source present
    decides; if it is present but garbage, that is a PARSE_ERROR report.
    """
    files = {
        name: data
        for name, data in files.items()
        if (name == "ctrf.json" and ReportSource.CTRF in sources)
        or (name in REPORT_FILES[1:] and ReportSource.JUNIT in sources)
        or (name.startswith("reward.") and ReportSource.REWARD in sources)
    }
    if ReportSource.PYTEST not in sources:
        stdout = ""
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


# -- the verdict when there is no report ---------------------------------------------------
class VerdictBasis(StrEnum):
    """What a trial's verdict rests on (`report_verdict`)."""

    REPORT = "report"  # the verifier's report
    UNREADABLE = "unreadable"  # a report is there but does not parse: parse_error
    COMPILE_FAILED = "compile_failed"  # no report; the output shows a compiler's error
    EXIT_STATUS = "exit_status"  # no report and a non-zero exit: the tests failed
    PROGRAM_MISSING = "program_missing"  # exit 126/127 on a program the agent was to make
    RUNNER_MISSING = "runner_missing"  # exit 126/127 on the verifier's own command: infra
    NO_REPORT = "no_report"  # exit 0 (or none) and no report left: a failed attempt


@dataclass(frozen=True)
class ReportVerdict:
    """How a verifier run is scored. `failure_mode` is NONE for a verdict (passed or
    failed), PARSE_ERROR for an unreadable report, VERIFIER_ERROR where the verifier could
    not judge for a reason the agent cannot cause. `report` is the one to record: a failed
    attempt without a report gets a one-assertion failed report, so it scores 0, counts
    as an attempt and is never resolved; `detail` says why, in one line."""

    basis: VerdictBasis
    failure_mode: FailureMode
    report: VerifierReport
    detail: str = ""


NEVER_RAN_EXIT_CODES = (126, 127)  # not executable / command not found
# A compiler's or build tool's error line (gcc/clang, ld, rustc/cargo, go, javac/maven/gradle,
# tsc, make, ninja, dotnet): the agent's code did not build, so its tests could not pass.
_COMPILE_ERROR = re.compile(
    r"^\S+?:\d+(?::\d+)?: (?:fatal )?error: |^collect2: error: |undefined reference to `"
    r"|^error\[E\d{4}\]: |could not compile `"
    r"|^# \S+\n\S+\.go:\d+:\d+: |\[build failed\]|^\S+\.java:\d+: error: |COMPILATION ERROR"
    r"|Compilation failed|: error TS\d+: |^make(?:\[\d+\])?: \*\*\* .*Error \d+"
    r"|^ninja: build stopped: subcommand failed|: error CS\d{4}: ",
    re.M,
)
# bash's words for a command it could not run: "<script>: line N: <cmd>: command not found".
_NOT_RUN = re.compile(
    r"^(?:.*?: line \d+: |bash: |sh: \d+: |env: |timeout: failed to run command )"
    r"[‘'`]?([^:'’\s]+)[’']?: "
    r"(?:command not found|No such file or directory|Permission denied|not found)\s*$",
    re.M,
)
# Where the verifier's own programs live (the image's, or the task's tests): a missing one
# is the task's or the harness's failure. Any other path is the agent's to have made.
_VERIFIER_OWN = ("/usr/", "/bin/", "/sbin/", "/lib", "/tests/", "/logs/", "/etc/")


def compile_failed(output: str) -> bool:
    """The verifier's output shows a compiler or build tool rejecting the code (pure)."""
    return _COMPILE_ERROR.search(output) is not None


def _missing_program(output: str) -> str | None:
    found = _NOT_RUN.findall(output)
    return found[-1] if found else None


def report_verdict(report: VerifierReport, exit_code: int | None, output: str) -> ReportVerdict:
    """Score a verifier run as Terminal-Bench does, from the report `collect_report` made,
    the verifier's exit status and its output (stdout + stderr) (pure).

    A report that parses is the verdict, whatever the exit status (pytest exits 1 when a
    test fails). Without one: a compile failure of the agent's code, or a non-zero exit, is a
    failed attempt (reward 0, never infrastructure: an agent about to fail must not be able
    to void the trial); exit 126/127 is a failed attempt when the program that could not
    run is one the agent was to make (a path outside the system and test directories), and
    `verifier_error` when it is the verifier's own command (a bare name looked up on the
    image's PATH, or a path under /usr, /bin, /tests ...). Exit 0, or no exit status, with
    nothing written is a failed attempt too: a program of the agent's that the verifier runs
    can delete the report, or take its name with a FIFO, and an agent about to fail must not
    be able to void the trial (a verifier that never writes a report fails the audit's oracle
    run instead).
    """
    if report.assertions and not report.parse_error:
        return ReportVerdict(VerdictBasis.REPORT, FailureMode.NONE, report)
    if report.source != ReportSource.NONE:
        detail = report.parse_error or f"the {report.source.value} report lists no assertions"
        return ReportVerdict(VerdictBasis.UNREADABLE, FailureMode.PARSE_ERROR, report, detail)
    tail = output[-300:].strip().replace("\n", " | ")

    def failed(basis: VerdictBasis, why: str) -> ReportVerdict:
        verdict = AssertionResult(name="verifier", status=AssertionStatus.FAILED, message=why)
        failed_report = VerifierReport(assertions=[verdict], source=ReportSource.REWARD, reward=0.0)
        return ReportVerdict(basis, FailureMode.NONE, failed_report, why)

    if compile_failed(output):
        m = _COMPILE_ERROR.search(output)
        line = output[m.start() :].split("\n", 1)[0][:200] if m else ""
        return failed(VerdictBasis.COMPILE_FAILED, f"the code did not compile: {line}")
    if exit_code in NEVER_RAN_EXIT_CODES:
        program = _missing_program(output)
        if program is not None and "/" in program and not program.startswith(_VERIFIER_OWN):
            return failed(
                VerdictBasis.PROGRAM_MISSING,
                f"the verifier could not run {program} (exit {exit_code}), which the agent "
                "was to make",
            )
        return ReportVerdict(
            VerdictBasis.RUNNER_MISSING,
            FailureMode.VERIFIER_ERROR,
            report,
            f"the verifier never ran (exit {exit_code}): {tail}",
        )
    if exit_code is not None and exit_code != 0:
        return failed(
            VerdictBasis.EXIT_STATUS, f"no report and exit {exit_code} (tests failed): {tail}"
        )
    return failed(
        VerdictBasis.NO_REPORT,
        f"the verifier exited {exit_code} and left no report (a program it ran may have"
        f" removed it): {tail}",
    )
