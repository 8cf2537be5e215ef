"""The warehouse tables: the single source of truth for their columns, types and keys.

Every Parquet part of a table is written with exactly `TABLES[name].schema`; readers add any
column a part lacks as NULL, so a migration that only adds nullable columns rewrites nothing.
`key` names the columns that identify a row: the store never holds two rows with the same key
(the first write wins; see `warehouse.store`).

Bump `SCHEMA_VERSION` whenever a table changes, and add the step to `warehouse.migrations`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 2

TIMESTAMP = pa.timestamp("us", tz="UTC")
# One audit finding (see audit.verdict.Finding).
FINDING = pa.struct(
    [
        pa.field("code", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("item", pa.string(), nullable=False),
        pa.field("evidence", pa.string(), nullable=False),
    ]
)

# One outcome of a reference verdict (see tasks.results.ReferenceVerdict).
REFERENCE_OUTCOME = pa.struct(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class TableSpec:
    """One table: its name (also its directory under the store), schema and key columns."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    doc: str
    # Name columns (pool names) that SQL readers compare case-blind and see lowercased, so
    # `WHERE pool = 'T1'` finds pool t1 instead of silently matching nothing.
    nocase: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [k for k in (*self.key, *self.nocase) if k not in self.schema.names]
        if missing:
            raise ValueError(f"columns {missing!r} not in the schema of {self.name!r}")


def _fields(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(name, typ, nullable=nullable) for name, typ, nullable in fields])


TASKS = TableSpec(
    name="tasks",
    key=("content_hash",),
    nocase=("origin_pool",),
    doc="One row per task version, keyed by the content hash of its whole bundle.",
    schema=_fields(
        ("content_hash", pa.string(), False),
        # First 16 hex digits of the hash as an integer: the join key of the lineage index.
        ("task_key", pa.uint64(), False),
        ("task_id", pa.string(), False),
        ("name", pa.string(), False),
        ("category", pa.string(), False),
        ("difficulty", pa.string(), False),
        ("tags", pa.list_(pa.string()), True),
        ("author", pa.string(), True),
        ("instruction_chars", pa.int32(), False),
        # Non-blank, non-comment lines of solution/solve.sh; NULL for a solution-less task.
        ("solution_steps", pa.int32(), True),
        ("assertion_count", pa.int32(), True),
        ("solution_less", pa.bool_(), False),
        ("binary_verifier", pa.bool_(), False),
        # Lineage, as declared in the task's own [t1.lineage] table.
        ("parents", pa.list_(pa.string()), False),
        ("parent_keys", pa.list_(pa.uint64()), False),
        ("root_seed", pa.string(), True),
        ("round", pa.int32(), False),
        ("operator", pa.string(), True),
        ("family", pa.string(), True),
        # The pool the recording stage named, else the lineage's source_pool.
        ("origin_pool", pa.string(), False),
        # The Harbor bundle itself: {relative path: bytes}; exports need nothing else.
        ("bundle", pa.map_(pa.string(), pa.binary()), False),
        ("bundle_bytes", pa.int64(), False),
        ("recorded_at", TIMESTAMP, False),
        # Schema 2 (audit v2): where an imported task was read from (a directory), if known.
        ("source", pa.string(), True),
    ),
)

TRIALS = TableSpec(
    name="trials",
    key=("trial_id",),
    doc="One row per sandbox trial of one task by one agent.",
    schema=_fields(
        ("trial_id", pa.string(), False),
        ("task_hash", pa.string(), False),
        ("task_id", pa.string(), False),
        ("agent", pa.string(), False),
        ("backend", pa.string(), False),
        ("started_at", TIMESTAMP, False),
        ("environment_s", pa.float64(), False),
        ("agent_s", pa.float64(), False),
        ("verifier_s", pa.float64(), False),
        ("total_s", pa.float64(), False),
        ("failure_mode", pa.string(), False),
        ("failure_detail", pa.string(), False),
        ("report_source", pa.string(), False),
        ("reward", pa.float64(), True),
        ("parse_error", pa.string(), True),
        ("assertions_passed", pa.int32(), False),
        ("assertions_total", pa.int32(), False),
        ("resolved", pa.bool_(), False),
        ("agent_exit_code", pa.int32(), True),
        ("verifier_exit_code", pa.int32(), True),
        ("verifier_output", pa.string(), False),
        ("recorded_at", TIMESTAMP, False),
    ),
)

ASSERTION_RESULTS = TableSpec(
    name="assertion_results",
    key=("trial_id", "name"),
    doc="One row per assertion per trial; `position` keeps the verifier's order.",
    schema=_fields(
        ("trial_id", pa.string(), False),
        ("name", pa.string(), False),
        ("position", pa.int32(), False),
        ("task_hash", pa.string(), False),
        ("status", pa.string(), False),
        ("ok", pa.bool_(), False),
        ("message", pa.string(), False),
        ("duration_s", pa.float64(), False),
        ("recorded_at", TIMESTAMP, False),
    ),
)

AUDITS = TableSpec(
    name="audits",
    key=("task_hash", "judge", "audit_version"),
    doc="One row per (task, judge, audit version): scores per dimension, verdict, reasons.",
    schema=_fields(
        ("task_hash", pa.string(), False),
        ("judge", pa.string(), False),
        ("audit_version", pa.string(), False),
        ("scores", pa.map_(pa.string(), pa.float64()), False),
        ("verdict", pa.string(), False),
        ("reasons", pa.list_(pa.string()), False),
        ("audited_at", TIMESTAMP, False),
        ("recorded_at", TIMESTAMP, False),
        # Schema 2 (audit v2): typed findings (code, source, item, evidence); `reasons` stays
        # human-readable text and is never parsed.
        ("findings", pa.list_(FINDING), True),
        # Added within schema 2 (nullable, no migration: readers fill NULL): the exec judge's
        # reference verdict, the outcomes the reference solution earned (name, status), which
        # the trainer pays a trial against; NULL when the oracle did not resolve the task.
        ("reference", pa.list_(REFERENCE_OUTCOME), True),
    ),
)

POOL_MEMBERS = TableSpec(
    name="pool_members",
    key=("pool", "pool_version", "task_hash"),
    nocase=("pool",),
    doc="Membership of a task in one version of a pool; rank 1 is the best.",
    schema=_fields(
        ("pool", pa.string(), False),
        ("pool_version", pa.int32(), False),
        ("task_hash", pa.string(), False),
        ("rank", pa.int32(), False),
        ("score", pa.float64(), True),
        ("recorded_at", TIMESTAMP, False),
        # Additive (provenance): the audit version whose decisions selected this version
        # (T1); NULL for pools no audit selects and for versions recorded before.
        ("audit_version", pa.string(), True),
    ),
)

TRAJECTORIES = TableSpec(
    name="trajectories",
    key=("campaign", "step", "task_hash", "sample"),
    doc="One row per training rollout: `sample` numbers the rollouts of a task in a step.",
    schema=_fields(
        ("campaign", pa.string(), False),
        ("step", pa.int64(), False),
        ("task_hash", pa.string(), False),
        ("sample", pa.int32(), False),
        ("weight_version", pa.int64(), False),
        ("reward", pa.float64(), False),
        ("assertions_passed", pa.int32(), False),
        ("assertions_total", pa.int32(), False),
        ("turns", pa.int32(), False),
        ("tokens", pa.int64(), False),
        ("failure_mode", pa.string(), False),
        ("recorded_at", TIMESTAMP, False),
        # v2 (training): newest weight version among the trial's turns (`weight_version` is the
        # oldest), versions the trainer was ahead of the oldest turn, what the step did with the
        # trial (admitted / cancelled / infrastructure / stale / untrainable), trial wall time.
        ("weight_version_max", pa.int64(), True),
        ("staleness", pa.int32(), True),
        ("status", pa.string(), True),
        ("trial_seconds", pa.float64(), True),
    ),
)

EVALUATIONS = TableSpec(
    name="evaluations",
    key=("campaign", "checkpoint", "benchmark", "task_hash", "attempt"),
    doc="One row per evaluated (checkpoint, benchmark task, attempt).",
    schema=_fields(
        ("campaign", pa.string(), False),
        ("checkpoint", pa.string(), False),
        ("benchmark", pa.string(), False),
        ("task_hash", pa.string(), False),
        ("attempt", pa.int32(), False),
        ("task_id", pa.string(), False),
        ("resolved", pa.bool_(), False),
        ("dense_score", pa.float64(), False),
        ("category", pa.string(), False),
        ("recorded_at", TIMESTAMP, False),
        # v2 (training): assertions of the task, the trial's failure mode (an infrastructure
        # failure is excluded from resolved % and dense score), the weight version evaluated.
        ("assertions_total", pa.int32(), True),
        ("failure_mode", pa.string(), True),
        ("weight_version", pa.int64(), True),
    ),
)

CAMPAIGNS = TableSpec(
    name="campaigns",
    key=("run_id", "started_at", "status"),
    nocase=("pool",),
    doc="One row when a training campaign run starts (status 'started') and one when it ends "
    "('finished' or 'failed'); `evaluations.campaign` and `trajectories.campaign` hold the run "
    "id. The view `campaign_runs` gives one row per start with its outcome.",
    schema=_fields(
        ("run_id", pa.string(), False),
        # When this start of the run began (a resumed run has one start per resume); the end
        # row repeats it, so a start and its end share (run_id, started_at).
        ("started_at", TIMESTAMP, False),
        ("status", pa.string(), False),  # started | finished | failed
        ("ended_at", TIMESTAMP, True),
        ("pool", pa.string(), False),
        ("pool_version", pa.int32(), False),
        ("audit_version", pa.string(), True),
        ("preset", pa.string(), False),
        # sha256 of the run's config without its run id and resume path: two runs with the
        # same settings share it.
        ("config_hash", pa.string(), False),
        ("steps", pa.int32(), False),
        ("prefect_flow_run_id", pa.string(), True),
        ("dagster_run_id", pa.string(), True),
        ("resumed_from", pa.string(), True),
        ("detail", pa.string(), True),  # why a failed run failed (its error, one line)
        ("recorded_at", TIMESTAMP, False),
    ),
)

SYNTH_CANDIDATES = TableSpec(
    name="synth_candidates",
    key=("campaign", "candidate_hash"),
    doc="One row per synthesis candidate: its assignment, verdict with reason, horizon metrics.",
    schema=_fields(
        ("campaign", pa.string(), False),
        ("candidate_hash", pa.string(), False),
        # "<round>:<parent hash>:<operator>": resume finds a candidate by its assignment.
        ("assignment", pa.string(), False),
        ("round", pa.int32(), False),
        ("slot", pa.int32(), False),
        ("parent_hash", pa.string(), False),
        ("root_seed", pa.string(), False),
        ("operator", pa.string(), False),
        ("family", pa.string(), False),
        # Operators applied from the root seed to this candidate, oldest first.
        ("chain", pa.list_(pa.string()), False),
        ("status", pa.string(), False),  # accepted | discarded
        ("reason", pa.string(), False),  # "accepted" or the discard reason
        ("detail", pa.string(), False),
        ("repairs", pa.list_(pa.string()), False),
        ("trial_ids", pa.list_(pa.string()), False),
        ("new_assertions", pa.list_(pa.string()), False),
        ("solution_steps", pa.int32(), False),
        ("assertion_count", pa.int32(), False),
        ("instruction_chars", pa.int32(), False),
        ("decontam_score", pa.float64(), True),
        ("decontam_nearest", pa.string(), True),
        ("synthesis_s", pa.float64(), False),
        ("sandbox_s", pa.float64(), False),
        ("recorded_at", TIMESTAMP, False),
        # Schema 2 (synthesis v2), all nullable: the workflow's stages (JSON), what a discard
        # reason is about (literals, assertion names), the free-reward and dependency
        # measures, instruction coverage, and difficulty beyond line counts.
        ("stages_json", pa.string(), True),
        ("offending", pa.list_(pa.string()), True),
        ("dependency_ok", pa.bool_(), True),
        ("nop_share", pa.float64(), True),
        ("ext_only_share", pa.float64(), True),
        ("free_reward_share", pa.float64(), True),
        ("coverage", pa.float64(), True),
        ("uncovered", pa.list_(pa.string()), True),
        ("distinct_tools", pa.int32(), True),
        ("files_touched", pa.int32(), True),
        ("dependency_depth", pa.int32(), True),
        ("reference_reward", pa.float64(), True),
        # Added within schema 2 (nullable, no migration: readers fill NULL): the data-flow
        # evidence behind `dependency_ok` (new assertions that fail / pass / could not tell
        # once the consumed files were perturbed before the new steps and restored after
        # them, and the files perturbed), the share the new steps alone earn beyond their own
        # assertions, the share the parent's solution alone earns, and the chain depth
        # (rewrites from the root seed).
        ("flow_dependent", pa.list_(pa.string()), True),
        ("flow_independent", pa.list_(pa.string()), True),
        ("flow_inconclusive", pa.list_(pa.string()), True),
        ("flow_perturbed", pa.list_(pa.string()), True),
        ("ext_only_free_share", pa.float64(), True),
        ("parent_solution_share", pa.float64(), True),
        ("chain_depth", pa.int32(), True),
        # Added within schema 2 (issue 33): new assertions a scripted hack earned after the
        # parent's solution (counted independent: `flow_dependent` excludes them).
        ("flow_hacked", pa.list_(pa.string()), True),
    ),
)

SYNTH_ROUNDS = TableSpec(
    name="synth_rounds",
    key=("campaign", "round"),
    doc="One row per completed synthesis round; its presence marks the round complete.",
    schema=_fields(
        ("campaign", pa.string(), False),
        ("round", pa.int32(), False),
        ("parents", pa.int32(), False),
        ("candidates", pa.int32(), False),
        ("accepted", pa.int32(), False),
        ("discarded", pa.int32(), False),
        ("discard_reasons", pa.map_(pa.string(), pa.int32()), False),
        ("mean_solution_steps", pa.float64(), True),
        ("mean_assertions", pa.float64(), True),
        ("mean_instruction_chars", pa.float64(), True),
        ("synthesis_s", pa.float64(), False),
        ("sandbox_s", pa.float64(), False),
        ("store_s", pa.float64(), False),
        ("wall_s", pa.float64(), False),
        ("config_json", pa.string(), False),
        ("recorded_at", TIMESTAMP, False),
        # Schema 2 (synthesis v2), all nullable; shares are over the round's accepted tasks.
        ("dependency_ok_share", pa.float64(), True),
        ("mean_free_reward_share", pa.float64(), True),
        ("max_free_reward_share", pa.float64(), True),
        ("coverage_share", pa.float64(), True),
        ("seeds_with_descendants", pa.int32(), True),
        ("mean_distinct_tools", pa.float64(), True),
        ("mean_files_touched", pa.float64(), True),
        ("mean_dependency_depth", pa.float64(), True),
        ("reference_sampled", pa.int32(), True),
        ("reference_pass_rate", pa.float64(), True),
        # Added within schema 2 (nullable, no migration): over the round's accepted tasks,
        # the share of the child's reward the parent's solution alone earns (mean, max), the
        # chain depth (mean, max), and the discards for a missing data-flow dependency.
        ("mean_parent_solution_share", pa.float64(), True),
        ("max_parent_solution_share", pa.float64(), True),
        ("mean_chain_depth", pa.float64(), True),
        ("max_chain_depth", pa.int32(), True),
        ("dependency_rejects", pa.int32(), True),
    ),
)

SYNTH_PROFILES = TableSpec(
    name="synth_profiles",
    key=("task_hash",),
    doc="What a task's reference solution writes (observed in a sandbox), for synthesis.",
    schema=_fields(
        ("task_hash", pa.string(), False),
        ("ok", pa.bool_(), False),
        ("detail", pa.string(), False),
        ("outputs_json", pa.string(), False),
        ("recorded_at", TIMESTAMP, False),
        # Schema 2, nullable: per-assertion seconds of the oracle run (JSON), the assertion
        # count and how many of them a nop agent passes.
        ("assertion_s_json", pa.string(), True),
        ("assertions", pa.int32(), True),
        ("nop_passed", pa.int32(), True),
    ),
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TASKS,
        TRIALS,
        ASSERTION_RESULTS,
        AUDITS,
        POOL_MEMBERS,
        TRAJECTORIES,
        EVALUATIONS,
        CAMPAIGNS,
        SYNTH_CANDIDATES,
        SYNTH_ROUNDS,
        SYNTH_PROFILES,
    )
}


def table_spec(name: str) -> TableSpec:
    """The spec of table `name`; ValueError naming the known tables otherwise."""
    try:
        return TABLES[name]
    except KeyError:
        raise ValueError(f"unknown warehouse table {name!r}; known: {sorted(TABLES)}") from None


def task_key(content_hash: str) -> int:
    """The lineage join key of a content hash: its first 16 hex digits as an unsigned int.

    Two distinct hashes share a key with probability about n^2 / 2^65 (~3e-8 at a million
    tasks); a collision would merge two tasks in lineage walks, so the `task_key_collisions`
    view lists any (it should always be empty).
    """
    if len(content_hash) < 16:
        raise ValueError(f"content hash must have at least 16 hex digits, got {content_hash!r}")
    try:
        return int(content_hash[:16], 16)
    except ValueError:
        raise ValueError(f"content hash must be hexadecimal, got {content_hash!r}") from None
