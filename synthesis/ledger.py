"""The synthesis ledger in the warehouse: what resume reads back, and the rows a step writes.

Reads go through a fresh snapshot each time (cheap), so a resumed run sees exactly what the
killed run committed. Each candidate is written by ONE `record_synthesis` call (its task,
trials, candidate row and, when accepted, its profile), so it is either fully there or absent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from synthesis.operators.extension import Parent, test_names
from synthesis.profile import OutputFile, TaskProfile
from tasks.model import Task
from warehouse.bundles import task_from_bundle
from warehouse.records import SynthCandidateRecord, SynthProfileRecord, SynthRoundRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Store

ACCEPTED, DISCARDED = "accepted", "discarded"


def placeholder_hash(assignment: str) -> str:
    """Candidate hash for a rewrite that produced no task (its row still needs a key)."""
    return hashlib.sha256(f"no-task:{assignment}".encode()).hexdigest()


def assertion_count(task: Task) -> int:
    """Top-level test functions of the verifier module (the assertions it reports)."""
    source = task.verifier.get("test_outputs.py", b"").decode("utf-8", "replace")
    try:
        return len(test_names(source))
    except SyntaxError:
        return 0


def profile_record(profile: TaskProfile) -> SynthProfileRecord:
    outputs = json.dumps([f.model_dump() for f in profile.outputs])
    return SynthProfileRecord(
        task_hash=profile.task_hash, ok=profile.ok, detail=profile.detail, outputs_json=outputs
    )


def _profile(row: dict) -> TaskProfile:
    outputs = [OutputFile.model_validate(o) for o in json.loads(row["outputs_json"])]
    wd = outputs[0].path[: -len(outputs[0].rel) - 1] if outputs else "/app"
    return TaskProfile(
        task_hash=row["task_hash"], workdir=wd, ok=row["ok"], detail=row["detail"], outputs=outputs
    )


def _bundle(value: object) -> dict[str, bytes]:
    """A stored `bundle` map (DuckDB returns a dict, or (key, value) pairs) as a dict."""
    return dict(value)  # type: ignore[call-overload]


def profiles(store: Store, hashes: Iterable[str]) -> dict[str, TaskProfile]:
    """Stored profiles of the given task hashes."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM synth_profiles WHERE task_hash IN (SELECT unnest(?))", [wanted]
        )
    return {r["task_hash"]: _profile(r) for r in rows}


def candidates(store: Store, campaign: str, round_: int) -> dict[str, SynthCandidateRecord]:
    """The round's candidate rows, by assignment key."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM synth_candidates WHERE campaign = ? AND round = ?", [campaign, round_]
        )
    return {r["assignment"]: SynthCandidateRecord.from_row(r) for r in rows}


def round_rows(store: Store, campaign: str) -> dict[int, SynthRoundRecord]:
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows("SELECT * FROM synth_rounds WHERE campaign = ?", [campaign])
    return {r["round"]: SynthRoundRecord.from_row(r) for r in rows}


def accepted_parents(store: Store, campaign: str, round_: int) -> list[Parent]:
    """The accepted tasks of a round, rebuilt from their stored bundles, with profiles."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            """
            SELECT c.candidate_hash, c.chain, t.bundle, p.task_hash, p.ok, p.detail,
                   p.outputs_json
            FROM synth_candidates c
            JOIN tasks t ON t.content_hash = c.candidate_hash
            JOIN synth_profiles p ON p.task_hash = c.candidate_hash
            WHERE c.campaign = ? AND c.round = ? AND c.status = 'accepted'
            ORDER BY c.candidate_hash
            """,
            [campaign, round_],
        )
    out = []
    for r in rows:
        task = task_from_bundle(_bundle(r["bundle"]), expected_hash=r["candidate_hash"])
        out.append(Parent(task=task, profile=_profile(r), chain=tuple(r["chain"])))
    return out


def accepted_without_passing_oracle(store: Store, campaign: str) -> list[str]:
    """Accepted candidates with no recorded oracle trial that resolved (should be none)."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            """
            SELECT c.candidate_hash FROM synth_candidates c
            WHERE c.campaign = ? AND c.status = 'accepted' AND NOT EXISTS (
                SELECT 1 FROM trials t WHERE t.task_hash = c.candidate_hash
                AND t.agent = 'oracle' AND t.resolved)
            ORDER BY c.candidate_hash
            """,
            [campaign],
        )
    return [r["candidate_hash"] for r in rows]


def validation_trial_counts(store: Store, campaign: str) -> dict[str, dict[str, int]]:
    """Trials of the campaign's candidates: {agent: {failure mode: count}}."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            """
            SELECT t.agent, t.failure_mode, count(*) AS n FROM trials t
            WHERE t.task_hash IN (SELECT candidate_hash FROM synth_candidates WHERE campaign = ?)
            GROUP BY ALL ORDER BY ALL
            """,
            [campaign],
        )
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        out.setdefault(r["agent"], {})[r["failure_mode"]] = r["n"]
    return out
