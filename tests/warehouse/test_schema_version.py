"""Schema version: a store of another version is refused with what to do, or migrated."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from warehouse import SchemaVersionError, Store, migrations, open_snapshot, record_tasks, schema


def _set_version(store_path: Path, version: int) -> None:
    meta_path = store_path / "_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["schema_version"] = version
    meta_path.write_text(json.dumps(meta))


def test_a_newer_store_is_refused_with_an_upgrade_message(store_path: Path, task_factory) -> None:
    record_tasks(store_path, [task_factory("a")])
    _set_version(store_path, schema.SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="upgrade t1-forge"):
        open_snapshot(store_path)
    with pytest.raises(SchemaVersionError, match="newer"):
        record_tasks(store_path, [task_factory("b")])
    with pytest.raises(SchemaVersionError, match="upgrade t1-forge"):
        migrations.migrate(Store(store_path))


def test_an_older_store_is_refused_until_migrated(
    store_path: Path, task_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at version v opened by code at v + 1 (a pretend step that upper-cases names)."""
    v = schema.SCHEMA_VERSION
    record_tasks(store_path, [task_factory("a"), task_factory("b")])
    old = open_snapshot(store_path)

    def step(store: Store, manifest):
        parts = manifest.parts("tasks")
        tables = [pq.read_table(store.part_path("tasks", p.file)) for p in parts]
        merged = pa.concat_tables(tables)
        upper = merged.set_column(
            merged.schema.get_field_index("name"), "name", pc.utf8_upper(merged.column("name"))
        )
        return store.replace_parts(manifest, "tasks", parts, upper)

    monkeypatch.setattr(schema, "SCHEMA_VERSION", v + 1)
    monkeypatch.setitem(migrations.MIGRATIONS, v, step)

    with pytest.raises(SchemaVersionError, match="t1 warehouse migrate --store") as err:
        open_snapshot(store_path)
    assert f"schema version {v}" in str(err.value)
    with pytest.raises(SchemaVersionError):
        record_tasks(store_path, [task_factory("c")])  # writers are refused too

    assert migrations.migrate(Store(store_path)) == (v, v + 1)
    with open_snapshot(store_path) as snap:
        assert snap.sql("SELECT name FROM tasks ORDER BY name").fetchall() == [
            ("TASK A",),
            ("TASK B",),
        ]
    assert json.loads((store_path / "_meta.json").read_text())["schema_version"] == v + 1
    # A snapshot opened before the migration still reads the old parts.
    assert old.sql("SELECT count(*) FROM tasks").fetchone() == (2,)
    old.close()
    assert migrations.migrate(Store(store_path)) == (v + 1, v + 1)  # nothing left to do


def test_a_missing_migration_step_says_so(
    store_path: Path, task_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    v = schema.SCHEMA_VERSION
    record_tasks(store_path, [task_factory("a")])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", v + 2)
    with pytest.raises(SchemaVersionError, match=f"no migration from warehouse schema version {v}"):
        migrations.migrate(Store(store_path))
    assert json.loads((store_path / "_meta.json").read_text())["schema_version"] == v


def test_v1_trajectories_read_the_v2_training_columns_as_null(store_path: Path) -> None:
    """1 -> 2 only adds nullable columns: a v1 store migrates without a rewrite, old rows read
    NULL in the new columns and new rows carry them."""
    from warehouse import TrajectoryRecord, record_trajectories

    h = "a" * 64
    old = TrajectoryRecord(
        campaign="c", step=0, task_hash=h, weight_version=0, reward=1.0,
        assertions_passed=1, assertions_total=2, turns=1, tokens=5,
    )  # fmt: skip
    record_trajectories(store_path, [old])
    _set_version(store_path, 1)
    assert migrations.migrate(Store(store_path)) == (1, schema.SCHEMA_VERSION)
    new = old.model_copy(update={"step": 1, "status": "admitted", "staleness": 1})
    record_trajectories(store_path, [new])
    with open_snapshot(store_path) as snap:
        rows = snap.rows("SELECT step, status, staleness FROM trajectories ORDER BY step")
    assert [(r["step"], r["status"], r["staleness"]) for r in rows] == [
        (0, None, None),
        (1, "admitted", 1),
    ]


def test_a_version_1_store_migrates_to_audit_findings_and_reads_them_as_empty(
    store_path: Path, task_factory
) -> None:
    """Schema 2 added nullable columns only (audits.findings, tasks.source): a v1 store
    migrates without rewriting a part, and its old audit rows read back with no findings."""
    from warehouse import record_audits
    from warehouse.records import AuditFinding, AuditRecord

    task = task_factory("a")
    record_tasks(store_path, [task])
    old = AuditRecord(task_hash=task.content_hash, judge="exec", audit_version="x", verdict="ok")
    record_audits(store_path, [old])
    _set_version(store_path, 1)
    assert migrations.migrate(Store(store_path)) == (1, schema.SCHEMA_VERSION)
    new = AuditRecord(
        task_hash=task.content_hash,
        judge="exec",
        audit_version="y",
        verdict="ok",
        findings=[AuditFinding(code="c", source="static", item="i", evidence="e")],
    )
    record_audits(store_path, [new])
    with open_snapshot(store_path) as snap:
        rows = {r["audit_version"]: r for r in snap.rows("SELECT * FROM audits")}
    assert AuditRecord.from_row(rows["y"]).findings == new.findings
    assert AuditRecord.from_row(rows["x"]).findings == []
