"""Operators that derive the new work from what the parent actually produced (issue 33,
item 4): a parent output read as a typed table, several typed steps composed over its real
columns, keys and values, an instruction stating the goal. Pure: the reference solution and
the new tests run here, on the parent's profiled output, in a temporary directory (the
sandbox validation of every operator is in tests/synthesis/test_operators.py)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synthesis import coverage as cov
from synthesis.instruction import compose_instruction
from synthesis.operators import PROGRAMMATIC, RewriteContext, build_child
from synthesis.operators.derived import OPERATORS
from synthesis.operators.tables import read_table
from synthesis.profile import OutputFile
from synthesis.validate import new_tests_source, static_check
from synthesis.variety import shape
from tests.synthesis.tiny import table_parent

DRAWS = 5  # extensions per operator


def _out(path: str, text: str, kind: str = "text") -> OutputFile:
    return OutputFile(path=path, rel=path.removeprefix("/app/"), size=len(text), mode=0o644,
                      sha256="0" * 64, created=True, kind=kind, lines=text.count("\n"),
                      sample=text, complete=True)  # fmt: skip


def test_outputs_are_read_as_typed_tables() -> None:
    parent = table_parent()
    by = {f.rel: read_table(f) for f in parent.profile.outputs}
    sales, config, notes = by["sales.csv"], by["config.json"], by["notes.txt"]
    assert sales is not None and sales.form == "csv" and len(sales.rows) == 12
    kinds = {c.name: c.kind for c in sales.columns}
    assert kinds == {"region": "category", "item": "category", "units": "measure",
                     "amount": "measure"}  # fmt: skip
    assert config is not None and config.form == "entries"
    assert {r["key"]: r["value"] for r in config.rows}["features.zones.1"] == "us"
    assert notes is not None and notes.form == "lines" and len(notes.rows) == 6
    tsv = read_table(_out("/app/d.tsv", "a\t1\nb\t2\nc\t2\n"))
    assert tsv is not None and tsv.form == "fields" and tsv.sep == "\t"
    ini = read_table(_out("/app/c.ini", "[server]\nport = 80\nhost = x\n\n[db]\nname = y\n"))
    assert ini is not None and ini.form == "entries" and ini.source == "ini"
    assert [r["key"] for r in ini.rows] == ["server.port", "server.host", "db.name"]
    assert read_table(_out("/app/one.txt", "only one line\n")) is None  # too few records
    partial = _out("/app/big.csv", "a,b\n1,2\n3,4\n4,5\n", "csv").model_copy(
        update={"complete": False}
    )
    assert read_table(partial) is None  # a partial sample would name values not all there


def _run(ext, parent, tmp: Path) -> None:
    """Run the extension's reference steps and its new tests on the parent's outputs
    (paths under `tmp`); raise on any failure."""
    for f in parent.profile.outputs:
        p = tmp / f.path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.sample or "")
    script = "\n".join(ext.steps).replace("'/app/", f"'{tmp}/app/")
    r = subprocess.run(["bash", "-c", script.replace("python3", sys.executable)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr[-1000:]
    ns: dict = {}
    exec(compile(ext.tests.replace("'/app/", f"'{tmp}/app/"), "tests", "exec"), ns)
    ran = [fn() for name, fn in ns.items() if name.startswith("test_")]
    assert len(ran) == len(ext.creates)  # one test per step, one file per step


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.name)
def test_every_draw_builds_states_its_literals_and_passes_its_tests(op, tmp_path) -> None:
    parent = table_parent()
    assert op in PROGRAMMATIC and op.feasible(parent) is None
    for i in range(DRAWS):
        ext = op.extend(parent, RewriteContext(2, random.Random(f"{op.name}:{i}")))
        child = build_child(parent, op.name, op.family, 2, ext)
        assert static_check(child, parent) is None
        pending = cov.pending(child, new_tests_source(child, parent.task))
        assert not pending.uncovered, [lit.value for lit in pending.uncovered]
        assert ext.consumes and set(ext.consumes) <= {f.path for f in parent.profile.outputs}
        assert 2 <= len(ext.creates) <= 3  # several typed steps, composed
        _run(ext, parent, tmp_path / str(i))


def test_the_values_named_are_the_outputs_own() -> None:
    """A selection names a value the parent's output holds (never a template's constant)."""
    parent = table_parent()
    samples = "\n".join(f.sample or "" for f in parent.profile.outputs)
    named = 0
    for op in OPERATORS:
        for i in range(DRAWS):
            ext = op.extend(parent, RewriteContext(2, random.Random(f"{op.name}:{i}")))
            for m in re.finditer(r"(?:is exactly|equal to|whose \S+ is|word|under) `([^`]+)`",
                                 ext.text):  # fmt: skip
                assert m.group(1) in samples, (m.group(1), ext.text)
                named += 1
    assert named >= DRAWS  # selections by value do occur


def test_the_instruction_states_the_goal_not_a_command() -> None:
    parent = table_parent()
    commands = re.compile(r"`(?:python3|awk|sed|grep|jq|sort|wc|cut|LC_ALL=\S+)\b")
    for op in OPERATORS:
        for i in range(DRAWS):
            ext = op.extend(parent, RewriteContext(2, random.Random(f"{op.name}:{i}")))
            assert not commands.search(ext.text), ext.text
            text = compose_instruction(parent.core_instruction, parent.core_name,
                                       parent.core_outputs, [], "/app")  # fmt: skip
            assert text == parent.task.instruction


def test_extensions_vary_in_shape() -> None:
    """Distinct instruction shapes (literals masked) over every operator's draws: more than
    the one sentence template per operator of the chores."""
    parent = table_parent()
    texts = [
        op.extend(parent, RewriteContext(2, random.Random(f"{op.name}:{i}"))).text
        for op in OPERATORS
        for i in range(DRAWS)
    ]
    shapes = {shape(t) for t in texts}
    assert len(shapes) >= 3 * len(OPERATORS), len(shapes)
    assert shape("Write `/app/a_r2.json` with 12 rows of `x`.") == shape(
        'Write `/b.txt` with 3.5 rows of "y".'
    )
    json.dumps(sorted(shapes))  # printable
