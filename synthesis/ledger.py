"""The synthesis ledger in the warehouse: what resume reads back, and the rows a step writes.

Reads go through a fresh snapshot each time (cheap), so a resumed run sees exactly what the
killed run committed. Each candidate is written by ONE `record_synthesis` call (its task,
trials, candidate row and, when accepted, its profile), so it is either fully there or absent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from synthesis.instruction import stages_from_json
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
        task_hash=profile.task_hash,
        ok=profile.ok,
        detail=profile.detail,
        outputs_json=outputs,
        assertion_s_json=json.dumps(profile.assertion_s),
        assertions=profile.assertions,
        nop_passed=profile.nop_passed,
    )


def _profile(row: dict) -> TaskProfile:
    outputs = [OutputFile.model_validate(o) for o in json.loads(row["outputs_json"])]
    wd = outputs[0].path[: -len(outputs[0].rel) - 1] if outputs else "/app"
    return TaskProfile(
        task_hash=row["task_hash"],
        workdir=wd,
        ok=row["ok"],
        detail=row["detail"],
        outputs=outputs,
        assertion_s=json.loads(row.get("assertion_s_json") or "{}"),
        assertions=row.get("assertions"),
        nop_passed=row.get("nop_passed"),
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


def pool_parents(store: Store, campaign: str, before_round: int) -> list[Parent]:
    """Every task the campaign accepted in rounds < `before_round`, rebuilt from its stored
    bundle, with its profile, chain, stages and the root seed's instruction (the core)."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            """
            SELECT c.candidate_hash, c.chain, c.stages_json, t.bundle,
                   p.task_hash, p.ok, p.detail, p.outputs_json, p.assertion_s_json,
                   p.assertions, p.nop_passed,
                   r.bundle AS root_bundle, r.content_hash AS root_hash
            FROM synth_candidates c
            JOIN tasks t ON t.content_hash = c.candidate_hash
            JOIN synth_profiles p ON p.task_hash = c.candidate_hash
            LEFT JOIN tasks r ON r.content_hash = c.root_seed
            WHERE c.campaign = ? AND c.round < ? AND c.status = 'accepted'
            ORDER BY c.candidate_hash
            """,
            [campaign, before_round],
        )
    out = []
    for r in rows:
        task = task_from_bundle(_bundle(r["bundle"]), expected_hash=r["candidate_hash"])
        root = (
            task_from_bundle(_bundle(r["root_bundle"]), expected_hash=r["root_hash"])
            if r["root_bundle"] is not None
            else None
        )
        out.append(
            Parent(
                task=task,
                profile=_profile(r),
                chain=tuple(r["chain"]),
                core=root.instruction if root else None,
                core_title=root.name if root else None,
                stages=stages_from_json(r["stages_json"]),
            )
        )
    return out


_NO_ROUND_LIMIT = 2**31 - 1


def accepted_descendants(
    store: Store, campaign: str, before_round: int = _NO_ROUND_LIMIT
) -> dict[str, int]:
    """Root seed hash -> accepted tasks of the campaign descending from it (rounds before
    `before_round`; all by default)."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT root_seed, count(*) AS n FROM synth_candidates WHERE campaign = ? "
            "AND status = 'accepted' AND round < ? GROUP BY root_seed",
            [campaign, before_round],
        )
    return {r["root_seed"]: r["n"] for r in rows}


def accepted_children(
    store: Store, campaign: str, before_round: int = _NO_ROUND_LIMIT
) -> dict[str, int]:
    """Parent hash -> accepted children in the campaign (rounds before `before_round`)."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT parent_hash, count(*) AS n FROM synth_candidates WHERE campaign = ? "
            "AND status = 'accepted' AND round < ? GROUP BY parent_hash",
            [campaign, before_round],
        )
    return {r["parent_hash"]: r["n"] for r in rows}


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
