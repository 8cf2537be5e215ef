"""Evaluation of a policy on held-out tasks: k samples per task, resolved %, dense score and a
per-category table; rows for the warehouse's `evaluations` table.

Infrastructure failures (sandbox, environment build, verifier never ran) are no evidence about
the policy: they are recorded as rows with their failure mode, excluded from every rate and
score, and counted in `infrastructure_failures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training.harness import HarnessConfig, Rollout
from training.rollouts import RolloutJob, plan_jobs

if TYPE_CHECKING:
    from executor import ExecutorConfig
    from tasks.model import Task
    from warehouse import EvaluationRecord

EVAL_SEED_STEP = 1_000_000
"""Evaluation sampling seeds use this step number, so they never repeat a training trial's."""


@dataclass
class CategoryScore:
    samples: int
    resolved: int
    dense_score: float
    """Mean passing assertions per sample."""


@dataclass
class EvaluationSummary:
    """One evaluation of the current weights on the held-out tasks (k samples each)."""

    campaign: str
    run_id: str
    step: int
    """The last trained step (-1: the initial weights)."""
    checkpoint: str
    benchmark: str
    tasks: int
    samples: int
    """Rewardable samples: infrastructure failures are excluded and counted apart."""
    resolved: int
    dense_score: float
    """Mean number of passing assertions per sample."""
    dense_fraction: float
    """Mean of passing / total assertions per sample."""
    infrastructure_failures: int = 0
    per_category: dict[str, CategoryScore] = field(default_factory=dict)
    stop_rate: float = 0.0
    """Share of the rewardable samples the policy ended by answering without a tool call."""
    turn_limit_rate: float = 0.0
    """Share of the rewardable samples cut at the turn limit (a gain bought by running out the
    clock shows here, beside the score)."""

    @property
    def resolved_rate(self) -> float:
        return self.resolved / self.samples if self.samples else 0.0

    def metadata(self) -> dict[str, Any]:
        """Flat scalar metadata, the shape `pipelines.reporting.report_evaluation` takes."""
        meta: dict[str, Any] = {
            "campaign": self.campaign,
            "run_id": self.run_id,
            "step": self.step,
            "checkpoint": self.checkpoint,
            "benchmark": self.benchmark,
            "tasks": self.tasks,
            "samples": self.samples,
            "infrastructure_failures": self.infrastructure_failures,
            "validate/pass_rate": self.resolved_rate,
            "validate/dense_score": self.dense_score,
            "validate/dense_fraction": self.dense_fraction,
            "validate/stop_rate": self.stop_rate,
            "validate/turn_limit_rate": self.turn_limit_rate,
        }
        for cat, s in sorted(self.per_category.items()):
            meta[f"category/{cat}/pass_rate"] = s.resolved / s.samples if s.samples else 0.0
            meta[f"category/{cat}/dense_score"] = s.dense_score
        return meta

    def category_table(self) -> str:
        """The per-category table as markdown."""
        lines = ["| category | samples | resolved % | dense score |", "|---|---|---|---|"]
        for cat, s in sorted(self.per_category.items()):
            rate = 100.0 * s.resolved / s.samples if s.samples else 0.0
            lines.append(f"| {cat} | {s.samples} | {rate:.1f} | {s.dense_score:.2f} |")
        return "\n".join(lines)


def evaluation_jobs(tasks: Sequence[Task], samples: int, *, seed: int | None) -> list[RolloutJob]:
    """Every task `samples` times, task by task; the same seeds at every evaluation, so two
    checkpoints are compared on the same draws of the sampler's randomness."""
    return plan_jobs(
        tasks,
        list(range(len(tasks))),
        samples_per_task=samples,
        launch=len(tasks) * samples,
        step=EVAL_SEED_STEP,
        seed=seed,
    )


def evaluation_rows(
    jobs: Sequence[RolloutJob],
    rollouts: Sequence[Rollout],
    *,
    run_id: str,
    checkpoint: str,
    benchmark: str,
    weight_version: int | None,
) -> list[EvaluationRecord]:
    """One `evaluations` row per sample (attempt = its sample index), failures included."""
    from warehouse import EvaluationRecord

    return [
        EvaluationRecord(
            campaign=run_id,
            checkpoint=checkpoint,
            benchmark=benchmark,
            task_hash=r.trial.task_hash,
            attempt=job.sample,
            task_id=job.task.id,
            resolved=r.trial.resolved,
            dense_score=float(r.trial.passed),
            category=job.task.category,
            assertions_total=r.trial.total,
            failure_mode=r.trial.failure_mode,
            weight_version=weight_version,
        )
        for job, r in zip(jobs, rollouts, strict=True)
    ]


def summarize_evaluation(
    jobs: Sequence[RolloutJob],
    rollouts: Sequence[Rollout],
    *,
    campaign: str,
    run_id: str,
    step: int,
    checkpoint: str,
    benchmark: str,
) -> EvaluationSummary:
    """Resolved %, dense score, dense fraction and the per-category table of the rewardable
    samples; infrastructure failures counted apart."""
    scored = [(job, r) for job, r in zip(jobs, rollouts, strict=True) if r.trial.rewardable]
    per_category: dict[str, CategoryScore] = {}
    for job, r in scored:
        cs = per_category.setdefault(str(job.task.category), CategoryScore(0, 0, 0.0))
        cs.dense_score = (cs.dense_score * cs.samples + r.trial.passed) / (cs.samples + 1)
        cs.samples += 1
        cs.resolved += int(r.trial.resolved)
    n = len(scored)
    fractions = [r.trial.passed / r.trial.total for _, r in scored if r.trial.total]
    return EvaluationSummary(
        campaign=campaign,
        run_id=run_id,
        step=step,
        checkpoint=checkpoint,
        benchmark=benchmark,
        tasks=len({job.task.id for job in jobs}),
        samples=n,
        resolved=sum(r.trial.resolved for _, r in scored),
        dense_score=sum(r.trial.passed for _, r in scored) / n if n else 0.0,
        dense_fraction=sum(fractions) / n if n else 0.0,
        infrastructure_failures=len(rollouts) - n,
        per_category=per_category,
        stop_rate=sum(r.trajectory.stop == "finished" for _, r in scored) / n if n else 0.0,
        turn_limit_rate=sum(r.trajectory.stop == "turn_limit" for _, r in scored) / n if n else 0.0,
    )


def evaluate_policy(
    policy_path: Path,
    tasks: Sequence[Task],
    *,
    samples: int,
    harness: HarnessConfig,
    workers: int = 4,
    backend: str = "local",
    seed: int = 0,
    benchmark: str = "heldout",
    executor: ExecutorConfig | None = None,
    engine_host: str = "127.0.0.1",
    device: str = "cpu",
) -> tuple[EvaluationSummary, list[Rollout]]:
    """Evaluate a checkpoint outside a campaign: its own local engine, `workers` trials at
    once, every task `samples` times at `harness.temperature`; on a cluster `executor` the
    trials run on its nodes and reach the engine at `engine_host` (docs/scale.md). `device`:
    where the engine runs (cpu, cuda, auto)."""
    from training.chat_tokenizer import load_chat_tokenizer
    from training.engine_local import LocalEngine
    from training.engine_protocol import EngineClient
    from training.policy import routing_shape
    from training.rollouts import RolloutPool

    tokenizer = load_chat_tokenizer(Path(policy_path))
    jobs = evaluation_jobs(tasks, samples, seed=seed)
    with LocalEngine(
        Path(policy_path), seed=seed, skip_tokenizer_init=True, host=engine_host,
        device=device,  # type: ignore[arg-type]
    ) as engine:  # fmt: skip
        layers, top_k = routing_shape(engine.model.config)
        client = EngineClient(engine.base_url, num_layers=layers, top_k=top_k)
        if layers == 0:
            harness = harness.model_copy(update={"return_routed_experts": False})
        pool = RolloutPool(
            client, tokenizer, workers=workers, backend=backend, executor=executor,
            name=f"evaluation-{Path(policy_path).name}",
        )  # fmt: skip
        try:
            rollouts = pool.run_all(jobs, harness)
        finally:
            pool.close()
            client.close()
    summary = summarize_evaluation(
        jobs, rollouts, campaign="evaluation", run_id=str(policy_path), step=-1,
        checkpoint=Path(policy_path).name, benchmark=benchmark,
    )  # fmt: skip
    return summary, rollouts
