"""The five-stage selection (paper Section 3.2), every decision stored as an `audits` row.

1. aggregate  - dedupe by content hash, record the tasks with their lineage, reject tasks
                that cannot carry dense reward (no reference solution, binary verifier);
2. precheck   - static checks plus executable validation (`audit.judge_exec`): the oracle
                must pass every assertion with per-assertion records, a nop run must fail one;
3. semantic   - rubric scoring (executable judge, blended with the LLM judge when
                configured): accepted / borderline / rejected;
4. repair     - instruction-only repair of borderline tasks and of tasks rejected only for
                repairable reasons (hidden requirements): a new task version, lineage intact;
5. reaudit    - the repaired versions scored again (trial evidence carried over, static and
                LLM evidence recomputed on the new instruction).

Rows: judge `stage<k>-<name>`, version `audit_version(rubric, llm)`. Executable evidence is
its own row (judge `exec`, version `exec-<n>`), independent of the rubric, so a new rubric
version re-scores every task without a sandbox, and an unchanged (hash, audit version) pair
is never scored twice: its stored rows are reused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from audit.judge_exec import (
    EXEC_JUDGE,
    ExecConfig,
    ExecEvidence,
    exec_version,
    reaudit_evidence,
    run_exec_judge,
    score_dimensions,
)
from audit.repair import repair_instruction
from audit.rubric import Decision, Dimension, Rubric, Verdict, blend, decide, repairable
from audit.static_checks import Code, Finding
from tasks.model import Task
from tasks.results import TrialResult
from warehouse.recording import record_audits, record_tasks, writable_store
from warehouse.records import AuditRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Store


class Stage(StrEnum):
    AGGREGATE = "aggregate"
    PRECHECK = "precheck"
    SEMANTIC = "semantic"
    REPAIR = "repair"
    REAUDIT = "reaudit"


STAGES = list(Stage)
STAGE_JUDGE = {s: f"stage{i}-{s.value}" for i, s in enumerate(STAGES, 1)}
PASS, REPAIRED, UNREPAIRED = "pass", "repaired", "unrepaired"
PRECHECK_GATES = (
    Code.ORACLE_FAILS,
    Code.NO_ASSERTIONS,
    Code.BINARY_VERIFIER,
    Code.NOP_PASSES,
    Code.JUDGE_ERROR,
)


def audit_version(rubric: Rubric, llm: Any = None) -> str:
    """The version every stage row carries: rubric, executable judge and LLM judge versions."""
    v = f"{rubric.label}+{exec_version()}"
    return v + (f"+llm-{llm.version}" if llm is not None else "")


class SelectionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    rubric: Rubric
    exec: ExecConfig = Field(default_factory=ExecConfig)
    llm: Any = None
    """An `audit.judge_llm.LlmConfig`, or None to run on the executable judge alone."""
    task_workers: int = Field(1, ge=1)
    """Tasks measured concurrently (each also runs `exec.workers` trials at once)."""
    until: Stage = Stage.REAUDIT
    """The last stage to run."""


class StageOutcome(BaseModel):
    task_hash: str
    task_id: str
    stage: Stage
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)

    def to_record(self, version: str) -> AuditRecord:
        return AuditRecord(
            task_hash=self.task_hash,
            judge=STAGE_JUDGE[self.stage],
            audit_version=version,
            scores=self.scores,
            verdict=self.verdict,
            reasons=self.reasons,
        )


class SelectionResult(BaseModel):
    version: str
    outcomes: list[StageOutcome] = Field(default_factory=list)
    measured: list[str] = Field(default_factory=list)
    """Task hashes whose executable evidence was measured by this run (sandbox trials)."""
    scored: list[str] = Field(default_factory=list)
    """Task hashes scored at stage 3 or 5 by this run (their (hash, version) was new)."""
    repaired: dict[str, str] = Field(default_factory=dict)
    """Original task hash -> repaired task hash."""

    def hashes(self) -> set[str]:
        """Every task hash this run decided (originals and repaired versions)."""
        return {o.task_hash for o in self.outcomes} | set(self.repaired.values())

    def by_stage(self, stage: Stage) -> list[StageOutcome]:
        return [o for o in self.outcomes if o.stage == stage]


Runner = Callable[..., TrialResult]


def _stored(store: Store, version: str) -> dict[tuple[str, str], AuditRecord]:
    """Stored stage rows of `version` and executable-evidence rows, by (hash, judge)."""
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM audits WHERE audit_version = $v OR (judge = $j AND audit_version = $e)",
            {"v": version, "j": EXEC_JUDGE, "e": exec_version()},
        )
    out = {}
    for r in rows:
        rec = AuditRecord.from_row(r)
        out[(rec.task_hash, rec.judge)] = rec
    return out


def _recorded_hashes(store: Store, hashes: list[str]) -> set[str]:
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.sql(
            "SELECT content_hash FROM tasks WHERE content_hash IN (SELECT unnest($h))",
            {"h": hashes},
        ).fetchall()
    return {r[0] for r in rows}


def _outcome(rec: AuditRecord, task: Task, stage: Stage) -> StageOutcome:
    return StageOutcome(
        task_hash=rec.task_hash,
        task_id=task.id,
        stage=stage,
        verdict=rec.verdict,
        reasons=list(rec.reasons),
        scores=dict(rec.scores),
    )


def aggregate(task: Task) -> StageOutcome:
    """Stage 1 decision for one task (pure)."""
    reasons, verdict = [], PASS
    if task.solution is None:
        verdict, reasons = Verdict.REJECTED.value, [f"{Code.NO_SOLUTION}: no reference solution"]
    elif task.binary_verifier:
        verdict = Verdict.REJECTED.value
        reasons = [f"{Code.BINARY_VERIFIER}: verifier reports only pass/fail (no dense reward)"]
    lin = task.lineage
    reasons.append(
        f"lineage: pool={lin.source_pool} round={lin.round} parents={len(lin.parents)}"
        + (f" operator={lin.operator}" if lin.operator else "")
    )
    return StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=Stage.AGGREGATE,
        verdict=verdict,
        reasons=reasons,
        scores={"round": float(lin.round), "parents": float(len(lin.parents))},
    )


def precheck(task: Task, ev: ExecEvidence) -> StageOutcome:
    """Stage 2 decision from executable evidence (pure): the validity gates."""
    gates = [f for f in ev.findings if f.code in PRECHECK_GATES]
    others = [f.reason() for f in ev.findings if f.code not in PRECHECK_GATES]
    return StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=Stage.PRECHECK,
        verdict=Verdict.REJECTED.value if gates else PASS,
        reasons=[f.reason() for f in gates] + [f"evidence: {r}" for r in others],
        scores=dict(ev.measures),
    )


def semantic(
    task: Task,
    ev: ExecEvidence,
    rubric: Rubric,
    llm_scores: dict[Dimension, float] | None = None,
    stage: Stage = Stage.SEMANTIC,
    llm_notes: Iterable[str] = (),
) -> tuple[StageOutcome, Decision]:
    """Stage 3 (or 5) decision (pure): rubric verdict over blended dimension scores."""
    exec_scores = score_dimensions(ev, task.limits.agent_timeout_s)
    llm_scores = llm_scores or {}
    scores = {d: blend(s, llm_scores.get(d), rubric.llm_weight) for d, s in exec_scores.items()}
    decision = decide(scores, ev.codes(), rubric)
    findings = [f.reason() for f in ev.findings]
    row = {d.value: s for d, s in scores.items()} | {"composite": decision.composite}
    row |= {f"exec/{d.value}": s for d, s in exec_scores.items()}
    row |= {f"llm/{d.value}": s for d, s in llm_scores.items()}
    out = StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=stage,
        verdict=decision.verdict.value,
        reasons=decision.reasons + [f"finding: {r}" for r in findings] + list(llm_notes),
        scores=row,
    )
    return out, decision


def _llm_scores(task: Task, cfg: SelectionConfig, store: Store, client: Any) -> tuple[dict, list]:
    if cfg.llm is None:
        return {}, []
    from audit.judge_llm import WarehouseCache, judge_task

    judged = judge_task(task, cfg.llm, client=client, cache=WarehouseCache(store))
    scores = {d: j.score for d, j in judged.items() if j.score is not None}
    notes = [f"llm {d.value}: {j.rationale}" for d, j in judged.items() if j.ok]
    notes += [f"{Code.LLM_ERROR}: {d.value}: {j.errors[-1]}" for d, j in judged.items() if not j.ok]
    return scores, notes


def run_selection(
    store: Store | str | Any,
    tasks: Iterable[Task],
    cfg: SelectionConfig,
    *,
    runner: Runner | None = None,
    llm_client: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> SelectionResult:
    """Run stages 1..`cfg.until` over `tasks`, storing every decision; see the module doc.
    `progress(stage, done, total)` is called as the slow stages (trials, LLM) advance."""
    st = writable_store(store)
    version = audit_version(cfg.rubric, cfg.llm)
    unique = list({t.content_hash: t for t in tasks}.values())
    result = SelectionResult(version=version)
    stored = _stored(st, version)
    upto = STAGES.index(cfg.until)

    def fresh(h: str, stage: Stage) -> AuditRecord | None:
        return stored.get((h, STAGE_JUDGE[stage]))

    # 1. aggregation with lineage
    known = _recorded_hashes(st, [t.content_hash for t in unique])
    record_tasks(st, [t for t in unique if t.content_hash not in known])
    rows: list[AuditRecord] = []
    passing: list[Task] = []
    for t in unique:
        rec = fresh(t.content_hash, Stage.AGGREGATE)
        out = _outcome(rec, t, Stage.AGGREGATE) if rec else aggregate(t)
        if rec is None:
            rows.append(out.to_record(version))
        result.outcomes.append(out)
        if out.verdict == PASS:
            passing.append(t)
    record_audits(st, rows)
    if upto < 1:
        return result

    # 2. static pre-check with executable validation
    evidence: dict[str, ExecEvidence] = {}
    to_measure = []
    for t in passing:
        rec = stored.get((t.content_hash, EXEC_JUDGE))
        if rec is not None:
            evidence[t.content_hash] = ExecEvidence.from_record(rec)
        else:
            to_measure.append(t)

    def measure(t: Task) -> ExecEvidence:
        """Measure and store at once (a long run resumes where it stopped); a crash of the
        judge itself is a `judge_error` finding, not stored, so the next run retries it."""
        try:
            ev = run_exec_judge(t, cfg.exec, runner)
        except Exception as e:  # noqa: BLE001 - one task's judge failure is that task's row
            detail = f"{type(e).__name__}: {str(e)[:300]}"
            return ExecEvidence(
                task_hash=t.content_hash, findings=[Finding(Code.JUDGE_ERROR, detail, "trial")]
            )
        record_audits(st, [ev.to_record()])
        return ev

    done = [0]
    lock = threading.Lock()

    def measured_one(t: Task) -> ExecEvidence:
        ev = measure(t)
        with lock:
            done[0] += 1
            if progress is not None:
                progress("executable judge", done[0], len(to_measure))
        return ev

    with ThreadPoolExecutor(max_workers=cfg.task_workers) as pool:
        measured = list(pool.map(measured_one, to_measure))
    for t, ev in zip(to_measure, measured, strict=True):
        evidence[t.content_hash] = ev
        result.measured.append(t.content_hash)
    rows = []
    valid: list[Task] = []
    for t in passing:
        rec = fresh(t.content_hash, Stage.PRECHECK)
        ev = evidence[t.content_hash]
        out = _outcome(rec, t, Stage.PRECHECK) if rec else precheck(t, ev)
        if rec is None and Code.JUDGE_ERROR not in ev.codes():  # retried next run
            rows.append(out.to_record(version))
        result.outcomes.append(out)
        if out.verdict == PASS:
            valid.append(t)
    record_audits(st, rows)
    if upto < 2:
        return result

    # 3. semantic pass
    rows = []
    candidates: list[tuple[Task, Decision, list[str]]] = []
    for i, t in enumerate(valid, 1):
        if progress is not None:
            progress("semantic pass", i, len(valid))
        ev = evidence[t.content_hash]
        rec = fresh(t.content_hash, Stage.SEMANTIC)
        llm_scores, notes = _llm_scores(t, cfg, st, llm_client)  # cached per (hash, version)
        out, decision = semantic(t, ev, cfg.rubric, llm_scores, llm_notes=notes)
        if rec is None:
            rows.append(out.to_record(version))
            result.scored.append(t.content_hash)
        else:
            out = _outcome(rec, t, Stage.SEMANTIC)
        result.outcomes.append(out)
        if decision.verdict != Verdict.ACCEPTED and repairable(decision, cfg.rubric):
            low = [n for n in notes if n.startswith(f"llm {Dimension.ALIGNMENT.value}:")]
            candidates.append((t, decision, low))
    record_audits(st, rows)
    if upto < 3:
        return result

    # 4. instruction-only repair
    rows, repaired = [], []
    for t, _decision, llm_notes in candidates:
        ev = evidence[t.content_hash]
        new = repair_instruction(t, ev.findings, llm=cfg.llm, client=llm_client, notes=llm_notes)
        if new is None:
            out = StageOutcome(
                task_hash=t.content_hash,
                task_id=t.id,
                stage=Stage.REPAIR,
                verdict=UNREPAIRED,
                reasons=["no instruction-level defect to repair"],
            )
        else:
            out = StageOutcome(
                task_hash=t.content_hash,
                task_id=t.id,
                stage=Stage.REPAIR,
                verdict=REPAIRED,
                reasons=[f"repaired as {new.content_hash}"],
            )
            repaired.append((t, new))
            result.repaired[t.content_hash] = new.content_hash
        if fresh(t.content_hash, Stage.REPAIR) is None:
            rows.append(out.to_record(version))
        result.outcomes.append(out)
    known = _recorded_hashes(st, [n.content_hash for _, n in repaired])
    record_tasks(st, [n for _, n in repaired if n.content_hash not in known])
    record_audits(st, rows)
    if upto < 4:
        return result

    # 5. re-audit
    rows = []
    for t, new in repaired:
        h = new.content_hash
        rec_ev = stored.get((h, EXEC_JUDGE))
        ev = (
            ExecEvidence.from_record(rec_ev)
            if rec_ev
            else reaudit_evidence(evidence[t.content_hash], new)
        )
        if rec_ev is None:
            rows.append(ev.to_record())
        rec = fresh(h, Stage.REAUDIT)
        if rec is not None:
            result.outcomes.append(_outcome(rec, new, Stage.REAUDIT))
            continue
        llm_scores, notes = _llm_scores(new, cfg, st, llm_client)
        out, _ = semantic(
            new, ev, cfg.rubric, llm_scores, Stage.REAUDIT, [f"parent: {t.content_hash}", *notes]
        )
        rows.append(out.to_record(version))
        result.scored.append(h)
        result.outcomes.append(out)
    record_audits(st, rows)
    return result


# ---- reading decisions back --------------------------------------------------------------------


class FinalRow(BaseModel):
    """A task's final decision: the stage-3 verdict, or its repaired version's stage-5 one."""

    task_hash: str
    task_id: str
    category: str
    verdict: str
    composite: float | None
    stage: Stage
    scores: dict[str, float] = Field(default_factory=dict)


def stage_rows(
    store: Store | str | Any, version: str, only: set[str] | None = None
) -> list[AuditRecord]:
    """Every stage row of one audit version (of the tasks in `only`, when given)."""
    with Snapshot.open(writable_store(store), with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM audits WHERE audit_version = $v AND starts_with(judge, 'stage')",
            {"v": version},
        )
    recs = [AuditRecord.from_row(r) for r in rows]
    return [r for r in recs if only is None or r.task_hash in only]


def final_decisions(
    store: Store | str | Any, version: str, only: set[str] | None = None
) -> list[FinalRow]:
    """Final verdicts of one audit version, joined with the tasks' ids and categories.

    `only` restricts them to one run's tasks (original and repaired hashes, see
    `SelectionResult.hashes`); by default every task ever audited under the version counts.
    """
    recs = stage_rows(store, version, only)
    by = {(r.task_hash, r.judge): r for r in recs}
    repaired = {
        r.task_hash: r.reasons[0].split()[-1]
        for r in recs
        if r.judge == STAGE_JUDGE[Stage.REPAIR] and r.verdict == REPAIRED
    }
    finals: list[tuple[AuditRecord, Stage]] = []
    for r in recs:
        if r.judge != STAGE_JUDGE[Stage.SEMANTIC]:
            continue
        new = repaired.get(r.task_hash)
        again = by.get((new, STAGE_JUDGE[Stage.REAUDIT])) if new else None
        finals.append((again, Stage.REAUDIT) if again else (r, Stage.SEMANTIC))
    hashes = [r.task_hash for r, _ in finals]
    with Snapshot.open(writable_store(store), with_lineage=False) as snap:
        meta = {
            h: (i, c)
            for h, i, c in snap.sql(
                "SELECT content_hash, task_id, category FROM tasks "
                "WHERE content_hash IN (SELECT unnest($h))",
                {"h": hashes},
            ).fetchall()
        }
    out = []
    for r, stage in finals:
        task_id, category = meta.get(r.task_hash, ("?", "other"))
        out.append(
            FinalRow(
                task_hash=r.task_hash,
                task_id=task_id,
                category=category,
                verdict=r.verdict,
                composite=r.scores.get("composite"),
                stage=stage,
                scores=dict(r.scores),
            )
        )
    return out
