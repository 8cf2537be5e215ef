"""A whole expected mapping, or sequence, carried in the solution is a shortcut, whatever keys
or filters by it.

Before (exec judge 24, `benchmarks/results/audit_recall_blind2_exec24.txt`): the second blind
set's `shortcut--checksum-keyed-answer` was accepted. Its solution hashes the log and looks
the summary up in a table keyed by the SHA-256 (`{"auth": 5, "billing": 4, ...}`): it opens
the input, so the trace shows a read, and its numbers are small, so no single one is
answer-like. The tests expect that very mapping, spelled as a whole. A rule on the bytes
(the solution fails on every variant of its input) caught it and falsely rejected three
public honest parsers of documents (docs/audit.md); this one reads what the solution spells:
every entry of a mapping the tests expect, paired as they pair it, which nothing given to the
agent pairs or states. The set's allow-list (`grep -xE 'C004|C008|...'`, the tests' expected
ids in their order) was rejected only as `hackable`; a whole expected sequence spelled in
its order, most of it not in the instruction, is the same carried answer. Measured
statically on the 173 tasks with solutions this project holds (the fixtures, the seeds, the
55 public tasks with honest solutions; 15 expect a mapping, 55 a sequence): the two rules
name these two tasks alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.static_checks import (
    expected_mappings,
    expected_sequences,
    spelled_mappings,
    spells_pair,
    spells_run,
)
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, texts
from tests.factories import make_task

TESTS = """import json
EXPECTED = {"auth": 5, "billing": 4, "gateway": 3}
SMALL = {"a": 1, "b": 2}
MIXED = {"a": [1], "b": 2, "c": 3}

def test_counts():
    assert json.load(open("/app/out.json")) == EXPECTED
    assert {"x": "1", "y": "2", "z": "3"}
"""
TABLE = """python3 - <<'PY'
import hashlib, json
KNOWN = {"9f86d0": {"auth": 5, "billing": 4, "gateway": 3}}
json.dump(KNOWN[hashlib.sha256(open("/app/app.log", "rb").read()).hexdigest()[:6]],
          open("/app/out.json", "w"))
PY
"""
COMPUTED = """python3 - <<'PY'
import collections, json
c = collections.Counter(l.split()[3] for l in open("/app/app.log") if " ERROR " in l)
json.dump(dict(c), open("/app/out.json", "w"))
PY
"""


def test_the_mappings_a_test_module_spells_whole():
    found = dict(expected_mappings(TESTS))
    assert found == {
        2: {"auth": "5", "billing": "4", "gateway": "3"},
        8: {"x": "1", "y": "2", "z": "3"},
    }


@pytest.mark.parametrize(
    ("text", "paired"),
    [('"auth": 5,', True), ("auth = 5\n", True), ("'auth':'5'", True),
     ('"auth": 55', False), ('"auth": 5.5', False), ('"author": 5', False), ("auth 5", False)],
)  # fmt: skip
def test_a_pair_is_a_key_bound_to_its_value(text, paired):
    assert spells_pair("auth", "5", text) == paired


def _task(solution: str, instruction: str = "Summarize `/app/app.log` into `/app/out.json`."):
    task = make_task(solve=solution, extra_tests={"test_outputs.py": TESTS.encode()})
    return task.model_copy(update={"instruction": instruction})


def test_a_table_of_the_expected_mapping_is_a_shortcut():
    [f] = spelled_mappings(_task(TABLE), TABLE)
    assert f.code == Code.SOLUTION_SHORTCUT and "tests/test_outputs.py:2" in f.evidence
    assert "3 entries, 0 of them given" in f.evidence


def test_a_computed_mapping_or_one_the_instruction_states_is_not():
    assert spelled_mappings(_task(COMPUTED), COMPUTED) == []
    stated = "Write `/app/out.json` with auth `5`, billing `4` and gateway `3`."
    assert spelled_mappings(_task(TABLE, stated), TABLE) == []


IDS = ["C004", "C008", "C014", "C027"]


def test_the_sequences_a_test_module_spells_whole():
    text = f"EXPECTED = {IDS!r}\nSHORT = ['a', 'b', 'c']\nPAIR = ('C004', 'C008')\n"
    assert expected_sequences(text) == [(1, IDS)]  # 3 items of 1 character: too little


@pytest.mark.parametrize(
    ("text", "run"),
    [("grep -xE 'C004|C008|C014|C027'", True), ('["C004", "C008", "C014", "C027"]', True),
     ("C004 C008 C014 C027\n", True), ("C004|C014|C008|C027", False),
     ("C004|C008|C014|C0271", False), ("C004|C008|xC014|C027", False)],
)  # fmt: skip
def test_a_run_is_the_items_in_order_with_only_separators_between(text, run):
    assert spells_run(IDS, text) == run


def test_an_allow_list_of_the_expected_ids_is_a_shortcut_and_a_stated_one_is_not():
    tests = f"from pathlib import Path\nEXPECTED = {IDS!r}\n"
    solve = "awk -F, '$4 == \"paid\" { print $2 }' /app/orders.csv | grep -xE 'C004|C008|C014|C027'"
    task = make_task(solve=solve, extra_tests={"test_outputs.py": tests.encode()})
    [f] = spelled_mappings(task, solve)
    assert "in its order (4 items, 0 of them in the instruction)" in f.evidence
    told = task.model_copy(update={"instruction": "Keep C004, C008, C014 and C027 only."})
    assert spelled_mappings(told, solve) == []
    # a run that stands in a file the agent reads (a header line) is given, not carried in
    env = task.environment.model_copy(update={"files": {"app/in.csv": b"C004,C008,C014,C027\n"}})
    assert spelled_mappings(task.model_copy(update={"environment": env}), solve) == []


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("name", "said"),
    [("shortcut--checksum-keyed-answer", "spells the whole mapping"),
     ("shortcut--customer-id-allowlist", "spells the whole sequence")],
)  # fmt: skip
def test_the_blind_shortcuts_are_rejected_as_shortcuts(name, said):
    """Before: the keyed table was accepted, the allow-list rejected only as `hackable`."""
    blind2 = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind2"
    [task] = [t for t in import_dir(blind2)[0] if t.id == name]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "perturb": True}, workers=2))
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, texts(ev)
    assert Code.SOLUTION_SHORTCUT.value in decided.hard, texts(ev)
    assert any(said in f.evidence for f in ev.findings), texts(ev)
