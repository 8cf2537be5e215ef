"""Imported ids survive every audit route. Regression: tasks read back from a pool were
rebuilt from their bundle alone, and a task whose task.toml has no `[t1] id` (any imported
Harbor or Terminal-Bench task: its id is its directory's name) came back as `task`, so
`t1 audit --pool tmax` recorded and reported every one of them as `task`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from audit.intake import read_corpus
from audit.pools import audit_candidates, import_tmax, recorded_tasks
from pipelines.cli import _register, app
from tasks.harbor import write_harbor
from tests.audit.planted import base_task, hidden_requirement_task
from warehouse import open_snapshot
from warehouse.recording import record_tasks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
runner = CliRunner()
_register()


def _corpus(root: Path) -> Path:
    """Terminal-Bench fixtures (ids from their directory names) and Harbor tasks of ours whose
    task.toml lost its `[t1] id` (as a public Harbor task has none)."""
    for d in sorted(p for p in (FIXTURES / "terminal-bench").iterdir() if p.is_dir()):
        shutil.copytree(d, root / d.name)
    for name, task in (("pool-clean", base_task()), ("pool-hidden", hidden_requirement_task())):
        write_harbor(task, root / name)
        toml = root / name / "task.toml"
        lines = toml.read_text().splitlines(keepends=True)
        toml.write_text("".join(ln for ln in lines if not ln.startswith("id = ")))
    return root


def test_pool_members_keep_their_imported_ids(tmp_path):
    root = _corpus(tmp_path / "corpus")
    intake = read_corpus(root)
    ids = {t.content_hash: t.id for t in intake.tasks}
    assert "pool-clean" in ids.values() and "task" not in ids.values()
    store = tmp_path / "store"
    pv, rejects = import_tmax(store, root)
    assert pv is not None and not rejects
    tasks, source = audit_candidates(store, "tmax")
    assert source == "pool tmax"
    assert {t.content_hash: t.id for t in tasks} == ids  # same hashes, same ids
    assert {t.content_hash: t.name for t in tasks} == {t.content_hash: t.name for t in intake.tasks}


def test_recorded_synthesis_output_keeps_its_ids(tmp_path):
    root = _corpus(tmp_path / "corpus")
    intake = read_corpus(root)
    store = tmp_path / "store"
    record_tasks(store, intake.tasks, pool="rst")
    back = recorded_tasks(store, ("rst",))
    assert sorted(t.id for t in back) == sorted(t.id for t in intake.tasks)


def test_t1_audit_pool_records_and_reports_the_imported_ids(tmp_path):
    root = _corpus(tmp_path / "corpus")
    store, out = tmp_path / "store", tmp_path / "out"
    r = runner.invoke(app, ["audit", "import-tmax", str(root), "--store", str(store)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app, ["audit", "--pool", "tmax", "--static", "--store", str(store), "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    rejects = [json.loads(ln) for ln in (out / "rejects.jsonl").read_text().splitlines()]
    assert rejects and "task" not in {x["task_id"] for x in rejects}
    assert "pool-hidden" in {x["task_id"] for x in rejects}  # rejected under its own id
    with open_snapshot(store) as snap:
        rows = snap.rows("SELECT DISTINCT task_id FROM tasks")
    assert "task" not in {row["task_id"] for row in rows}
