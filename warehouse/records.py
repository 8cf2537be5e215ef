"""Typed rows of the warehouse tables, and their conversion to and from Arrow rows.

Each record class mirrors one `warehouse.schema` table field for field (a test pins that).
Stages build records (or use the `*_from_*` builders for the `tasks/` types) and hand them to
`warehouse.recording`; readers turn query rows back into records with `from_row`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Self

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tasks.harbor import task_files
from tasks.model import Category, Difficulty, Task
from tasks.results import (
    AssertionStatus,
    FailureMode,
    ReferenceOutcome,
    ReportSource,
    TrialResult,
)
from warehouse.schema import (
    ASSERTION_RESULTS,
    AUDITS,
    CAMPAIGNS,
    EVALUATIONS,
    POOL_MEMBERS,
    SYNTH_CANDIDATES,
    SYNTH_PROFILES,
    SYNTH_ROUNDS,
    TASKS,
    TRAJECTORIES,
    TRIALS,
    TableSpec,
    task_key,
)

_HASH_RE = re.compile(r"^[0-9a-f]{64}$")


def _now() -> datetime:
    return datetime.now(UTC)


def check_hash(value: str) -> str:
    """A sha256 content hash: 64 lowercase hex digits. ValueError otherwise."""
    if not _HASH_RE.match(value):
        raise ValueError(f"expected a 64-hex-digit content hash, got {value!r}")
    return value


class Record(BaseModel):
    """A row of one warehouse table. `to_row` gives the Arrow row; `from_row` reads one back."""

    model_config = ConfigDict(extra="forbid")
    table: ClassVar[TableSpec]
    # Fields stored as Arrow maps: Python dicts here, lists of (key, value) pairs in Arrow.
    map_fields: ClassVar[tuple[str, ...]] = ()

    def to_row(self) -> dict[str, Any]:
        row = self.model_dump()
        for name in self.map_fields:
            row[name] = list(row[name].items())
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """Build from an Arrow/DuckDB row; extra columns (joins, views) are ignored."""
        data = {k: row[k] for k in cls.model_fields if k in row}
        for name in cls.map_fields:
            value = data.get(name)
            if value is not None and not isinstance(value, Mapping):
                data[name] = dict(value)
        return cls.model_validate(data)


def records_table(records: Iterable[Record], spec: TableSpec) -> pa.Table:
    """Arrow table of `records` with exactly `spec.schema`; ValueError on a foreign record."""
    rows = []
    for rec in records:
        if rec.table is not spec:
            raise ValueError(f"record for table {rec.table.name!r} given to {spec.name!r}: {rec!r}")
        rows.append(rec.to_row())
    return pa.Table.from_pylist(rows, schema=spec.schema)


class TaskRecord(Record):
    table: ClassVar[TableSpec] = TASKS
    map_fields: ClassVar[tuple[str, ...]] = ("bundle",)

    content_hash: str
    task_key: int
    task_id: str
    name: str
    category: Category
    difficulty: Difficulty
    tags: list[str] = Field(default_factory=list)
    author: str | None = None
    instruction_chars: int = Field(ge=0)
    solution_steps: int | None = None
    assertion_count: int | None = None
    solution_less: bool
    binary_verifier: bool
    parents: list[str] = Field(default_factory=list)
    parent_keys: list[int] = Field(default_factory=list)
    root_seed: str | None = None
    round: int = Field(0, ge=0)
    operator: str | None = None
    family: str | None = None
    origin_pool: str
    bundle: dict[str, bytes]
    bundle_bytes: int = Field(ge=0)
    recorded_at: datetime = Field(default_factory=_now)
    source: str | None = None

    @field_validator("content_hash")
    @classmethod
    def _check_hash(cls, v: str) -> str:
        return check_hash(v)

    @field_validator("parents")
    @classmethod
    def _check_parents(cls, v: list[str]) -> list[str]:
        for h in v:
            check_hash(h)
        return v


def solution_steps(task: Task) -> int | None:
    """Non-blank, non-comment lines of solution/solve.sh; None for a solution-less task."""
    if task.solution is None:
        return None
    script = task.solution.get("solve.sh", b"").decode("utf-8", errors="replace")
    return sum(
        1 for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


def task_record(
    task: Task,
    *,
    pool: str | None = None,
    assertion_count: int | None = None,
    recorded_at: datetime | None = None,
    source: str | None = None,
) -> TaskRecord:
    """The `tasks` row of `task`: lineage from its [t1.lineage], the bundle as written."""
    files = task_files(task)
    content_hash = task.content_hash
    parents = [check_hash(p) for p in task.lineage.parents]
    return TaskRecord(
        content_hash=content_hash,
        task_key=task_key(content_hash),
        task_id=task.id,
        name=task.name,
        category=task.category,
        difficulty=task.difficulty,
        tags=list(task.tags),
        author=task.author,
        instruction_chars=len(task.instruction),
        solution_steps=solution_steps(task),
        assertion_count=assertion_count,
        solution_less=task.solution_less,
        binary_verifier=task.binary_verifier,
        parents=parents,
        parent_keys=[task_key(p) for p in parents],
        root_seed=task.lineage.root_seed,
        round=task.lineage.round,
        operator=task.lineage.operator,
        family=task.lineage.family,
        origin_pool=pool if pool is not None else task.lineage.source_pool,
        bundle=files,
        bundle_bytes=sum(len(b) for b in files.values()),
        recorded_at=recorded_at or _now(),
        source=source,
    )


class TrialRecord(Record):
    table: ClassVar[TableSpec] = TRIALS

    trial_id: str
    task_hash: str
    task_id: str
    agent: str
    backend: str
    started_at: datetime
    environment_s: float = 0.0
    agent_s: float = 0.0
    verifier_s: float = 0.0
    total_s: float = 0.0
    failure_mode: FailureMode = FailureMode.NONE
    failure_detail: str = ""
    report_source: ReportSource = ReportSource.NONE
    reward: float | None = None
    parse_error: str | None = None
    assertions_passed: int = 0
    assertions_total: int = 0
    resolved: bool = False
    agent_exit_code: int | None = None
    verifier_exit_code: int | None = None
    verifier_output: str = ""
    recorded_at: datetime = Field(default_factory=_now)


class AssertionRecord(Record):
    table: ClassVar[TableSpec] = ASSERTION_RESULTS

    trial_id: str
    name: str
    position: int = Field(ge=0)
    task_hash: str
    status: AssertionStatus
    ok: bool
    message: str = ""
    duration_s: float = 0.0
    recorded_at: datetime = Field(default_factory=_now)


def trial_records(
    result: TrialResult, *, recorded_at: datetime | None = None
) -> tuple[TrialRecord, list[AssertionRecord]]:
    """The `trials` row of a trial result and its `assertion_results` rows."""
    at = recorded_at or _now()
    trial = TrialRecord(
        trial_id=result.trial_id,
        task_hash=result.task_hash,
        task_id=result.task_id,
        agent=result.agent,
        backend=result.backend,
        started_at=result.started_at,
        environment_s=result.environment_s,
        agent_s=result.agent_s,
        verifier_s=result.verifier_s,
        total_s=result.total_s,
        failure_mode=result.failure_mode,
        failure_detail=result.failure_detail,
        report_source=result.report.source,
        reward=result.report.reward,
        parse_error=result.report.parse_error,
        assertions_passed=result.passed,
        assertions_total=result.total,
        resolved=result.resolved,
        agent_exit_code=result.agent_exit_code,
        verifier_exit_code=result.verifier_exit_code,
        verifier_output=result.verifier_output,
        recorded_at=at,
    )
    assertions = [
        AssertionRecord(
            trial_id=result.trial_id,
            name=a.name,
            position=i,
            task_hash=result.task_hash,
            status=a.status,
            ok=a.ok,
            message=a.message,
            duration_s=a.duration_s,
            recorded_at=at,
        )
        for i, a in enumerate(result.assertions)
    ]
    return trial, assertions


class AuditFinding(BaseModel):
    """One typed finding of an audit row (the audit package gives the codes meaning)."""

    model_config = ConfigDict(extra="forbid")

    code: str
    source: str
    item: str = ""
    evidence: str = ""


class AuditRecord(Record):
    """One judge's audit of one task at one audit version (re-audits get a new version)."""

    table: ClassVar[TableSpec] = AUDITS
    map_fields: ClassVar[tuple[str, ...]] = ("scores",)

    task_hash: str
    judge: str
    audit_version: str
    scores: dict[str, float] = Field(default_factory=dict)
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    audited_at: datetime = Field(default_factory=_now)
    recorded_at: datetime = Field(default_factory=_now)
    findings: list[AuditFinding] = Field(default_factory=list)
    reference: list[ReferenceOutcome] | None = None
    """The exec judge's reference verdict (`tasks.results.ReferenceVerdict`); None otherwise."""

    @field_validator("task_hash")
    @classmethod
    def _check_hash(cls, v: str) -> str:
        return check_hash(v)

    @field_validator("findings", mode="before")
    @classmethod
    def _null_findings(cls, v: Any) -> Any:
        return [] if v is None else v  # rows written before schema 2


class PoolMemberRecord(Record):
    table: ClassVar[TableSpec] = POOL_MEMBERS

    pool: str = Field(min_length=1)
    pool_version: int = Field(ge=1)
    task_hash: str
    rank: int = Field(ge=1)
    score: float | None = None
    recorded_at: datetime = Field(default_factory=_now)
    audit_version: str | None = None

    @field_validator("task_hash")
    @classmethod
    def _check_hash(cls, v: str) -> str:
        return check_hash(v)


class TrajectoryRecord(Record):
    table: ClassVar[TableSpec] = TRAJECTORIES

    campaign: str
    step: int = Field(ge=0)
    task_hash: str
    sample: int = Field(0, ge=0)
    weight_version: int = Field(ge=0)
    reward: float
    assertions_passed: int = Field(ge=0)
    assertions_total: int = Field(ge=0)
    turns: int = Field(ge=0)
    tokens: int = Field(ge=0)
    failure_mode: FailureMode = FailureMode.NONE
    recorded_at: datetime = Field(default_factory=_now)
    weight_version_max: int | None = Field(None, ge=0)
    staleness: int | None = Field(None, ge=0)
    status: str | None = None
    trial_seconds: float | None = Field(None, ge=0)


class EvaluationRecord(Record):
    table: ClassVar[TableSpec] = EVALUATIONS

    campaign: str
    checkpoint: str
    benchmark: str
    task_hash: str
    attempt: int = Field(0, ge=0)
    task_id: str
    resolved: bool
    dense_score: float
    category: Category
    recorded_at: datetime = Field(default_factory=_now)
    assertions_total: int | None = Field(None, ge=0)
    failure_mode: FailureMode | None = None
    weight_version: int | None = Field(None, ge=0)


class CampaignStatus(StrEnum):
    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"


class CampaignRecord(Record):
    """A training campaign run's start or end: what it trains on and who started it."""

    table: ClassVar[TableSpec] = CAMPAIGNS

    run_id: str = Field(min_length=1)
    started_at: datetime
    status: CampaignStatus
    ended_at: datetime | None = None
    pool: str = Field(min_length=1)
    pool_version: int = Field(ge=0)  # 0: the bundled seed corpus, no recorded version
    audit_version: str | None = None
    preset: str = Field(min_length=1)
    config_hash: str = Field(min_length=1)
    steps: int = Field(ge=1)
    prefect_flow_run_id: str | None = None
    dagster_run_id: str | None = None
    resumed_from: str | None = None
    detail: str | None = None
    recorded_at: datetime = Field(default_factory=_now)


class SynthCandidateRecord(Record):
    """One synthesis candidate: assignment, verdict (`reason`), repairs, horizon metrics."""

    table: ClassVar[TableSpec] = SYNTH_CANDIDATES

    campaign: str = Field(min_length=1)
    candidate_hash: str
    assignment: str
    round: int = Field(ge=1)
    slot: int = Field(ge=0)
    parent_hash: str
    root_seed: str
    operator: str
    family: str
    chain: list[str] = Field(default_factory=list)
    status: str
    reason: str
    detail: str = ""
    repairs: list[str] = Field(default_factory=list)
    trial_ids: list[str] = Field(default_factory=list)
    new_assertions: list[str] = Field(default_factory=list)
    solution_steps: int = Field(ge=0)
    assertion_count: int = Field(ge=0)
    instruction_chars: int = Field(ge=0)
    decontam_score: float | None = None
    decontam_nearest: str | None = None
    synthesis_s: float = 0.0
    sandbox_s: float = 0.0
    recorded_at: datetime = Field(default_factory=_now)
    # schema 2 (synthesis v2)
    stages_json: str | None = None
    offending: list[str] | None = None
    dependency_ok: bool | None = None
    nop_share: float | None = None
    ext_only_share: float | None = None
    free_reward_share: float | None = None
    coverage: float | None = None
    uncovered: list[str] | None = None
    distinct_tools: int | None = None
    files_touched: int | None = None
    dependency_depth: int | None = None
    reference_reward: float | None = None
    # added within schema 2 (data-flow dependency, parent share, chain depth)
    flow_dependent: list[str] | None = None
    flow_independent: list[str] | None = None
    flow_inconclusive: list[str] | None = None
    flow_perturbed: list[str] | None = None
    ext_only_free_share: float | None = None
    parent_solution_share: float | None = None
    chain_depth: int | None = Field(None, ge=0)
    # added within schema 2 (issue 33): what scripted hacks earned after the parent's solution
    flow_hacked: list[str] | None = None

    @field_validator("candidate_hash", "parent_hash", "root_seed")
    @classmethod
    def _check_hash(cls, v: str) -> str:
        return check_hash(v)

    @field_validator("status")
    @classmethod
    def _check_status(cls, v: str) -> str:
        if v not in ("accepted", "discarded"):
            raise ValueError(f"status must be 'accepted' or 'discarded', got {v!r}")
        return v


class SynthRoundRecord(Record):
    """One completed synthesis round (its presence marks the round complete)."""

    table: ClassVar[TableSpec] = SYNTH_ROUNDS
    map_fields: ClassVar[tuple[str, ...]] = ("discard_reasons",)

    campaign: str = Field(min_length=1)
    round: int = Field(ge=1)
    parents: int = Field(ge=0)
    candidates: int = Field(ge=0)
    accepted: int = Field(ge=0)
    discarded: int = Field(ge=0)
    discard_reasons: dict[str, int] = Field(default_factory=dict)
    mean_solution_steps: float | None = None
    mean_assertions: float | None = None
    mean_instruction_chars: float | None = None
    synthesis_s: float = 0.0
    sandbox_s: float = 0.0
    store_s: float = 0.0
    wall_s: float = 0.0
    config_json: str = "{}"
    recorded_at: datetime = Field(default_factory=_now)
    # schema 2 (synthesis v2); shares over the round's accepted tasks
    dependency_ok_share: float | None = None
    mean_free_reward_share: float | None = None
    max_free_reward_share: float | None = None
    coverage_share: float | None = None
    seeds_with_descendants: int | None = None
    mean_distinct_tools: float | None = None
    mean_files_touched: float | None = None
    mean_dependency_depth: float | None = None
    reference_sampled: int | None = None
    reference_pass_rate: float | None = None
    # added within schema 2
    mean_parent_solution_share: float | None = None
    max_parent_solution_share: float | None = None
    mean_chain_depth: float | None = None
    max_chain_depth: int | None = None
    dependency_rejects: int | None = None


class SynthProfileRecord(Record):
    """The files a task's reference solution writes, as observed in a sandbox (JSON list)."""

    table: ClassVar[TableSpec] = SYNTH_PROFILES

    task_hash: str
    ok: bool
    detail: str = ""
    outputs_json: str = "[]"
    recorded_at: datetime = Field(default_factory=_now)
    # schema 2
    assertion_s_json: str | None = None
    assertions: int | None = None
    nop_passed: int | None = None

    @field_validator("task_hash")
    @classmethod
    def _check_hash(cls, v: str) -> str:
        return check_hash(v)


RECORD_TYPES: dict[str, type[Record]] = {
    cls.table.name: cls
    for cls in (
        TaskRecord,
        TrialRecord,
        AssertionRecord,
        AuditRecord,
        PoolMemberRecord,
        TrajectoryRecord,
        EvaluationRecord,
        CampaignRecord,
        SynthCandidateRecord,
        SynthRoundRecord,
        SynthProfileRecord,
    )
}
