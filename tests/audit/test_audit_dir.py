"""`t1 audit DIR` and `t1 task import --record` on directories in both layouts: the funnel is
printed, dense verifiers stay dense, the source is recorded, rejects are written with typed
findings, and bad input is a one-line error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import _register, app
from tasks.harbor import write_harbor
from tests.audit.planted import base_task, hidden_requirement_task
from warehouse import open_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TB = sorted(p for p in (FIXTURES / "terminal-bench").iterdir() if p.is_dir())
LOADED = 2 + len(TB)  # our two Harbor tasks and the Terminal-Bench fixtures
runner = CliRunner()
_register()


def t1(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A mixed directory: two Harbor tasks of ours, the Terminal-Bench fixtures, a malformed one."""
    root = tmp_path / "corpus"
    write_harbor(base_task("dir-clean"), root / "dir-clean")
    write_harbor(hidden_requirement_task(), root / "dir-hidden")
    for d in TB:
        shutil.copytree(d, root / d.name)
    shutil.copytree(FIXTURES / "malformed" / "bad-toml", root / "bad-toml")
    return root


def test_static_audit_of_a_directory_prints_the_funnel_and_records_the_source(corpus, tmp_path):
    store, out = tmp_path / "store", tmp_path / "out"
    r = t1("audit", str(corpus), "--static", "--store", str(store), "--out", str(out))
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"directories │ {LOADED + 1}" in text and f"loaded {LOADED}, malformed 1" in text
    assert "precheck" in text and f"{LOADED} per-assertion verifiers, 0 reward-only" in text
    with open_snapshot(store) as snap:
        rows = snap.rows("SELECT task_id, source, binary_verifier FROM tasks")
    assert {r["source"] for r in rows} == {str(corpus.resolve())}
    assert not any(r["binary_verifier"] for r in rows)
    rejects = [json.loads(ln) for ln in (out / "rejects.jsonl").read_text().splitlines()]
    hidden = [x for x in rejects if x["task_id"] == "audit-hidden"]
    codes = {f["code"] for f in hidden[0]["findings"]}
    assert "hidden_requirement" in codes  # read statically; the other tasks are not rejected
    items = {f["item"] for f in hidden[0]["findings"] if f["code"] == "hidden_requirement"}
    assert items == {"/app/report/summary.txt", "status: complete"}


def test_one_task_directory_and_a_sample(corpus, tmp_path):
    store = tmp_path / "store"
    one = t1("audit", str(corpus / "dir-clean"), "--static", "--store", str(store),
             "--out", str(tmp_path / "o1"))  # fmt: skip
    assert one.exit_code == 0 and "directories │ 1 │" in " ".join(one.output.split()), one.output
    some = t1("audit", "dir", str(corpus), "--static", "--sample", "2", "--seed", "3",
              "--store", str(store), "--out", str(tmp_path / "o2"))  # fmt: skip
    assert some.exit_code == 0 and "sampled 2" in some.output, some.output


def test_a_directory_where_no_task_loads_exits_1(tmp_path):
    """Regression (issue 36): `t1 audit DIR` exited 0 when every task was malformed."""
    root = tmp_path / "corpus"
    for name in ("bad-toml", "no-tests", "missing-instruction"):
        shutil.copytree(FIXTURES / "malformed" / name, root / name)
    r = t1("audit", str(root), "--static", "--store", str(tmp_path / "s"),
           "--out", str(tmp_path / "o"))  # fmt: skip
    assert r.exit_code == 1, r.output
    assert f"error: no task of {root} loads: 3 malformed" in " ".join(r.output.split())


def test_bad_directory_is_a_one_line_error(tmp_path):
    r = t1("audit", str(tmp_path / "nowhere"), "--static", "--store", str(tmp_path / "s"))
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "nowhere" in lines[0] and "not a directory" in lines[0]


def test_task_import_record_records_tasks_with_their_source(corpus, tmp_path):
    store = tmp_path / "store"
    r = t1("task", "import", str(corpus), "--record", "--store", str(store))
    assert r.exit_code == 0 and f"recorded {LOADED} task(s)" in r.output, r.output
    with open_snapshot(store) as snap:
        rows = snap.rows("SELECT origin_pool, source FROM tasks")
    assert len(rows) == LOADED and {(r["origin_pool"], r["source"]) for r in rows} == {
        ("import", str(corpus.resolve()))
    }


@pytest.mark.sandbox
def test_audit_of_a_directory_with_trials(corpus, tmp_path):
    """The same directory with the local sandbox: the clean task is accepted, the planted
    hidden requirement is rejected (then repaired), and the Terminal-Bench fixtures' dense
    verifiers are measured per assertion."""
    store, out = tmp_path / "store", tmp_path / "out"
    r = t1("audit", str(corpus), "--backend", "local", "--reruns", "1", "--mutants", "2",
           "--store", str(store), "--out", str(out))  # fmt: skip
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "semantic" in text and "accepted" in text and "repaired 1" in text, r.output
