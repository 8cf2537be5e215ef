"""The five-stage selection (paper Section 3.2), every decision stored as an `audits` row.

1. aggregate  - dedupe by content hash, record the tasks with their lineage (and the source
                directory of imported tasks), reject verifiers that report only pass/fail;
2. precheck   - static checks plus executable validation (`audit.judge_exec`): a reference
                solution must exist and pass every assertion with per-assertion records, a
                nop run must fail one;
3. semantic   - rubric scoring (executable judge, blended with the LLM judge when
                configured; either judge may hard-reject): accepted / borderline / rejected;
4. repair     - instruction-only repair of borderline tasks and of tasks rejected only for
                repairable reasons (hidden requirements): a new task version, lineage intact;
5. reaudit    - the repaired versions scored again (trial evidence carried over, static and
                LLM evidence recomputed on the new instruction).

Rows: judge `stage<k>-<name>`, version `audit_version(rubric, llm)`, a verdict from
`audit.verdict.Verdict` and typed findings. Executable evidence is its own row (judge `exec`,
version `exec-<n>`), independent of the rubric, so a new rubric version re-scores every task
without a sandbox, and an unchanged (hash, audit version) pair is never scored twice.

A decision that could not be made (an infrastructure failure, a crashed judge, an unreachable
LLM endpoint) has the verdict `error`: its row is stored under an error version, which no
re-audit reads as decided, so the next run tries that task again.

Where the work runs: the driver decides (the pure stage functions) and records; each task's
slow work (its executable judge's trials, its LLM judgement, its LLM repair, the repaired
version's judgement) is a task of one executor per run (`SelectionConfig.executor`: threads
of this process by default, `task_workers` of them; a Ray cluster otherwise). An LLM
judgement made on a node gets the task's cached judgements from the driver and hands its new
ones back (`TaskJudgements`), so only the driver writes the warehouse; the LLM client is
rebuilt on the node from its config.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable, Iterable
from concurrent.futures import Future, as_completed
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
from audit.judge_llm import LlmClient, LlmJudgement, error_version
from audit.repair import repair_instruction
from audit.rubric import Decision, Dimension, Rubric, decide, repairable
from audit.verdict import FAILURE_CODES, Code, Finding, Source, Verdict
from executor import Executor, ExecutorConfig, TrialLost, open_executor
from sandbox.gc import collect_garbage
from tasks.model import Task
from tasks.results import TrialResult
from warehouse.locks import single_writer
from warehouse.recording import StoreRef, record_audits, record_tasks, writable_store
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
PRECHECK_GATES = frozenset(
    {Code.NO_SOLUTION, Code.ORACLE_FAILS, Code.NO_ASSERTIONS, Code.BINARY_VERIFIER,
     Code.NOP_PASSES}
)  # fmt: skip


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
    source: str | None = None
    """Where the tasks were read from (an imported directory), recorded with them."""
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    """Where each task's executable judge runs: `local` (here) or a Ray cluster address."""


def exec_trial_id(task: Task) -> str:
    return f"exec:{task.content_hash}:{exec_version()}"


def judge_on(
    ex: Executor, task: Task, cfg: ExecConfig, runner: Runner | None
) -> Future[ExecEvidence]:
    """The executable judge of one task as one task of `ex` (on a cluster: preferring nodes
    that hold its image); a trial the cluster lost raises `executor.TrialLost` from the
    future (an infrastructure failure, recorded as a judge error)."""
    return ex.submit(
        exec_trial_id(task), run_exec_judge, task, cfg, runner, affinity=task.environment_hash
    )


class StageOutcome(BaseModel):
    task_hash: str
    task_id: str
    stage: Stage
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)

    def to_record(self, version: str) -> AuditRecord:
        return AuditRecord(
            task_hash=self.task_hash,
            judge=STAGE_JUDGE[self.stage],
            audit_version=version if self.verdict != Verdict.ERROR else error_version(version),
            scores=self.scores,
            verdict=self.verdict.value,
            reasons=self.reasons,
            findings=[f.row() for f in self.findings],
        )

    @classmethod
    def from_record(cls, rec: AuditRecord, task: Task, stage: Stage) -> StageOutcome:
        return cls(
            task_hash=rec.task_hash,
            task_id=task.id,
            stage=stage,
            verdict=Verdict(rec.verdict),
            reasons=list(rec.reasons),
            findings=[Finding.from_row(r) for r in rec.findings],
            scores=dict(rec.scores),
        )

    def hard_codes(self) -> list[Code]:
        return [f.code for f in self.findings if f.defect]


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


def _repairs(recs: Iterable[AuditRecord]) -> dict[str, str]:
    """Original task hash -> its repaired version's, from stage-4 rows."""
    out = {}
    for r in recs:
        if r.judge == STAGE_JUDGE[Stage.REPAIR] and r.verdict == Verdict.REPAIRED:
            links = [f.item for f in r.findings if f.code == Code.REPAIRED_AS.value]
            if links:
                out[r.task_hash] = links[0]
    return out


def _recorded_hashes(store: Store, hashes: list[str]) -> set[str]:
    with Snapshot.open(store, with_lineage=False) as snap:
        rows = snap.sql(
            "SELECT content_hash FROM tasks WHERE content_hash IN (SELECT unnest($h))",
            {"h": hashes},
        ).fetchall()
    return {r[0] for r in rows}


def aggregate(task: Task, source: str | None = None) -> StageOutcome:
    """Stage 1 decision for one task (pure)."""
    lin = task.lineage
    lineage = f"pool={lin.source_pool} round={lin.round} parents={len(lin.parents)}"
    lineage += f" operator={lin.operator}" if lin.operator else ""
    findings = [Finding(code=Code.LINEAGE, item=lin.source_pool, evidence=lineage)]
    if source:
        findings.append(
            Finding(code=Code.IMPORTED_FROM, item=source, evidence=f"read from {source}")
        )
    verdict = Verdict.PASS
    if task.binary_verifier:
        verdict = Verdict.REJECTED
        why = "the verifier reports only pass/fail (no dense reward)"
        findings.append(Finding(code=Code.BINARY_VERIFIER, evidence=why))
    return StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=Stage.AGGREGATE,
        verdict=verdict,
        reasons=[f.text() for f in findings if f.defect],
        findings=findings,
        scores={"round": float(lin.round), "parents": float(len(lin.parents))},
    )


def precheck(task: Task, ev: ExecEvidence, also: Iterable[str] = ()) -> StageOutcome:
    """Stage 2 decision from executable evidence (pure): the validity gates (and the codes in
    `also`: a static-only audit, which cannot score, rejects its hard rejects here). Evidence
    the judge could not gather (infrastructure) is an `error`, never a rejection."""
    gate_codes = PRECHECK_GATES | set(also)
    gates = [f for f in ev.findings if f.code in gate_codes]
    if not ev.decided:
        verdict = Verdict.ERROR
    else:
        verdict = Verdict.REJECTED if gates else Verdict.PASS
    failures = [f for f in ev.findings if f.code in FAILURE_CODES]
    return StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=Stage.PRECHECK,
        verdict=verdict,
        reasons=[f.text() for f in [*failures, *gates]],
        findings=[f for f in ev.findings if f.defect or f.code in FAILURE_CODES],
        scores=dict(ev.measures),
    )


def semantic(
    task: Task,
    ev: ExecEvidence,
    rubric: Rubric,
    llm: list[Finding] | None = None,
    llm_scores: dict[Dimension, float] | None = None,
    stage: Stage = Stage.SEMANTIC,
) -> tuple[StageOutcome, Decision]:
    """Stage 3 (or 5) decision (pure): rubric verdict over blended dimension scores; the
    LLM judge's findings (scores' rationales, quoted hard rejects, failures) join the
    executable judge's. A failed LLM judgement makes the decision an `error`."""
    exec_scores = score_dimensions(ev, task.limits.agent_timeout_s)
    llm_scores = llm_scores or {}
    llm = llm or []
    findings = [*ev.findings, *llm]
    decision = decide(exec_scores, [f.code for f in findings], rubric, llm_scores)
    scores = decision.scores
    row = {d.value: s for d, s in scores.items()} | {"composite": decision.composite}
    row |= {f"exec/{d.value}": s for d, s in exec_scores.items()}
    row |= {f"llm/{d.value}": s for d, s in llm_scores.items()}
    failed = [f for f in findings if f.code in FAILURE_CODES]
    out = StageOutcome(
        task_hash=task.content_hash,
        task_id=task.id,
        stage=stage,
        verdict=Verdict.ERROR if failed else decision.verdict,
        reasons=[f.text() for f in failed] + decision.reasons,
        findings=[f for f in findings if f.defect or f.code in FAILURE_CODES]
        + [
            f for f in llm if f.code in (Code.LLM_SCORE, Code.LLM_QUOTE_REFUSED, Code.LLM_ABSTAINED)
        ],
        scores=row,
    )
    return out, decision


def _portable_llm_client(client: LlmClient) -> tuple[type[LlmClient], tuple[Any, ...]]:
    """How the run's LLM client crosses to a cluster node: rebuilt there from its config (its
    OpenAI client holds locks and connections, which do not pickle; the breaker is then one
    per node process)."""
    return LlmClient, (client.cfg,)


copyreg.pickle(LlmClient, _portable_llm_client)

LlmEvidence = tuple[list[Finding], dict[Dimension, float], list[LlmJudgement]]


class TaskJudgements:
    """The LLM cache of one task's judgement where it runs: the judgements the driver had
    cached for it in, the new ones out (`new`: the driver records them)."""

    def __init__(
        self,
        cached: dict[tuple[str, Dimension, str], LlmJudgement],
        invalid: dict[tuple[str, Dimension, str], int] | None = None,
    ) -> None:
        self.cached = cached
        self.invalid = invalid or {}
        self.new: list[LlmJudgement] = []

    def get(self, task_hash: str, dimension: Dimension, version: str) -> LlmJudgement | None:
        return self.cached.get((task_hash, dimension, version))

    def put(self, judgement: LlmJudgement) -> None:
        self.new.append(judgement)

    def invalid_runs(self, task_hash: str, dimension: Dimension, version: str) -> int:
        """Earlier runs of this judgement whose every answer was rejected (the driver's count)."""
        return self.invalid.get((task_hash, dimension, version), 0)


def llm_evidence(
    task: Task, llm: Any, cache: TaskJudgements, client: Any, ev: ExecEvidence | None = None
) -> LlmEvidence:
    """The LLM judge's findings, scores and new judgements for one task (an executor task);
    `ev` (the executable evidence) confirms or refuses its hard rejects."""
    from audit.judge_llm import judge_task

    judged = judge_task(task, llm, client=client, cache=cache, evidence=ev)
    findings = [f for j in judged.values() for f in j.findings()]
    scores = {d: j.score for d, j in judged.items() if j.score is not None}
    return findings, scores, cache.new


def repair_on_node(
    task: Task, findings: list[Finding], llm: Any, client: Any, notes: list[Finding]
) -> tuple[Task | None, list[Finding]]:
    """`repair_instruction` as an executor task: (the repaired task or None, the refusals)."""
    refused: list[Finding] = []
    new = repair_instruction(task, findings, llm=llm, client=client, notes=notes, refused=refused)
    return new, refused


class _LlmJudge:
    """The run's LLM judgements: submitted per task to the executor, recorded by the driver
    (through the warehouse cache) as they come back."""

    def __init__(self, cfg: SelectionConfig, store: Store, ex: Executor, client: Any) -> None:
        self.cfg, self.store, self.ex, self.client = cfg, store, ex, client
        self.futures: dict[str, Future[LlmEvidence]] = {}
        self._warehouse: Any = None

    def submit(self, task: Task, ev: ExecEvidence | None = None) -> None:
        """Start `task`'s judgement (nothing when no LLM judge is configured); `ev` confirms or
        refuses its hard rejects."""
        if self.cfg.llm is None or task.content_hash in self.futures:
            return
        from audit.judge_llm import WarehouseCache

        if self._warehouse is None:
            self._warehouse = WarehouseCache(self.store)
        h, version = task.content_hash, self.cfg.llm.version
        cached, invalid = {}, {}
        for d in Dimension:
            hit = self._warehouse.get(h, d, version)
            if hit is not None:
                cached[(h, d, version)] = hit
            invalid[(h, d, version)] = self._warehouse.invalid_runs(h, d, version)
        self.futures[h] = self.ex.submit(
            f"llm:{h}:{version}", llm_evidence, task, self.cfg.llm, TaskJudgements(cached, invalid),
            self.client, ev,
        )  # fmt: skip

    def result(
        self, task: Task, ev: ExecEvidence | None = None
    ) -> tuple[list[Finding], dict[Dimension, float]]:
        """`task`'s findings and scores ([] and {} when not configured); its new judgements
        recorded; a judgement the cluster lost is a judge error (no decision)."""
        if self.cfg.llm is None:
            return [], {}
        self.submit(task, ev)
        fut = self.futures.pop(task.content_hash)
        try:
            findings, scores, new = fut.result()
        except TrialLost as e:
            lost = Finding(code=Code.JUDGE_ERROR, source=Source.INFRA, item="llm", evidence=str(e))
            return [lost], {}
        finally:
            self.ex.forget(f"llm:{task.content_hash}:{self.cfg.llm.version}")
        for judgement in new:
            self._warehouse.put(judgement)
        return findings, scores


@single_writer("pool build")
def run_selection(
    store: StoreRef,
    tasks: Iterable[Task],
    cfg: SelectionConfig,
    *,
    runner: Runner | None = None,
    llm_client: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
    executor: Executor | None = None,
) -> SelectionResult:
    """Run stages 1..`cfg.until` over `tasks`, storing every decision; see the module doc.
    `progress(stage, done, total)` is called as the slow stages (trials, LLM) advance; `log`
    hears of base images being built or waited for before the executable judge runs.
    `executor` (default: one opened for the run from `cfg.executor`) runs each task's slow
    work."""
    ex = executor or open_executor(cfg.executor, workers=cfg.task_workers, reclaim=collect_garbage)
    try:
        return _run_selection(store, tasks, cfg, ex, runner, llm_client, progress, log)
    finally:
        if executor is None:
            ex.shutdown(wait=False, cancel_futures=True)


def _run_selection(
    store: StoreRef,
    tasks: Iterable[Task],
    cfg: SelectionConfig,
    ex: Executor,
    runner: Runner | None,
    llm_client: Any,
    progress: Callable[[str, int, int], None] | None,
    log: Callable[[str], None] | None,
) -> SelectionResult:
    st = writable_store(store)
    if cfg.llm is not None:  # one client per run: its circuit breaker spans every task
        from audit.judge_llm import make_client

        llm_client = make_client(cfg.llm, llm_client)
    version = audit_version(cfg.rubric, cfg.llm)
    upto = STAGES.index(cfg.until)
    if cfg.exec.static_only:  # nothing ran: the pre-check decides, under its own version
        upto = min(upto, STAGES.index(Stage.PRECHECK))
        version = f"{version}+static"
    stored = _stored(st, version)
    # A repaired version is decided through its original (stage 5) when both are candidates:
    # the repair records it with the original's origin, so the store's candidates list it too.
    unique = list({t.content_hash: t for t in tasks}.values())
    originals = {new: old for old, new in _repairs(stored.values()).items()}
    listed = {t.content_hash for t in unique}
    unique = [t for t in unique if originals.get(t.content_hash) not in listed]
    result = SelectionResult(version=version)

    def fresh(h: str, stage: Stage) -> AuditRecord | None:
        return stored.get((h, STAGE_JUDGE[stage]))

    def keep(out: StageOutcome, rows: list[AuditRecord], rec: AuditRecord | None) -> None:
        result.outcomes.append(out)
        if rec is None:
            rows.append(out.to_record(version))

    # 1. aggregation with lineage
    known = _recorded_hashes(st, [t.content_hash for t in unique])
    record_tasks(st, [t for t in unique if t.content_hash not in known], source=cfg.source)
    rows: list[AuditRecord] = []
    passing: list[Task] = []
    for t in unique:
        rec = fresh(t.content_hash, Stage.AGGREGATE)
        out = StageOutcome.from_record(rec, t, Stage.AGGREGATE) if rec else aggregate(t, cfg.source)
        keep(out, rows, rec)
        if out.verdict == Verdict.PASS:
            passing.append(t)
    record_audits(st, rows)
    if upto < 1:
        return result

    # 2. static pre-check with executable validation
    evidence: dict[str, ExecEvidence] = {}
    to_measure = []
    for t in passing:
        rec = stored.get((t.content_hash, EXEC_JUDGE))
        if rec is not None and not cfg.exec.static_only:
            evidence[t.content_hash] = ExecEvidence.from_record(rec)
        else:
            to_measure.append(t)

    local = cfg.executor.local and runner is None and cfg.exec.backend == "local"
    if log is not None and local and to_measure and not cfg.exec.static_only:
        from sandbox.build import prepare_bases  # the judge's workers cannot reach `log`

        prepare_bases(to_measure, log=log)
    # Each task's executable judge is one executor task; its evidence is stored as soon as
    # it is back (a long run resumes where it stopped). Evidence the judge could not gather,
    # or only read statically, is not stored.
    judging = {judge_on(ex, t, cfg.exec, runner): t for t in to_measure}
    for i, fut in enumerate(as_completed(judging), 1):
        t = judging[fut]
        try:
            ev = fut.result()
        except Exception as e:  # noqa: BLE001 - one task's judge failure is that task's row
            why = f"{type(e).__name__}: {str(e)[:300]}"
            fail = Finding(code=Code.JUDGE_ERROR, source=Source.INFRA, item="exec", evidence=why)
            ev = ExecEvidence(task_hash=t.content_hash, findings=[fail])
        else:
            if ev.decided and not cfg.exec.static_only:
                record_audits(st, [ev.to_record()])
        ex.forget(exec_trial_id(t))
        evidence[t.content_hash] = ev
        if progress is not None:
            progress("executable judge", i, len(to_measure))
    for t in to_measure:
        if not cfg.exec.static_only:
            result.measured.append(t.content_hash)
    rows = []
    valid: list[Task] = []
    for t in passing:
        rec = fresh(t.content_hash, Stage.PRECHECK)
        ev = evidence[t.content_hash]
        also = cfg.rubric.hard_reject if cfg.exec.static_only else ()
        out = StageOutcome.from_record(rec, t, Stage.PRECHECK) if rec else precheck(t, ev, also)
        keep(out, rows, rec)
        if out.verdict == Verdict.PASS:
            valid.append(t)
    record_audits(st, rows)
    if upto < 2:
        return result

    # 3. semantic pass (each task's LLM judgement an executor task, all started at once)
    judge = _LlmJudge(cfg, st, ex, llm_client)
    for t in valid:
        if fresh(t.content_hash, Stage.SEMANTIC) is None:
            judge.submit(t, evidence[t.content_hash])
    rows = []
    candidates: list[tuple[Task, Decision, list[Finding]]] = []
    for i, t in enumerate(valid, 1):
        ev = evidence[t.content_hash]
        rec = fresh(t.content_hash, Stage.SEMANTIC)
        if rec is not None:
            out = StageOutcome.from_record(rec, t, Stage.SEMANTIC)
            llm = [f for f in out.findings if f.source == Source.LLM]
            _, decision = semantic(t, ev, cfg.rubric, llm, _llm_scores_of(out))
        else:
            llm, llm_scores = judge.result(t, ev)  # cached per (hash, version)
            out, decision = semantic(t, ev, cfg.rubric, llm, llm_scores)
            if out.verdict != Verdict.ERROR:
                result.scored.append(t.content_hash)
        if progress is not None:
            progress("semantic pass", i, len(valid))
        keep(out, rows, rec)
        if out.verdict in (Verdict.BORDERLINE, Verdict.REJECTED) and repairable(
            decision, cfg.rubric
        ):
            notes = [f for f in llm if f.code == Code.LLM_SCORE and f.item == Dimension.ALIGNMENT]
            candidates.append((t, decision, notes))
    record_audits(st, rows)
    if upto < 3:
        return result

    # 4. instruction-only repair (each task's repair an executor task, all started at once)
    rows = []
    repaired: list[tuple[Task, Task]] = []
    repairing = [
        ex.submit(
            f"repair:{t.content_hash}:{version}",
            repair_on_node,
            t,
            evidence[t.content_hash].findings,
            cfg.llm,
            llm_client,
            notes,
        )
        for t, _decision, notes in candidates
    ]
    for (t, _decision, _notes), repair in zip(candidates, repairing, strict=True):
        # refused: rewrites that state an answer or drop a requirement
        new, refused = repair.result()
        ex.forget(f"repair:{t.content_hash}:{version}")
        if new is None:
            out = StageOutcome(
                task_hash=t.content_hash,
                task_id=t.id,
                stage=Stage.REPAIR,
                verdict=Verdict.UNREPAIRED,
                reasons=[f.text() for f in refused] or ["no instruction-level defect to repair"],
                findings=refused,
            )
        else:
            link = Finding(code=Code.REPAIRED_AS, item=new.content_hash,
                           evidence="instruction-only repair (a new task version)")  # fmt: skip
            out = StageOutcome(
                task_hash=t.content_hash,
                task_id=t.id,
                stage=Stage.REPAIR,
                verdict=Verdict.REPAIRED,
                reasons=[f"repaired as {new.content_hash}"],
                findings=[link, *refused],
            )
            repaired.append((t, new))
            result.repaired[t.content_hash] = new.content_hash
        keep(out, rows, fresh(t.content_hash, Stage.REPAIR))
    known = _recorded_hashes(st, [n.content_hash for _, n in repaired])
    record_tasks(st, [n for _, n in repaired if n.content_hash not in known], source=cfg.source)
    record_audits(st, rows)
    if upto < 4:
        return result

    # 5. re-audit (the repaired versions' LLM judgements started at once)
    rows = []
    re_evidence: dict[str, ExecEvidence] = {}
    for t, new in repaired:
        rec_ev = stored.get((new.content_hash, EXEC_JUDGE))
        if rec_ev is not None:
            re_evidence[new.content_hash] = ExecEvidence.from_record(rec_ev)
        else:
            re_evidence[new.content_hash] = reaudit_evidence(evidence[t.content_hash], new)
            rows.append(re_evidence[new.content_hash].to_record())
        if stored.get((new.content_hash, STAGE_JUDGE[Stage.REAUDIT])) is None:
            judge.submit(new, re_evidence[new.content_hash])
    for t, new in repaired:
        h = new.content_hash
        ev = re_evidence[h]
        rec = fresh(h, Stage.REAUDIT)
        if rec is not None:
            result.outcomes.append(StageOutcome.from_record(rec, new, Stage.REAUDIT))
            continue
        llm, llm_scores = judge.result(new, ev)
        parent = Finding(code=Code.LINEAGE, item=t.content_hash, evidence="repaired from")
        out, _ = semantic(new, ev, cfg.rubric, [parent, *llm], llm_scores, Stage.REAUDIT)
        keep(out, rows, None)
        if out.verdict != Verdict.ERROR:
            result.scored.append(h)
    record_audits(st, rows)
    return result


def _llm_scores_of(out: StageOutcome) -> dict[Dimension, float]:
    return {d: out.scores[f"llm/{d.value}"] for d in Dimension if f"llm/{d.value}" in out.scores}


# ---- reading decisions back --------------------------------------------------------------------


class FinalRow(BaseModel):
    """A task's final decision: the stage-3 verdict, or its repaired version's stage-5 one."""

    task_hash: str
    task_id: str
    category: str
    verdict: Verdict
    composite: float | None
    stage: Stage
    scores: dict[str, float] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)


def stage_rows(store: StoreRef, version: str, only: set[str] | None = None) -> list[AuditRecord]:
    """Every stage row of one audit version (of the tasks in `only`, when given)."""
    with Snapshot.open(writable_store(store), with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM audits WHERE audit_version = $v AND starts_with(judge, 'stage')",
            {"v": version},
        )
    recs = [AuditRecord.from_row(r) for r in rows]
    return [r for r in recs if only is None or r.task_hash in only]


def final_decisions(store: StoreRef, version: str, only: set[str] | None = None) -> list[FinalRow]:
    """Final verdicts of one audit version, joined with the tasks' ids and categories.

    `only` restricts them to one run's tasks (original and repaired hashes, see
    `SelectionResult.hashes`); by default every task ever audited under the version counts.
    """
    recs = stage_rows(store, version, only)
    by = {(r.task_hash, r.judge): r for r in recs}
    repaired = _repairs(recs)
    # One decision a task: its own stage-3 one (its evidence measured) before a re-audit
    # reached through another task's repair (evidence carried over from the original).
    finals: dict[str, tuple[AuditRecord, Stage]] = {}
    for r in recs:
        if r.judge != STAGE_JUDGE[Stage.SEMANTIC]:
            continue
        new = repaired.get(r.task_hash)
        again = by.get((new, STAGE_JUDGE[Stage.REAUDIT])) if new else None
        if again is None:
            finals[r.task_hash] = (r, Stage.SEMANTIC)
        elif again.task_hash not in finals:
            finals[again.task_hash] = (again, Stage.REAUDIT)
    hashes = list(finals)
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
    for r, stage in finals.values():
        task_id, category = meta.get(r.task_hash, ("?", "other"))
        out.append(
            FinalRow(
                task_hash=r.task_hash,
                task_id=task_id,
                category=category,
                verdict=Verdict(r.verdict),
                composite=r.scores.get("composite"),
                stage=stage,
                scores=dict(r.scores),
                findings=[Finding.from_row(f) for f in r.findings],
            )
        )
    return out
