"""The round engine: recursive task synthesis over the seed corpus, resumable from the warehouse.

Round r samples parents from the whole accepted pool (the profiled seeds and every task rounds
1..r-1 accepted), weighted toward under-extended lineages, under caps (`synthesis.sampler`),
builds each candidate with its operator, drops candidates too close to the benchmark
(`synthesis.decontam`), validates the rest in fresh sandboxes (`synthesis.validate`), and
records every candidate. A round is complete when its `synth_rounds` row exists.

Where the work runs: the driver (`run_synthesis`) only schedules and records. Each
candidate's whole work (operator, LLM calls, decontamination, validation trials, repairs) is
one task of the campaign's executor (`candidate:<campaign>:<assignment>`: a thread of this
process by default, a node of a Ray cluster with `executor.address`), and so is each
reference-agent trial and each seed's profiling. One executor serves the whole campaign: on a
cluster one Ray connection, so workers and image-cache affinity persist across rounds.
Operators travel to the nodes with the task; an LLM operator's client is rebuilt there from
its settings (`_portable_llm_client`). The driver commits candidates in batches
(`warehouse.journal`: every candidate journaled durably as it arrives, `commit_every` of them
or `commit_interval_s` per commit), so a killed driver loses nothing it had been sent.

Resume: assignments are a pure function of (parents, descendant counts, seed, caps), all read
back from the warehouse as they were when the round started (earlier rounds are complete), so
a re-run re-derives the same assignments; those with a recorded candidate row are reused, the
rest are built and validated. Nothing is recorded twice (rows are keyed; the first write wins)
and nothing committed is lost.
"""

from __future__ import annotations

import copyreg
import hashlib
import json
import logging
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, as_completed, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from executor import Executor, ExecutorConfig, TrialLost, open_executor
from sandbox.gc import collect_garbage
from synthesis import ledger
from synthesis.decontam import BenchmarkIndex, DecontamConfig, Overlap
from synthesis.difficulty import distinct_tools, files_touched
from synthesis.instruction import Stage, dependency_depth, stages_to_json
from synthesis.llm import LLMClient
from synthesis.operators import Operator, Parent, RewriteContext, RewriteError, build_child
from synthesis.operators import registry as operator_registry
from synthesis.operators.extension import Extension, Feedback, child_stage
from synthesis.profile import profile_task
from synthesis.reference import AgentFactory, reference_trial, reward_share
from synthesis.sampler import Assignment, Caps, sample_round
from synthesis.validate import Validation, ValidationConfig, Verdict, validate
from tasks.corpus import import_dir, load_seeds
from tasks.model import Task
from tasks.pools import Pool
from tasks.results import TrialResult
from warehouse.journal import DEFAULT_EVERY, DEFAULT_INTERVAL_S, BatchedWriter
from warehouse.locks import single_writer
from warehouse.pools import record_pool, rst_members
from warehouse.recording import record_synthesis, synthesis_records, tables_of
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
log = logging.getLogger(__name__)

# What validates a candidate: `validate`, or a stand-in (benchmarks/scale.py's calibrated one).
Validator = Callable[[Task, Parent, ValidationConfig, Stage], Validation]


def _portable_llm_client(client: LLMClient) -> tuple[type[LLMClient], tuple[Any, ...]]:
    """How an LLM operator's client crosses to a cluster node: rebuilt there from its
    settings (its OpenAI client holds locks and connections, which do not pickle)."""
    return LLMClient, (client.settings,)


copyreg.pickle(LLMClient, _portable_llm_client)


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
    # Accepted tasks per round a reference agent attempts, when one is given (0: none).
    reference_sample: int = 4
    # Where candidates are built and validated: `local` threads (default; `workers` of them)
    # or a Ray cluster (docs/scale.md).
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    # Candidates per warehouse commit, or seconds the oldest waits: whichever comes first.
    commit_every: int = DEFAULT_EVERY
    commit_interval_s: float = DEFAULT_INTERVAL_S

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.per_round < 1 or self.workers < 1:
            raise ValueError(f"rounds, per_round and workers must be >= 1, got {self!r}")
        if self.reference_sample < 0:
            raise ValueError(f"reference_sample must be >= 0, got {self.reference_sample!r}")
        if self.commit_every < 1 or self.commit_interval_s < 0:
            raise ValueError(
                "commit_every must be >= 1 and commit_interval_s >= 0, got "
                f"{self.commit_every!r}, {self.commit_interval_s!r}"
            )

    @property
    def journal(self) -> str:
        """The campaign's journal stream (`warehouse.journal`): its name, made a key."""
        digest = hashlib.sha256(self.campaign.encode()).hexdigest()[:8]
        return f"synthesis-{re.sub(r'[^A-Za-z0-9._-]+', '-', self.campaign)[:60]}-{digest}"

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
Log = Callable[[str], None]  # a line for the caller's log (base images built or waited for)
Hook = Callable[[SynthCandidateRecord], None]  # after each candidate is committed


def load_seed_tasks(cfg: SynthConfig) -> list[Task]:
    if cfg.seeds_dir is not None:
        tasks, _ = import_dir(cfg.seeds_dir)
    else:
        tasks = load_seeds()
    if cfg.seed_ids:
        tasks = [t for t in tasks if t.id in cfg.seed_ids]
    return sorted(tasks, key=lambda t: t.id)


def open_campaign_executor(cfg: SynthConfig) -> Executor:
    """The executor of a campaign (one per campaign: one Ray connection on a cluster); a
    worker that dies there has its sandboxes' remains reclaimed on its node."""
    return open_executor(cfg.executor, workers=cfg.workers, reclaim=collect_garbage)


def seed_parents(
    store: Store,
    cfg: SynthConfig,
    progress: Progress | None = None,
    log: Log | None = None,
    executor: Executor | None = None,
) -> list[Parent]:
    """Round-0 parents: seed tasks with a passing profile (profiling and recording them once,
    each profile a task of `executor`, the campaign's, else one opened for the call).
    With `log`, the seeds' base images are had first in this process (workers' builds cannot
    reach the caller's log), so a base being built or waited for is said, not minutes of
    silence."""
    tasks = load_seed_tasks(cfg)
    known = ledger.profiles(store, [t.content_hash for t in tasks])
    todo = [t for t in tasks if t.content_hash not in known]
    if todo:
        if log is not None and cfg.executor.local and cfg.validation.backend == "local":
            from sandbox.build import prepare_bases

            prepare_bases(todo, log=log)
        record_synthesis(store, tasks=[task_record(t, pool=SEED_POOL) for t in todo])
        pool = executor or open_campaign_executor(cfg)
        try:
            futures = {
                pool.submit(f"profile:{t.content_hash}", profile_task, t, cfg.validation.backend,
                            affinity=t.environment_hash): t
                for t in todo
            }  # fmt: skip
            for i, fut in enumerate(as_completed(futures), 1):
                prof, trials = fut.result()
                record_synthesis(store, trials=trials, rows=[ledger.profile_record(prof)])
                known[prof.task_hash] = prof
                if progress:
                    progress("profile seeds", i, len(todo))
        finally:
            if executor is None:
                pool.shutdown(wait=False, cancel_futures=True)
    return [Parent(t, known[t.content_hash]) for t in tasks if known[t.content_hash].ok]


@dataclass
class Built:
    """A synthesized candidate before validation (or the reason there is none)."""

    assignment: Assignment
    parent: Parent
    task: Task | None
    synthesis_s: float
    stage: Stage | None = None
    extension: Extension | None = None
    verdict: Verdict | None = None  # set when discarded before the sandbox
    detail: str = ""
    overlap: Overlap | None = None
    reference_reward: float | None = None  # the reference agent's share, when it was run


def synthesize(
    a: Assignment,
    parent: Parent,
    op: Operator,
    seed: int,
    index: BenchmarkIndex | None,
    backend: str = "local",
) -> Built:
    """Build the candidate of one assignment and screen it against the benchmark."""
    t0 = time.monotonic()
    try:
        ext = op.extend(parent, RewriteContext(a.round, a.rng(seed), backend))
        task = build_child(parent, op.name, op.family, a.round, ext)
    except (RewriteError, ValueError) as e:
        verdict = Verdict.INVALID_LLM_OUTPUT if op.family == "llm" else Verdict.REWRITE_ERROR
        return Built(a, parent, None, time.monotonic() - t0, verdict=verdict, detail=str(e)[:1000])
    stage = child_stage(parent, op.name, op.family, a.round, ext)
    built = Built(a, parent, task, time.monotonic() - t0, stage=stage, extension=ext)
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
    if verdict is None:
        raise ValueError(f"candidate {a.key} has neither a validation nor an early verdict")
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
    stages = [*parent.stages, built.stage] if built.stage is not None else list(parent.stages)
    m = v.measures if v is not None else None
    flow = m.flow if m is not None else None
    profile = v.profile if v is not None else None
    script = (task.solution or {}).get("solve.sh", b"").decode("utf-8", "replace") if task else ""
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
        stages_json=stages_to_json(stages),
        offending=list(v.offending) if v is not None else [],
        dependency_ok=m.dependency_ok if m else None,
        nop_share=m.nop_share if m else None,
        ext_only_share=m.ext_only_share if m else None,
        free_reward_share=m.free_reward_share if m else None,
        coverage=m.coverage if m else None,
        uncovered=list(m.uncovered) if m else [],
        distinct_tools=len(distinct_tools(script, task.environment.workdir)) if task else None,
        files_touched=files_touched(profile) if profile is not None else None,
        dependency_depth=dependency_depth(parent.core_outputs, stages),
        reference_reward=built.reference_reward,
        flow_dependent=list(flow.dependent) if flow else None,
        flow_independent=list(flow.independent) if flow else None,
        flow_inconclusive=list(flow.inconclusive) if flow else None,
        flow_perturbed=list(flow.perturbed) if flow else None,
        flow_hacked=list(flow.hacked) if flow else None,  # issue 33: hacks after the parent
        ext_only_free_share=m.ext_only_free_share if m else None,
        parent_solution_share=m.parent_share if m else None,
        chain_depth=len(parent.chain) + 1,
    )
    rows: list[Record] = [row]
    if accepted and profile is not None and m is not None:
        rows.append(ledger.profile_record(profile.model_copy(update={"nop_passed": m.nop_passed})))
    return tasks, trials, rows


def round_stats(
    cfg: SynthConfig,
    round_: int,
    parents: int,
    rows: list[SynthCandidateRecord],
    timing: Timing,
    wall_s: float,
    seeds_with_descendants: int | None = None,
) -> SynthRoundRecord:
    acc = [r for r in rows if r.status == ledger.ACCEPTED]
    reasons = Counter(r.reason for r in rows if r.status == ledger.DISCARDED)

    def mean(values: list[int] | list[float]) -> float | None:
        return round(statistics.fmean(values), 3) if values else None

    def present(values: list[float | int | bool | None]) -> list[float]:
        return [float(x) for x in values if x is not None]

    free = present([r.free_reward_share for r in acc])
    ref = present([r.reference_reward for r in acc])
    parent_share = present([r.parent_solution_share for r in acc])
    depths = [r.chain_depth for r in acc if r.chain_depth is not None]
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
        dependency_ok_share=mean(present([r.dependency_ok for r in acc])),
        mean_free_reward_share=mean(free),
        max_free_reward_share=max(free) if free else None,
        coverage_share=mean([1.0 if r.coverage == 1.0 else 0.0 for r in acc]),
        seeds_with_descendants=seeds_with_descendants,
        mean_distinct_tools=mean(present([r.distinct_tools for r in acc])),
        mean_files_touched=mean(present([r.files_touched for r in acc])),
        mean_dependency_depth=mean(present([r.dependency_depth for r in acc])),
        reference_sampled=len(ref),
        reference_pass_rate=mean([1.0 if x >= 1.0 else 0.0 for x in ref]),
        mean_parent_solution_share=mean(parent_share),
        max_parent_solution_share=max(parent_share) if parent_share else None,
        mean_chain_depth=mean(depths),
        max_chain_depth=max(depths) if depths else None,
        dependency_rejects=reasons.get(Verdict.DEPENDENCY_MISSING.value, 0),
    )


def round_parents(
    store: Store,
    cfg: SynthConfig,
    round_: int,
    progress: Progress | None = None,
    log: Log | None = None,
    executor: Executor | None = None,
) -> list[Parent]:
    """The pool round `round_` samples from: profiled seeds and everything accepted before it."""
    seeds = seed_parents(store, cfg, progress, log, executor)
    return seeds + ledger.pool_parents(store, cfg.campaign, round_)


def validate_on(
    remote: Executor | None,
    a: Assignment,
    task: Task,
    parent: Parent,
    vcfg: ValidationConfig,
    stage: Stage,
    validator: Validator = validate,
) -> Validation:
    """`validator` here (`remote` None: where the candidate's task runs), or as one trial of
    `remote` preferring nodes holding the environment's image. A trial the cluster lost for
    good is an infrastructure verdict, never a defect of the candidate."""
    if remote is None:
        return validator(task, parent, vcfg, stage)
    trial_id = f"validate:{a.key}:{task.content_hash}"
    fut = remote.submit(
        trial_id, validator, task, parent, vcfg, stage, affinity=task.environment_hash
    )
    try:
        return fut.result()
    except TrialLost as e:
        return Validation(task=task, verdict=Verdict.INFRASTRUCTURE_ERROR, detail=str(e)[:1000])


def build_and_validate(
    cfg: SynthConfig,
    a: Assignment,
    parent: Parent,
    op: Operator,
    index: BenchmarkIndex | None,
    reference: Callable[[], AgentFactory | None] | None = None,
    remote: Executor | None = None,
    validator: Validator = validate,
) -> tuple[Built, Validation | None]:
    """One candidate: build it, screen it, validate it; an operator that can revise (the LLM
    operator) gets the validation's findings back, at most `max_repairs` times. Once accepted,
    `reference()` (a sampling slot: an agent factory, or None) may run the reference agent.
    The round engine runs this whole function as one executor task per candidate."""
    built = synthesize(a, parent, op, cfg.seed, index, cfg.validation.backend)
    if built.task is None or built.verdict is not None or built.stage is None:
        return built, None
    v = validate_on(remote, a, built.task, parent, cfg.validation, built.stage, validator)
    ext = built.extension
    for _ in range(cfg.validation.max_repairs):
        if v.accepted or not v.verdict.about_candidate or ext is None:
            break
        t0 = time.monotonic()
        ctx = RewriteContext(a.round, a.rng(cfg.seed), cfg.validation.backend)
        feedback = Feedback(v.verdict.value, v.detail, list(v.offending), failing_messages(v))
        try:
            revised = op.revise(parent, ctx, ext, feedback)
            if revised is None:
                break
            task = build_child(parent, op.name, op.family, a.round, revised)
        except (RewriteError, ValueError) as e:
            v.repairs.append(f"{v.verdict}: revision failed: {str(e)[:300]}")
            break
        built.synthesis_s += time.monotonic() - t0
        ext, built.extension = revised, revised
        built.task, built.stage = task, child_stage(parent, op.name, op.family, a.round, revised)
        before = v
        v = validate_on(remote, a, task, parent, cfg.validation, built.stage, validator)
        v.trials = [*before.trials, *v.trials]
        v.repairs = [*before.repairs, f"{before.verdict}: revised by {op.name}", *v.repairs]
        v.sandbox_s += before.sandbox_s
    make_agent = reference() if reference is not None and v.accepted else None
    if make_agent is not None:
        return run_reference(built, v, make_agent, cfg.validation.backend)
    return built, v


@dataclass
class Candidate:
    """A candidate as its executor task hands it back: its row and every row recording it,
    made where it ran (the driver only journals and commits them), and, when the driver may
    still run the reference agent on it, what that needs (`built`, `validation`)."""

    row: SynthCandidateRecord
    tables: dict[str, pa.Table]
    built: Built | None = None
    validation: Validation | None = None

    @property
    def accepted(self) -> bool:
        return self.row.status == ledger.ACCEPTED


def recorded(cfg: SynthConfig, built: Built, v: Validation | None, keep: bool) -> Candidate:
    """The rows recording one candidate (`candidate_rows`), as the Arrow tables of a commit;
    with `keep`, the candidate itself too."""
    task_rows, trials, synth_rows = candidate_rows(cfg, built, v)
    row = synth_rows[0]
    if not isinstance(row, SynthCandidateRecord):
        raise TypeError(f"first synthesis row must be a candidate row, got {type(row)}")
    tables = tables_of(synthesis_records(tasks=task_rows, trials=trials, rows=synth_rows))
    return Candidate(row, tables, built if keep else None, v if keep else None)


def candidate_task(
    cfg: SynthConfig,
    a: Assignment,
    parent: Parent,
    op: Operator,
    index: BenchmarkIndex | None,
    validator: Validator,
    keep: bool,
) -> Candidate:
    """One candidate's executor task: `build_and_validate` and the rows recording it."""
    built, v = build_and_validate(cfg, a, parent, op, index, None, None, validator)
    return recorded(cfg, built, v, keep and v is not None and v.accepted)


def reference_task(cfg: SynthConfig, c: Candidate, make_agent: AgentFactory) -> Candidate:
    """An accepted candidate's reference-agent trial, as an executor task: its rows again."""
    if c.built is None or c.validation is None:
        raise ValueError(f"candidate {c.row.assignment} came back without its task")
    built, v = run_reference(c.built, c.validation, make_agent, cfg.validation.backend)
    return recorded(cfg, built, v, keep=False)


def run_reference(
    built: Built, v: Validation, make_agent: AgentFactory, backend: str
) -> tuple[Built, Validation]:
    """The reference agent's trial on an accepted candidate, recorded with it (a trial that
    failed for infrastructure is not counted). One executor task in the round engine."""
    t0 = time.monotonic()
    trial = reference_trial(v.task, make_agent, backend)
    if trial is not None:
        v.trials.append(trial)
        built.reference_reward = reward_share(trial)
    v.sandbox_s += time.monotonic() - t0
    return built, v


def failing_messages(v: Validation) -> list[str]:
    """`name: message` of the new assertions that failed in the latest oracle trial."""
    oracle = [t for t in v.trials if t.agent == "oracle"]
    if not oracle:
        return []
    new = set(v.new_assertions)
    return [
        f"{a.name}: {a.message[:300]}" for a in oracle[-1].assertions if not a.ok and a.name in new
    ]


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
    reference: AgentFactory | None = None,
    executor: Executor | None = None,
    writer: BatchedWriter | None = None,
    validator: Validator = validate,
) -> SynthRoundRecord:
    """Run (or finish) one round and record its stats row.

    The driver's part only: each candidate still to do is one task of `executor` (the
    campaign's; else one opened for the round) running `build_and_validate` where it lands,
    an accepted one may get a second task for the reference agent, and each result is
    journaled and committed through `writer` (the campaign's; else one for the round),
    flushed before the round's stats are read back."""
    t_round = time.monotonic()
    timing = Timing()
    plan = sample_round(
        parents,
        ops,
        budget=cfg.per_round,
        round_=round_,
        seed=cfg.seed,
        caps=cfg.caps,
        descendants=ledger.accepted_descendants(store, cfg.campaign, before_round=round_),
        children=ledger.accepted_children(store, cfg.campaign, before_round=round_),
        free_reward_cap=cfg.validation.free_reward_cap,
    )
    done = ledger.candidates(store, cfg.campaign, round_)
    by_hash = {p.hash: p for p in parents}
    todo = [a for a in plan if a.key not in done]
    if progress:
        progress(f"round {round_}", len(plan) - len(todo), len(plan))

    def committed(tags: list[object]) -> None:
        for row in tags:
            if not isinstance(row, SynthCandidateRecord):
                raise TypeError(f"a candidate's tag must be its candidate row, got {type(row)}")
            done[row.assignment] = row
        if progress:
            progress(f"round {round_}", len([a for a in plan if a.key in done]), len(plan))
        if on_recorded:
            for row in tags:
                on_recorded(row)  # type: ignore[arg-type]

    ex = executor or open_campaign_executor(cfg)
    w = writer or BatchedWriter(
        store, cfg.journal, every=cfg.commit_every, interval_s=cfg.commit_interval_s
    )
    previous_hook, w.on_commit = w.on_commit, committed
    flushed = len(w.stats.seconds)
    slots = cfg.reference_sample - sum(r.reference_reward is not None for r in done.values())
    # What many candidates of the round receive goes to the cluster once (a parent's bundle
    # shipped with each of its children was most of what the driver spent submitting).
    shared_index = ex.share(index) if index is not None and todo else None
    shared: dict[str, Any] = {}
    if todo:
        shared = {"cfg": ex.share(cfg), "validator": ex.share(validator)}
        shared |= {f"op:{a.operator}": ex.share(ops[a.operator]) for a in todo}
        shared |= {f"parent:{a.parent_hash}": ex.share(by_hash[a.parent_hash]) for a in todo}
    # Each future: its assignment, trial id, and whether it is the reference agent's task.
    tasks: dict[Future[Candidate], tuple[Assignment, str, bool]] = {}
    try:
        keep = reference is not None and slots > 0
        for a in todo:
            parent = by_hash[a.parent_hash]
            trial_id = f"candidate:{cfg.campaign}:{a.key}"
            fut = ex.submit(
                trial_id, candidate_task, shared["cfg"], a, shared[f"parent:{a.parent_hash}"],
                shared[f"op:{a.operator}"], shared_index, shared["validator"], keep,
                affinity=parent.task.environment_hash,
            )  # fmt: skip
            tasks[fut] = (a, trial_id, False)
        pending = set(tasks)
        while pending:
            finished, pending = wait(pending, timeout=w.wait_s(), return_when=FIRST_COMPLETED)
            for fut in finished:
                a, trial_id, was_reference = tasks[fut]
                c = candidate_result(cfg, fut, a, by_hash[a.parent_hash])
                ex.forget(trial_id)  # a long campaign's executor keeps no settled record
                if not was_reference and reference is not None and slots > 0 and c.accepted:
                    slots -= 1
                    ref_id = f"reference:{cfg.campaign}:{a.key}"
                    ref = ex.submit(ref_id, reference_task, cfg, c, reference)
                    tasks[ref] = (a, ref_id, True)
                    pending.add(ref)
                    continue
                w.add_tables(c.tables, tag=c.row)
            w.maybe_flush()
        w.flush()
    except BaseException:
        try:
            w.flush()  # journaled anyway; committed now what an interrupted round had
        except Exception as e:  # noqa: BLE001 - the original failure is what to report
            log.warning("synthesis round %d: could not commit on the way out: %s", round_, e)
        raise
    finally:
        w.on_commit = previous_hook
        timing.store_s = sum(w.stats.seconds[flushed:])
        if executor is None:
            ex.shutdown(wait=False, cancel_futures=True)
        else:
            for fut, (_, trial_id, _) in tasks.items():
                if not fut.done():
                    ex.cancel(trial_id)
    rows = [done[a.key] for a in plan]
    seeds = len(ledger.accepted_descendants(store, cfg.campaign))
    stats = round_stats(cfg, round_, len(parents), rows, timing, time.monotonic() - t_round, seeds)
    record_synthesis(store, rows=[stats])
    return stats


def candidate_result(
    cfg: SynthConfig, fut: Future[Candidate], a: Assignment, parent: Parent
) -> Candidate:
    """A candidate task's result; a task the cluster lost for good is the candidate's
    `infrastructure_error` (not evidence about it), never a crash of the round."""
    try:
        return fut.result()
    except TrialLost as e:
        lost = Built(a, parent, None, 0.0, verdict=Verdict.INFRASTRUCTURE_ERROR, detail=str(e))
        return recorded(cfg, lost, None, keep=False)


@single_writer("synthesis campaign {cfg.campaign!r}")
def run_synthesis(
    cfg: SynthConfig,
    store: Store | Path | str | None = None,
    *,
    extra_operators: tuple[Operator, ...] = (),
    progress: Progress | None = None,
    on_recorded: Hook | None = None,
    reference: AgentFactory | None = None,
    log: Log | None = None,
    validator: Validator = validate,
) -> list[SynthRoundRecord]:
    """Run rounds 1..cfg.rounds, resuming from whatever the warehouse already holds (and
    first committing what a killed run of this campaign had journaled).

    Returns the stats rows of every round (recorded earlier or now). Each round samples from
    the whole pool accepted so far; it stops early only when that pool is empty. At the end
    every accepted task (of every campaign) is recorded as pool `rst` (rank = round,
    campaign, then slot; `record_pool` mints no new version when nothing changed).
    """
    store = store if isinstance(store, Store) else Store.open(store, create=True)
    ops = operator_registry(extra_operators)
    index = BenchmarkIndex.from_dir(cfg.benchmark, cfg.decontam) if cfg.benchmark else None
    writer = BatchedWriter(
        store, cfg.journal, every=cfg.commit_every, interval_s=cfg.commit_interval_s
    )
    replayed = writer.replay()  # what a killed driver of this campaign journaled
    if replayed is not None and log is not None:
        log(f"committed {sum(replayed.written.values())} rows a killed run had journaled")
    recorded = ledger.round_rows(store, cfg.campaign)
    out: list[SynthRoundRecord] = []
    executor = open_campaign_executor(cfg)
    try:
        for r in range(1, cfg.rounds + 1):
            if r in recorded:
                out.append(recorded[r])
                continue
            parents = round_parents(store, cfg, r, progress, log, executor)
            if not parents:
                break
            stats = run_round(
                store,
                cfg,
                r,
                parents,
                ops,
                index,
                progress=progress,
                on_recorded=on_recorded,
                reference=reference,
                executor=executor,
                writer=writer,
                validator=validator,
            )
            out.append(stats)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    record_rst_pool(store)
    return out


def record_rst_pool(store: Store) -> None:
    """Re-record the RST pool: every accepted candidate of every campaign (no new version
    when nothing changed)."""
    accepted = rst_members(store)
    if accepted:
        record_pool(store, Pool.RST, accepted)
