"""The round engine: recursive task synthesis over the seed corpus, resumable from the warehouse.

Round r takes the accepted tasks of round r - 1 (round 0: the profiled seed corpus), samples
assignments under caps (`synthesis.sampler`), builds each candidate with its operator, drops
candidates too close to the benchmark (`synthesis.decontam`), validates the rest in fresh
sandboxes with `workers` threads (`synthesis.validate`), and records every candidate in one
warehouse commit. A round is complete when its `synth_rounds` row exists.

Resume: assignments are a pure function of (parents, seed, caps), and parents are read back
from the warehouse, so a re-run re-derives the same assignments; those with a recorded
candidate row are reused, the rest are built and validated. Nothing is recorded twice (rows
are keyed; the first write wins) and nothing committed is lost.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from synthesis import ledger
from synthesis.decontam import BenchmarkIndex, DecontamConfig, Overlap
from synthesis.operators import Operator, Parent, RewriteContext, RewriteError, build_child
from synthesis.operators import registry as operator_registry
from synthesis.profile import profile_task
from synthesis.sampler import Assignment, Caps, sample_round
from synthesis.validate import Validation, ValidationConfig, Verdict, validate
from tasks.corpus import import_dir, load_seeds
from tasks.model import Task
from tasks.pools import Pool
from tasks.results import TrialResult
from warehouse.pools import record_pool, rst_members
from warehouse.recording import record_synthesis
from warehouse.records import (
    Record,
    SynthCandidateRecord,
    SynthRoundRecord,
    TaskRecord,
    solution_steps,
    task_record,
)
from warehouse.store import Store

# Origin pools of recorded tasks (a discarded candidate's origin is not a pool).
SEED_POOL, ACCEPTED_POOL, DISCARDED_POOL = Pool.SEED.value, Pool.RST.value, "rst-discarded"


@dataclass(frozen=True)
class SynthConfig:
    """One synthesis campaign. Changing a field that affects sampling needs a new `campaign`."""

    rounds: int = 15
    per_round: int = 8  # candidate budget per round
    seed: int = 0
    campaign: str = "rst"
    workers: int = 2  # concurrent candidate validations
    caps: Caps = field(default_factory=Caps)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    benchmark: Path | None = None
    seeds_dir: Path | None = None  # default: the bundled corpus (tasks/seeds)
    seed_ids: tuple[str, ...] = ()  # restrict the seed corpus (tests, small runs)

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.per_round < 1 or self.workers < 1:
            raise ValueError(f"rounds, per_round and workers must be >= 1, got {self!r}")

    def to_json(self) -> str:
        doc = asdict(self)
        doc["benchmark"] = str(self.benchmark) if self.benchmark else None
        doc["seeds_dir"] = str(self.seeds_dir) if self.seeds_dir else None
        return json.dumps(doc, sort_keys=True, default=str)


@dataclass
class Timing:
    """Where a run's time goes (seconds, summed over candidates; sandbox time is per worker)."""

    synthesis_s: float = 0.0
    sandbox_s: float = 0.0
    store_s: float = 0.0
    decontam_s: float = 0.0


Progress = Callable[[str, int, int], None]  # (phase, done, total)
Hook = Callable[[SynthCandidateRecord], None]  # after each candidate is committed


def load_seed_tasks(cfg: SynthConfig) -> list[Task]:
    if cfg.seeds_dir is not None:
        tasks, _ = import_dir(cfg.seeds_dir)
    else:
        tasks = load_seeds()
    if cfg.seed_ids:
        tasks = [t for t in tasks if t.id in cfg.seed_ids]
    return sorted(tasks, key=lambda t: t.id)


def seed_parents(store: Store, cfg: SynthConfig, progress: Progress | None = None) -> list[Parent]:
    """Round-0 parents: seed tasks with a passing profile (profiling and recording them once)."""
    tasks = load_seed_tasks(cfg)
    known = ledger.profiles(store, [t.content_hash for t in tasks])
    todo = [t for t in tasks if t.content_hash not in known]
    if todo:
        record_synthesis(store, tasks=[task_record(t, pool=SEED_POOL) for t in todo])
        with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
            futures = {pool.submit(profile_task, t, cfg.validation.backend): t for t in todo}
            for i, fut in enumerate(as_completed(futures), 1):
                prof, trial = fut.result()
                record_synthesis(store, trials=[trial], rows=[ledger.profile_record(prof)])
                known[prof.task_hash] = prof
                if progress:
                    progress("profile seeds", i, len(todo))
    return [Parent(t, known[t.content_hash]) for t in tasks if known[t.content_hash].ok]


@dataclass
class Built:
    """A synthesized candidate before validation (or the reason there is none)."""

    assignment: Assignment
    parent: Parent
    task: Task | None
    synthesis_s: float
    verdict: Verdict | None = None  # set when discarded before the sandbox
    detail: str = ""
    overlap: Overlap | None = None


def synthesize(
    a: Assignment, parent: Parent, op: Operator, seed: int, index: BenchmarkIndex | None
) -> Built:
    """Build the candidate of one assignment and screen it against the benchmark."""
    t0 = time.monotonic()
    try:
        ext = op.extend(parent, RewriteContext(a.round, a.rng(seed)))
        task = build_child(parent, op.name, op.family, a.round, ext)
    except (RewriteError, ValueError) as e:
        verdict = Verdict.INVALID_LLM_OUTPUT if op.family == "llm" else Verdict.REWRITE_ERROR
        return Built(a, parent, None, time.monotonic() - t0, verdict, str(e)[:1000])
    built = Built(a, parent, task, time.monotonic() - t0)
    if index is not None and len(index):
        built.overlap = index.overlap(task)
        if index.is_contaminated(built.overlap):
            built.verdict = Verdict.CONTAMINATED
            built.detail = (
                f"overlap {built.overlap.score:.3f} >= {index.cfg.threshold} with benchmark task "
                f"{built.overlap.nearest!r} {built.overlap.fields}"
            )
    return built


def candidate_rows(
    cfg: SynthConfig, built: Built, v: Validation | None
) -> tuple[list[TaskRecord], list[TrialResult], list[Record]]:
    """(task records, trials, synth rows) recording one candidate."""
    a, parent = built.assignment, built.parent
    task = v.task if v is not None else built.task
    verdict = v.verdict if v is not None else built.verdict
    assert verdict is not None
    accepted = verdict == Verdict.ACCEPTED
    trials = v.trials if v is not None else []
    tasks: list[TaskRecord] = []
    if task is not None:
        tasks.append(
            task_record(
                task,
                pool=ACCEPTED_POOL if accepted else DISCARDED_POOL,
                assertion_count=ledger.assertion_count(task),
            )
        )
    row = SynthCandidateRecord(
        campaign=cfg.campaign,
        candidate_hash=task.content_hash if task is not None else ledger.placeholder_hash(a.key),
        assignment=a.key,
        round=a.round,
        slot=a.slot,
        parent_hash=a.parent_hash,
        root_seed=a.root_seed,
        operator=a.operator,
        family=a.family,
        chain=[*parent.chain, a.operator],
        status=ledger.ACCEPTED if accepted else ledger.DISCARDED,
        reason=verdict.value,
        detail=(v.detail if v is not None else built.detail)[:2000],
        repairs=list(v.repairs) if v is not None else [],
        trial_ids=[t.trial_id for t in trials],
        new_assertions=list(v.new_assertions) if v is not None else [],
        solution_steps=(solution_steps(task) or 0) if task is not None else 0,
        assertion_count=ledger.assertion_count(task) if task is not None else 0,
        instruction_chars=len(task.instruction) if task is not None else 0,
        decontam_score=built.overlap.score if built.overlap else None,
        decontam_nearest=built.overlap.nearest if built.overlap else None,
        synthesis_s=built.synthesis_s,
        sandbox_s=v.sandbox_s if v is not None else 0.0,
    )
    rows: list[Record] = [row]
    if accepted and v is not None and v.profile is not None:
        rows.append(ledger.profile_record(v.profile))
    return tasks, trials, rows


def round_stats(
    cfg: SynthConfig,
    round_: int,
    parents: int,
    rows: list[SynthCandidateRecord],
    timing: Timing,
    wall_s: float,
) -> SynthRoundRecord:
    acc = [r for r in rows if r.status == ledger.ACCEPTED]
    reasons = Counter(r.reason for r in rows if r.status == ledger.DISCARDED)

    def mean(values: list[int]) -> float | None:
        return round(statistics.fmean(values), 3) if values else None

    return SynthRoundRecord(
        campaign=cfg.campaign,
        round=round_,
        parents=parents,
        candidates=len(rows),
        accepted=len(acc),
        discarded=len(rows) - len(acc),
        discard_reasons=dict(sorted(reasons.items())),
        mean_solution_steps=mean([r.solution_steps for r in acc]),
        mean_assertions=mean([r.assertion_count for r in acc]),
        mean_instruction_chars=mean([r.instruction_chars for r in acc]),
        synthesis_s=round(sum(r.synthesis_s for r in rows), 3),
        sandbox_s=round(sum(r.sandbox_s for r in rows), 3),
        store_s=round(timing.store_s, 3),
        wall_s=round(wall_s, 3),
        config_json=cfg.to_json(),
    )


def run_round(
    store: Store,
    cfg: SynthConfig,
    round_: int,
    parents: list[Parent],
    ops: dict[str, Operator],
    index: BenchmarkIndex | None,
    *,
    progress: Progress | None = None,
    on_recorded: Hook | None = None,
) -> SynthRoundRecord:
    """Run (or finish) one round and record its stats row."""
    t_round = time.monotonic()
    timing = Timing()
    plan = sample_round(
        parents, ops, budget=cfg.per_round, round_=round_, seed=cfg.seed, caps=cfg.caps
    )
    done = ledger.candidates(store, cfg.campaign, round_)
    by_hash = {p.hash: p for p in parents}
    todo = [a for a in plan if a.key not in done]
    if progress:
        progress(f"round {round_}", len(plan) - len(todo), len(plan))

    def commit(built: Built, v: Validation | None) -> None:
        t0 = time.monotonic()
        tasks, trials, rows = candidate_rows(cfg, built, v)
        record_synthesis(store, tasks=tasks, trials=trials, rows=rows)
        timing.store_s += time.monotonic() - t0
        row = rows[0]
        assert isinstance(row, SynthCandidateRecord)
        done[built.assignment.key] = row
        if progress:
            progress(f"round {round_}", len([a for a in plan if a.key in done]), len(plan))
        if on_recorded:
            on_recorded(row)

    pool = ThreadPoolExecutor(max_workers=cfg.workers)
    try:
        futures: dict[Future[Validation], Built] = {}
        for a in todo:
            parent = by_hash[a.parent_hash]
            built = synthesize(a, parent, ops[a.operator], cfg.seed, index)
            if built.task is None or built.verdict is not None:
                commit(built, None)
                continue
            futures[pool.submit(validate, built.task, parent, cfg.validation)] = built
        for fut in as_completed(futures):
            commit(futures[fut], fut.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    rows = [done[a.key] for a in plan]
    stats = round_stats(cfg, round_, len(parents), rows, timing, time.monotonic() - t_round)
    record_synthesis(store, rows=[stats])
    return stats


def run_synthesis(
    cfg: SynthConfig,
    store: Store | Path | str | None = None,
    *,
    extra_operators: tuple[Operator, ...] = (),
    progress: Progress | None = None,
    on_recorded: Hook | None = None,
) -> list[SynthRoundRecord]:
    """Run rounds 1..cfg.rounds, resuming from whatever the warehouse already holds.

    Returns the stats rows of every round (recorded earlier or now). Stops early, after
    recording the round, when a round accepts nothing (the next round would have no parents).
    At the end every accepted task (of every campaign) is recorded as pool `rst` (rank =
    round, campaign, then slot; `record_pool` mints no new version when nothing changed).
    """
    store = store if isinstance(store, Store) else Store.open(store, create=True)
    ops = operator_registry(extra_operators)
    index = BenchmarkIndex.from_dir(cfg.benchmark, cfg.decontam) if cfg.benchmark else None
    recorded = ledger.round_rows(store, cfg.campaign)
    out: list[SynthRoundRecord] = []
    parents: list[Parent] | None = None
    for r in range(1, cfg.rounds + 1):
        if r in recorded:
            out.append(recorded[r])
            parents = None  # re-read lazily if a later round needs them
            if recorded[r].accepted == 0:
                break
            continue
        if parents is None:
            parents = (
                seed_parents(store, cfg, progress)
                if r == 1
                else ledger.accepted_parents(store, cfg.campaign, r - 1)
            )
        stats = run_round(
            store, cfg, r, parents, ops, index, progress=progress, on_recorded=on_recorded
        )
        out.append(stats)
        if stats.accepted == 0:
            break
        parents = ledger.accepted_parents(store, cfg.campaign, r)
    record_rst_pool(store)
    return out


def record_rst_pool(store: Store) -> None:
    """Re-record the RST pool: every accepted candidate of every campaign (no new version
    when nothing changed)."""
    accepted = rst_members(store)
    if accepted:
        record_pool(store, Pool.RST, accepted)
