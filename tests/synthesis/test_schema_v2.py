"""Schema 2 adds nullable synthesis columns: a version-1 store (parts without them) migrates
without a rewrite and reads them back as NULL; rows written now keep them."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from synthesis import ledger
from warehouse import migrations, schema
from warehouse.recording import record_synthesis
from warehouse.records import SynthCandidateRecord, SynthProfileRecord, SynthRoundRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Store

V2_CANDIDATE_COLUMNS = [
    "stages_json", "offending", "dependency_ok", "nop_share", "ext_only_share",
    "free_reward_share", "coverage", "uncovered", "distinct_tools", "files_touched",
    "dependency_depth", "reference_reward",
]  # fmt: skip


def row(**kw) -> SynthCandidateRecord:
    base = dict(
        campaign="c", candidate_hash="a" * 64, assignment="1:x:op", round=1, slot=0,
        parent_hash="b" * 64, root_seed="b" * 64, operator="op", family="f", status="accepted",
        reason="accepted", solution_steps=3, assertion_count=2, instruction_chars=10,
    )  # fmt: skip
    return SynthCandidateRecord(**(base | kw))


def test_a_v1_store_migrates_and_reads_new_columns_as_null(tmp_path) -> None:
    store = Store.open(tmp_path, create=True)
    record_synthesis(store, rows=[row(), SynthProfileRecord(task_hash="a" * 64, ok=True)])
    # Make it a version-1 store: strip the schema-2 columns from every part.
    for table, drop in (
        ("synth_candidates", V2_CANDIDATE_COLUMNS),
        ("synth_profiles", ["assertion_s_json", "assertions", "nop_passed"]),
    ):
        for part in store.read_manifest().parts(table):
            path = store.part_path(table, part.file)
            t = pq.read_table(path)
            pq.write_table(t.drop_columns([c for c in drop if c in t.column_names]), path)
            assert not set(drop) & set(pq.read_table(path).column_names)
    meta = json.loads(store.meta_path.read_text())
    meta["schema_version"] = 1
    store.meta_path.write_text(json.dumps(meta))

    assert migrations.migrate(store) == (1, schema.SCHEMA_VERSION)
    (got,) = ledger.candidates(store, "c", 1).values()
    assert got.candidate_hash == "a" * 64 and got.dependency_ok is None and got.coverage is None
    profile = ledger.profiles(store, ["a" * 64])["a" * 64]
    assert profile.nop_passed is None and profile.assertion_s == {}
    # New rows carry the new columns.
    new_row = row(candidate_hash="c" * 64, assignment="1:y:op", dependency_ok=True,
                  free_reward_share=0.1, coverage=1.0)  # fmt: skip
    record_synthesis(store, rows=[new_row])
    new = ledger.candidates(store, "c", 1)["1:y:op"]
    assert new.dependency_ok is True and new.free_reward_share == 0.1 and new.coverage == 1.0


FLOW_CANDIDATE_COLUMNS = [
    "flow_dependent", "flow_independent", "flow_inconclusive", "flow_perturbed",
    "ext_only_free_share", "parent_solution_share", "chain_depth", "flow_hacked",
]  # fmt: skip
FLOW_ROUND_COLUMNS = [
    "mean_parent_solution_share", "max_parent_solution_share", "mean_chain_depth",
    "max_chain_depth", "dependency_rejects",
]  # fmt: skip


def test_the_data_flow_columns_are_additive_within_schema_2(tmp_path) -> None:
    """Parts written before the data-flow columns existed read them as NULL, with no
    migration and no version change; rows written now keep them."""
    store = Store.open(tmp_path, create=True)
    rounds = SynthRoundRecord(campaign="c", round=1, parents=1, candidates=1, accepted=1,
                              discarded=0)  # fmt: skip
    record_synthesis(store, rows=[row(), rounds])
    for table, drop in (
        ("synth_candidates", FLOW_CANDIDATE_COLUMNS),
        ("synth_rounds", FLOW_ROUND_COLUMNS),
    ):
        for part in store.read_manifest().parts(table):
            path = store.part_path(table, part.file)
            t = pq.read_table(path)
            pq.write_table(t.drop_columns(drop), path)
    assert schema.SCHEMA_VERSION == 2 and migrations.migrate(store) == (2, 2)
    (got,) = ledger.candidates(store, "c", 1).values()
    assert got.flow_dependent is None and got.chain_depth is None
    assert ledger.round_rows(store, "c")[1].max_chain_depth is None
    new_row = row(candidate_hash="c" * 64, assignment="1:y:op", dependency_ok=True,
                  flow_dependent=["test_r1_copy"], flow_independent=[], flow_inconclusive=[],
                  flow_perturbed=["/app/out.txt"], parent_solution_share=0.5,
                  chain_depth=3, flow_hacked=["test_r1_status"])  # fmt: skip
    record_synthesis(store, rows=[new_row])
    new = ledger.candidates(store, "c", 1)["1:y:op"]
    assert new.flow_dependent == ["test_r1_copy"] and new.flow_perturbed == ["/app/out.txt"]
    assert new.parent_solution_share == 0.5 and new.chain_depth == 3
    assert new.flow_hacked == ["test_r1_status"] and got.flow_hacked is None
    with Snapshot.open(store, with_lineage=False) as snap:
        (r,) = snap.rows(
            "SELECT count(*) FILTER (WHERE flow_dependent IS NULL) AS old, "
            "max(chain_depth) AS depth FROM synth_candidates"
        )
    assert r == {"old": 1, "depth": 3}
