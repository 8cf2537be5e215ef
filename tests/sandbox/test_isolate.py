"""The agent's modules in a process of their own (sandbox/verdict_isolate.py; docs/sandbox.md,
"Isolated reruns").

A module the tests import into the runner makes every outcome after it the agent's: on a task
whose every test imports the solution (most of the public corpus's in-runner tasks) nothing
was the judge's, and an honest module was paid nothing. The judge now runs the verifier again
with the agent's modules in a host process in the agent's domain, only values crossing: what
the tests compare there is data the judge compares itself, and an outcome that agrees with the
first run's is vouched for.

The attacks, first, on both backends: a module whose answers claim to equal anything (the
comparison would be the agent's own), and one that rewrites the runner's reports once loaded
(it runs in the runner in the first run). Neither is paid for what it forged.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from sandbox import run_trial
from sandbox.trial import CommandAgent
from tasks.results import (
    AgentCode,
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    VerifierReport,
)
from tests.factories import stock_task

ISOLATE = Path(__file__).parents[2] / "sandbox" / "verdict_isolate.py"

TESTS = """import importlib.util
from pathlib import Path

import pytest


def _solver():
    spec = importlib.util.spec_from_file_location("solver", "/app/solver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_words():
    assert _solver().count_words("a b  c") == 3


def test_counts_the_poem():
    text = Path("/app/poem.txt").read_text()
    assert _solver().count_words(text) == len(text.split())


def test_refuses_what_is_not_text():
    solver = _solver()
    with pytest.raises(solver.NotText):
        solver.count_words(None)


def test_sorts_the_words_in_place():
    words = ["pear", "apple", "fig"]
    assert _solver().sort_words(words) is None
    assert words == ["apple", "fig", "pear"]


def test_tallies_the_words():
    assert _solver().tally("b a b") == {"a": 1, "b": 2}
"""
NAMES = [
    f"test_outputs.py::test_{n}"
    for n in (
        "counts_words",
        "counts_the_poem",
        "refuses_what_is_not_text",
        "sorts_the_words_in_place",
        "tallies_the_words",
    )
]
HONEST = """class NotText(TypeError):
    pass


def count_words(text):
    if not isinstance(text, str):
        raise NotText(text)
    return len(text.split())


def sort_words(words):
    words.sort()


def tally(text):
    out = {}
    for w in text.split():
        out[w] = out.get(w, 0) + 1
    return out
"""
ALWAYS_EQUAL = """class NotText(TypeError):
    pass


class Anything:
    def __eq__(self, other):
        return True

    __hash__ = None


def count_words(text):
    return Anything()


def sort_words(words):
    words.sort()


def tally(text):
    return Anything()
"""
REWRITES_REPORTS = """import _pytest.reports

# once loaded in the runner, every report it makes says passed
_pytest.reports.TestReport.outcome = property(lambda self: "passed", lambda self, value: None)


class NotText(TypeError):
    pass


def count_words(text):
    return 0


def sort_words(words):
    pass


def tally(text):
    return {}
"""


def _writes(module: str) -> str:
    return f"cat > /app/solver.py <<'EOF'\n{module}EOF\n"


def _task(tmp_path: Path):
    return stock_task(
        tmp_path,
        "solver",
        TESTS,
        "#!/bin/bash\n" + _writes(HONEST),
        "Write `/app/solver.py`: `count_words(text)` (the number of whitespace-separated words; "
        "`NotText`, a TypeError, for anything but a string), `sort_words(words)` (sorts the list "
        "in place) and `tally(text)` (each word's count).\n",
    )


def _paid(r) -> list[str]:
    return list(r.pay(None).passed)


def test_a_module_every_test_imports_is_judged_in_its_own_process(tmp_path, backend):
    task = _task(tmp_path)
    honest = run_trial(task, "oracle", backend)
    assert honest.failure_mode == FailureMode.NONE and honest.resolved, honest.verifier_output
    assert [(c.path, c.test) for c in honest.report.agent_code] == [("/app/solver.py", NAMES[0])]
    # before: every test loads the module, so no outcome was the judge's and none was paid
    assert _paid(honest) == NAMES and honest.report.independent and honest.pay(None).resolved

    equal = run_trial(task, CommandAgent(_writes(ALWAYS_EQUAL), "always-equal"), backend)
    assert equal.failure_mode == FailureMode.NONE, equal.failure_detail
    assert equal.passed == 4  # in the runner its answers equal anything: Terminal-Bench's count
    # in its own process a comparison with its answer is the agent's word, never paid; only the
    # list it sorted, compared here as data, is
    assert _paid(equal) == [NAMES[3]], equal.report

    forger = run_trial(task, CommandAgent(_writes(REWRITES_REPORTS), "rewrites-reports"), backend)
    assert forger.failure_mode == FailureMode.NONE, forger.failure_detail
    assert forger.passed == 5  # what the runner it rewrote reported
    assert _paid(forger) == [], forger.report  # in its own process its answers fail


STALE_TESTS = """import sys

sys.path.insert(0, "/app")


def test_the_module_says_two():
    import answer
    assert answer.X == 2
"""
# the source compiled (its bytecode cached beside it), then rewritten: the same size and second
REWRITTEN = """#!/bin/bash
cd /app && printf 'X = 1\\n' > answer.py && cp -p answer.py /tmp/ref
PYTHONDONTWRITEBYTECODE= python3 -c 'import answer' && ls __pycache__ >/dev/null
printf 'X = 2\\n' > answer.py && touch -r /tmp/ref answer.py
"""


def test_a_module_runs_as_its_source_says_not_as_bytecode_left_beside_it(tmp_path, backend):
    """The audit's output mutants keep a file's size, and land in the second the solution
    compiled it: the verifier's Python took the bytecode cached beside the source, ran the
    solution's code, and a public task's verifier was called weak (every assertion passed
    after its module was corrupted). The judge carries no `__pycache__` of the agent's
    (`sandbox.judge.carried_path`)."""
    task = stock_task(tmp_path, "stale", STALE_TESTS, REWRITTEN, "Write /app/answer.py.\n")
    r = run_trial(task, "oracle", backend)
    assert r.failure_mode == FailureMode.NONE and r.resolved, r.verifier_output[-1500:]


# ---- the pieces, without a sandbox ------------------------------------------------------------


def _isolate_module():
    spec = importlib.util.spec_from_file_location("t1_isolate_under_test", ISOLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _isolated(tmp_path: Path, source: str, words: list[str]):
    iso = _isolate_module()
    path = tmp_path / "agentmod.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("agentmod", path)
    assert spec is not None
    spec.loader = iso.Isolation(words.append).loader(spec)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return iso, module


AGENTMOD = (
    HONEST
    + """
import os


class Node:
    def __init__(self, value):
        self.value = value
        self.kids = []

    def add(self, kid):
        self.kids.append(kid)
        return self

    def total(self):
        return self.value + sum(k.total() for k in self.kids)


def echo(value):
    return value


def evens(n):
    "Even numbers."
    for i in range(n):
        yield 2 * i


def scaled(values, factor=2, *, offset=0):
    return [v * factor + offset for v in values]


def pid():
    return os.getpid()


def leave():
    raise SystemExit(3)
"""
)


def test_values_cross_as_data_and_everything_else_as_handles(tmp_path):
    words: list[str] = []
    iso, m = _isolated(tmp_path, AGENTMOD, words)
    assert type(m).__name__ == "RemoteModule" and m.pid() != __import__("os").getpid()
    value = {"a": (1, 2.5, None), 3: {4, 5}, "b": b"x", "c": [complex(1, 2), float("inf")]}
    assert m.echo(value) == value and type(m.echo((1,))) is tuple
    node = m.Node(3).add(m.Node(4)).add(m.Node(5))
    assert node.total() == 12 and node.value == 3 and len(node.kids) == 2
    assert isinstance(node, iso.Remote) and list(m.evens(3)) == [0, 2, 4]
    words_list = ["b", "c", "a"]
    assert m.sort_words(words_list) is None and words_list == ["a", "b", "c"]
    with pytest.raises(m.NotText) as raised:  # the agent's class, mirrored: a TypeError here
        m.count_words(None)
    assert isinstance(raised.value, TypeError) and raised.value.args == (None,)
    with pytest.raises(KeyError):  # a builtin exception as itself
        m.echo(m.Node(1).__dict__)["missing"]
    with pytest.raises(RuntimeError):  # its SystemExit ends nothing here
        m.leave()
    assert not hasattr(m, "missing") and hasattr(m, "Node")
    # what the tests introspect is the agent's answer too: names, documentation, signatures
    assert "Node" in dir(m) and "total" in dir(node) and m.evens.__doc__ == "Even numbers."
    assert str(inspect.signature(m.scaled)) == "(values, factor=2, *, offset=0)"
    assert str(inspect.signature(m.Node)) == "(value)" and m.scaled.__name__ == "scaled"
    with pytest.raises(iso.IsolationError):  # a value that cannot cross fails the test
        m.echo(lambda: 1)
    assert words == []  # calls, attributes, lengths and iteration are answers, not judgments


def test_a_judgment_handed_to_a_value_of_the_agents_is_its_word(tmp_path):
    words: list[str] = []
    _, m = _isolated(tmp_path, ALWAYS_EQUAL, words)
    answer = m.count_words("a b")
    assert answer == 99  # the agent's own __eq__ answered, in its process
    assert words == ["cmp"]
    assert answer  # its truth
    assert isinstance(answer, m.Anything)  # its class's own answer, asked there
    assert words == ["cmp", "bool", "isinstance"]


def test_wire_tags_data_and_nothing_else():
    iso = _isolate_module()
    made: list[object] = []

    def handle(value):
        made.append(value)
        return {"$h": len(made)}

    data = {"$h": 1, "k": [1, {"$t": 2}]}  # data that looks like a tag crosses as data
    wire = iso.encode(data, handle)
    assert made == [] and iso.decode(wire, lambda tag: pytest.fail(f"{tag}")) == data
    assert iso.encode([object], handle) == [{"$h": 1}] and made == [object]
    assert iso.decode({"$h": 7}, lambda tag: ("handle", tag["$h"])) == ("handle", 7)


def _report(outcomes, mark=None, words=()):
    return VerifierReport(
        assertions=[
            AssertionResult(name=n, status=AssertionStatus.PASSED if ok else AssertionStatus.FAILED)
            for n, ok in outcomes
        ],
        source=ReportSource.PYTEST,
        authenticated=True,
        agent_code=[AgentCode(path="/app/m.py", after=mark[1], test=mark[0])] if mark else [],
        agent_word=list(words),
    )


def test_an_isolated_run_vouches_only_for_outcomes_it_agrees_with():
    from sandbox.judge import isolating, vouch_isolated

    first = _report([("a", True), ("m", True), ("b", True), ("c", False), ("d", True)], ("m", 1))
    assert isolating(first) and not first.independent
    isolated = _report(
        [("a", True), ("m", True), ("b", False), ("c", False), ("d", True)], words=["d"]
    )
    merged = vouch_isolated(first, isolated)
    # m agrees; b passed only where the agent's code ran in the runner; c fails in both; d's
    # outcome was the agent's word in the isolated run
    assert [a.name for a in merged.vouched] == ["a", "m", "c"]
    assert [a.name for a in merged.assertions] == ["a", "m", "c", "b", "d"]
    assert not merged.independent and merged.agent_code[0].after == 3
    same = _report([(a.name, a.ok) for a in first.assertions])
    assert vouch_isolated(first, same).independent
    # a word outside any test leaves nothing the judge's; code the tests built from data
    # (`<eval>`) or a pickle would run in the tests' own process again
    assert _report([("a", True)], words=[""]).vouched == []
    assert not isolating(
        first.model_copy(update={"agent_code": [AgentCode(path="<eval>", after=0)]})
    )


def test_the_channel_reads_an_agent_word_record():
    import hashlib
    import hmac
    import json

    from sandbox.verdict_channel import RecordsStatus, read_records

    key = b"k" * 32

    def line(seq, kind, **fields):
        body = json.dumps(dict(fields, seq=seq, kind=kind), sort_keys=True)
        mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
        return json.dumps({"b": body, "m": mac})

    records = [
        line(0, "start", runner="pytest", pid=1),
        line(1, "agent_word", test="t::a", op="cmp"),
        line(2, "test", name="t::a", outcome="passed"),
        line(3, "test", name="t::b", outcome="passed"),
        line(4, "end", exitstatus=0, tests=2),
    ]
    verdict = read_records("\n".join(records).encode(), key)
    assert verdict.status == RecordsStatus.VERIFIED and verdict.report.agent_word == ["t::a"]
    assert [a.name for a in verdict.report.vouched] == ["t::b"]
    records[1] = line(1, "agent_word", op="cmp")
    assert read_records("\n".join(records).encode(), key).status == RecordsStatus.FORGED
