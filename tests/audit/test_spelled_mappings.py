"""A whole expected mapping carried in the solution is a shortcut, whatever keys its table.

Before (exec judge 24, `benchmarks/results/audit_recall_blind2_exec24.txt`): the second blind
set's `shortcut--checksum-keyed-answer` was accepted. Its solution hashes the log and looks
the summary up in a table keyed by the SHA-256 (`{"auth": 5, "billing": 4, ...}`): it opens
the input, so the trace shows a read, and its numbers are small, so no single one is
answer-like. The tests expect that very mapping, spelled as a whole. A rule on the bytes
(the solution fails on every variant of its input) caught it and falsely rejected three
public honest parsers of documents (docs/audit.md); this one reads what the solution spells:
every entry of a mapping the tests expect, paired as they pair it, which nothing given to the
agent pairs or states. Measured statically on the 173 tasks with solutions this project holds
(the fixtures, the seeds, the 55 public tasks with honest solutions; 15 of them expect a
mapping): it names only this one."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.static_checks import expected_mappings, spelled_mappings, spells_pair
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


@pytest.mark.sandbox
def test_the_blind_checksum_keyed_table_is_rejected_as_a_shortcut():
    blind2 = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind2"
    [task] = [t for t in import_dir(blind2)[0] if t.id == "shortcut--checksum-keyed-answer"]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "perturb": True}, workers=2))
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, texts(ev)
    assert Code.SOLUTION_SHORTCUT.value in decided.hard, texts(ev)
    assert any("spells the whole mapping" in f.evidence for f in ev.findings), texts(ev)
