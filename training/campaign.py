"""The PPO campaign: `run_campaign` reads top to bottom and calls the pieces defined below it.

Per step (paper, sections 2, 4 and 5):
  draw tasks (seeded per-epoch permutation of the pool) -> rollouts (harness in real sandboxes)
  -> assemble (TITO: ids, loss mask, sampler logprobs, routing) -> advantages (dense reward =
  passing assertions at the final response token; GAE with the pre-update critic's values)
  -> update the critic, then the actor (R3 replay of the recorded routing) -> publish weights
  with a new version, generation paused first -> log metrics -> record trajectories
  -> every `eval_every` steps: evaluate held-out tasks, record them, hand them to `on_evaluation`.

The pieces are plain functions over a `Campaign` (the models, optimizers and engine of one run)
so an orchestrator can wrap each one (pipelines/flows.py) without re-implementing any of them.
Metric names are a stable namespace, documented in docs/ppo.md.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from training.campaign_config import CampaignConfig
from training.chat_format import IM_END
from training.critic import Critic, load_critic
from training.engine_protocol import EngineClient
from training.harness import PolicyAgent, Rollout, rollout_trial
from training.logprobs import mean_abs_gap, stream_logprobs
from training.policy import load_policy, save_policy
from training.ppo_math import approx_kl, final_token_rewards, gae, policy_loss, value_loss
from training.tito import RolloutSample, assemble_trial
from warehouse.permutation import epoch_permutation

if TYPE_CHECKING:
    from tasks.model import Task

Metrics = dict[str, float]
EvaluationHook = Callable[["EvaluationSummary"], None]


# ---- the loop -------------------------------------------------------------------------------
def run_campaign(
    cfg: CampaignConfig,
    *,
    tasks: Sequence[Task] | None = None,
    eval_tasks: Sequence[Task] | None = None,
    on_evaluation: EvaluationHook | None = None,
) -> CampaignResult:
    """Run `cfg.steps` PPO steps; returns every step's metrics and every evaluation.

    `tasks` / `eval_tasks` default to `campaign_tasks(cfg)`. `on_evaluation` receives each
    evaluation after it is recorded (the orchestration layer reports it to Dagster with it).
    """
    if tasks is None or eval_tasks is None:
        default_train, default_eval = campaign_tasks(cfg)
        tasks = default_train if tasks is None else tasks
        eval_tasks = default_eval if eval_tasks is None else eval_tasks
    c = setup(cfg, tasks, eval_tasks)
    result = CampaignResult(run_dir=c.run_dir)
    try:
        for step in range(cfg.steps):
            t0 = time.monotonic()
            rollouts = collect_rollouts(c, step)
            batch = assemble(c, rollouts)
            compute_advantages(c, batch)
            metrics = update_critic(c, batch)
            if step >= cfg.critic_warmup_steps:
                metrics |= update_actor(c, batch)
            metrics |= publish_weights(c, step)
            metrics |= rollout_metrics(rollouts, batch)
            metrics["perf/step_seconds"] = time.monotonic() - t0
            log_metrics(c, step, metrics)
            record_trajectories_of(c, step, rollouts)
            result.metrics.append(metrics)
            if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                summary = evaluate(c, step)
                result.evaluations.append(summary)
                if on_evaluation is not None:
                    on_evaluation(summary)
    finally:
        close(c)
    return result


# ---- state and records --------------------------------------------------------------------
@dataclass
class Campaign:
    """The live objects of one run. Built by `setup`, released by `close`."""

    cfg: CampaignConfig
    run_dir: Path
    tasks: list[Task]
    eval_tasks: list[Task]
    actor: Any
    critic: Critic
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer
    client: EngineClient
    agent: PolicyAgent
    tokenizer: Any
    engine: Any = None
    """The in-process LocalEngine when `cfg.engine_url` is None."""
    weight_version: int = 0


@dataclass
class TrainSample:
    """One trial ready for the update: the TITO stream and its per-position PPO tensors (n,)."""

    task_id: str
    sample: RolloutSample
    reward: float
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    sampler_gap: float = float("nan")


@dataclass
class EvaluationSummary:
    """One evaluation of the current weights on the held-out tasks."""

    campaign: str
    step: int
    checkpoint: str
    benchmark: str
    tasks: int
    resolved: int
    dense_score: float
    """Mean number of passing assertions per task."""

    def metadata(self) -> dict[str, Any]:
        """Flat scalar metadata, the shape `pipelines.reporting.report_evaluation` takes."""
        return {
            "campaign": self.campaign,
            "step": self.step,
            "checkpoint": self.checkpoint,
            "benchmark": self.benchmark,
            "tasks": self.tasks,
            "validate/pass_rate": self.resolved / self.tasks if self.tasks else 0.0,
            "validate/dense_score": self.dense_score,
        }


@dataclass
class CampaignResult:
    run_dir: Path
    metrics: list[Metrics] = field(default_factory=list)
    evaluations: list[EvaluationSummary] = field(default_factory=list)


# ---- setup ----------------------------------------------------------------------------------
def campaign_tasks(cfg: CampaignConfig) -> tuple[list[Task], list[Task]]:
    """(train, eval) tasks: the pool (or the seeds) filtered by the config's id lists.

    Training tasks keep the pool's quality-rank order; `draw_tasks` permutes them per epoch.
    Raises ValueError on an unknown id, an empty training set, or a task in both sets.
    """
    from tasks.corpus import load_seeds

    seeds = sorted(load_seeds(), key=lambda t: t.id)
    if cfg.pool is not None:
        from warehouse import load_pool, pool_tasks

        pool = pool_tasks(load_pool(cfg.store, cfg.pool))
    else:
        pool = seeds
    eval_ids = set(cfg.eval_task_ids)
    by_id = {t.id: t for t in seeds}
    unknown = eval_ids - by_id.keys()
    if unknown:
        raise ValueError(f"unknown eval task ids: {sorted(unknown)}")
    eval_tasks = [by_id[i] for i in cfg.eval_task_ids]
    if cfg.train_task_ids is not None:
        pool_ids = {t.id for t in pool}
        missing = set(cfg.train_task_ids) - pool_ids
        if missing:
            raise ValueError(f"train task ids not in the pool: {sorted(missing)}")
        keep = set(cfg.train_task_ids)
        train = [t for t in pool if t.id in keep]
    else:
        train = [t for t in pool if t.id not in eval_ids]
    overlap = {t.id for t in train} & eval_ids
    if overlap:
        raise ValueError(f"tasks both trained on and held out: {sorted(overlap)}")
    if not train:
        raise ValueError("no training tasks")
    return train, eval_tasks


def setup(cfg: CampaignConfig, tasks: Sequence[Task], eval_tasks: Sequence[Task]) -> Campaign:
    """Load actor and critic from the initial checkpoint, start (or reach) the engine, write
    the full config beside the results."""
    from training.chat_tokenizer import load_chat_tokenizer

    if not tasks:
        raise ValueError("a campaign needs at least one training task")
    torch.manual_seed(cfg.seed)
    policy_path = cfg.policy_path
    if policy_path is None:
        from training.warm_start import warm_started_policy

        policy_path = warm_started_policy(reuse_stale=True)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(
        json.dumps({**cfg.model_dump(mode="json"), "policy_path": str(policy_path)}, indent=2)
    )
    tokenizer = load_chat_tokenizer(Path(policy_path))
    actor = load_policy(Path(policy_path))
    actor.train()
    critic = load_critic(Path(policy_path))
    engine = None
    url = cfg.engine_url
    if url is None:
        from training.engine_local import LocalEngine

        engine = LocalEngine(Path(policy_path), seed=cfg.seed, weight_version="0")
        url = engine.start()
    mc = actor.config
    client = EngineClient(url, num_layers=mc.num_hidden_layers, top_k=mc.num_experts_per_tok)
    version = client.weight_version()
    return Campaign(
        cfg=cfg,
        run_dir=run_dir,
        tasks=list(tasks),
        eval_tasks=list(eval_tasks),
        actor=actor,
        critic=critic,
        actor_opt=torch.optim.AdamW(actor.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay),
        critic_opt=torch.optim.AdamW(
            critic.parameters(), lr=cfg.critic_learning_rate, weight_decay=cfg.weight_decay
        ),
        client=client,
        agent=PolicyAgent(client, tokenizer, cfg.harness),
        tokenizer=tokenizer,
        engine=engine,
        weight_version=int(version) if version and version.isdigit() else 0,
    )


def close(c: Campaign) -> None:
    c.client.close()
    if c.engine is not None:
        c.engine.stop()


# ---- rollouts and assembly ----------------------------------------------------------------
def draw_tasks(pool_size: int, per_step: int, step: int, seed: int) -> list[int]:
    """Pool indices for `step`: consecutive slices of each epoch's seeded permutation.

    Sample number s = step * per_step + i is index s % pool_size of the permutation of epoch
    s // pool_size, so every epoch visits every task once, in an order fixed by (seed, epoch).
    """
    if pool_size < 1 or per_step < 1 or step < 0:
        raise ValueError(f"need pool_size, per_step >= 1, step >= 0: {pool_size}, {per_step}")
    out: list[int] = []
    for s in range(step * per_step, (step + 1) * per_step):
        epoch, pos = divmod(s, pool_size)
        out.append(epoch_permutation(pool_size, seed, epoch)[pos])
    return out


def collect_rollouts(c: Campaign, step: int) -> list[Rollout]:
    """One trial per drawn task with the current engine weights (a failure is a row)."""
    picks = draw_tasks(len(c.tasks), c.cfg.tasks_per_step, step, c.cfg.seed)
    rollouts = []
    for slot, idx in enumerate(picks):
        base = c.cfg.harness.seed
        seed = None if base is None else base + 10_000 * step + 1_000 * slot
        c.agent.config = c.cfg.harness.model_copy(update={"seed": seed})
        rollouts.append(rollout_trial(c.tasks[idx], c.agent, backend=c.cfg.sandbox_backend))
    return rollouts


def assemble(c: Campaign, rollouts: Sequence[Rollout]) -> list[TrainSample]:
    """TITO samples of the trials that sampled at least one token; reward = passing assertions."""
    im_end = int(c.tokenizer.convert_tokens_to_ids(IM_END))
    mc = c.actor.config
    batch = []
    for r in rollouts:
        if not r.trajectory.turns:
            continue
        sample = assemble_trial(
            r.trajectory.turns,
            im_end_id=im_end,
            num_layers=mc.num_hidden_layers,
            top_k=mc.num_experts_per_tok,
        )
        mask = torch.as_tensor(sample.loss_mask, dtype=torch.bool)  # (n,)
        if not bool(mask.any()):
            continue
        batch.append(TrainSample(r.trajectory.task_id, sample, float(r.trial.passed), mask))
    return batch


# ---- advantages and updates ---------------------------------------------------------------
def _actor_logprobs(c: Campaign, s: TrainSample, *, grad: bool) -> torch.Tensor:
    """(n,) trainer logprobs of the stream, with R3 replay of its recorded routing."""
    logp, _ = stream_logprobs(
        c.actor,
        s.sample.token_ids,
        routing=s.sample.routed_experts if c.cfg.r3 else None,
        policy=c.cfg.routing_failure,
        temperature=c.cfg.harness.temperature,
        grad=grad,
    )
    return logp


def compute_advantages(c: Campaign, batch: Sequence[TrainSample]) -> None:
    """Old logprobs (pre-update actor, R3), pre-update critic values, GAE advantages/returns."""
    for s in batch:
        s.old_logprobs = _actor_logprobs(c, s, grad=False)  # (n,)
        s.values = c.critic.values(s.sample.token_ids)  # (n,)
        rewards = final_token_rewards(s.loss_mask, s.reward)  # (n,)
        s.advantages, s.returns = gae(
            rewards, s.values, s.loss_mask, gamma=c.cfg.gamma, lam=c.cfg.lam
        )
        s.sampler_gap, _ = mean_abs_gap(
            s.old_logprobs.numpy(), s.sample.sampler_logprobs, s.sample.loss_mask
        )


def _token_weights(batch: Sequence[TrainSample]) -> list[float]:
    """Each sample's share of the batch's loss tokens: per-sample means become a token mean."""
    counts = [int(s.loss_mask.sum()) for s in batch]
    total = sum(counts)
    return [n / total for n in counts]


def update_critic(c: Campaign, batch: Sequence[TrainSample]) -> Metrics:
    """`ppo_epochs` passes of the clipped value loss (before the actor, as in the paper)."""
    if not batch:
        return {}
    weights = _token_weights(batch)
    total = 0.0
    for _ in range(c.cfg.ppo_epochs):
        c.critic_opt.zero_grad(set_to_none=True)
        total = 0.0
        for w, s in zip(weights, batch, strict=True):
            v = c.critic.values(s.sample.token_ids, grad=True)  # (n,)
            loss = w * value_loss(v, s.values, s.returns, s.loss_mask, clip=c.cfg.value_clip)
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(c.critic.parameters(), c.cfg.max_grad_norm)
        c.critic_opt.step()
    mask_values = torch.cat([s.values[s.loss_mask] for s in batch])
    mask_returns = torch.cat([s.returns[s.loss_mask] for s in batch])
    return {
        "losses/value": total,
        "critic/value_mean": float(mask_values.mean()),
        "critic/return_mean": float(mask_returns.mean()),
    }


def update_actor(c: Campaign, batch: Sequence[TrainSample]) -> Metrics:
    """`ppo_epochs` passes of the clipped policy loss with R3, then KL(old || new) measured."""
    if not batch:
        return {}
    weights = _token_weights(batch)
    total = clip_frac = 0.0
    for _ in range(c.cfg.ppo_epochs):
        c.actor_opt.zero_grad(set_to_none=True)
        total = clip_frac = 0.0
        for w, s in zip(weights, batch, strict=True):
            logp = _actor_logprobs(c, s, grad=True)  # (n,)
            out = policy_loss(
                logp, s.old_logprobs, s.advantages, s.loss_mask, clip_eps=c.cfg.clip_eps
            )
            (w * out.loss).backward()
            total += w * float(out.loss.detach())
            clip_frac += w * out.clip_fraction
        torch.nn.utils.clip_grad_norm_(c.actor.parameters(), c.cfg.max_grad_norm)
        c.actor_opt.step()
    kl = 0.0
    for w, s in zip(weights, batch, strict=True):
        new = _actor_logprobs(c, s, grad=False)  # (n,)
        kl += w * float(approx_kl(new, s.old_logprobs, s.loss_mask))
    return {"losses/policy": total, "train/clip_fraction": clip_frac, "train/kl": kl}


# ---- publish, log, record -------------------------------------------------------------------
def publish_weights(c: Campaign, step: int) -> Metrics:
    """Save the actor, pause generation, load the new weights with version step + 1, continue.

    Generation is quiesced first so no request spans two versions (paper, section 2); the
    engine is resumed even when the update fails, and the failure is raised.
    """
    version = step + 1
    out = c.run_dir / "weights" / f"v{version}"
    t0 = time.monotonic()
    save_policy(c.actor, out)
    c.client.pause_generation("abort")
    try:
        c.client.update_weights_from_disk(str(out), weight_version=str(version))
    finally:
        c.client.continue_generation()
    c.weight_version = version
    kept = sorted(
        (p for p in (c.run_dir / "weights").iterdir() if p.name[1:].isdigit()),
        key=lambda p: int(p.name[1:]),
    )
    for old in kept[: -c.cfg.keep_checkpoints]:
        shutil.rmtree(old, ignore_errors=True)
    return {"weights/version": float(version), "perf/publish_seconds": time.monotonic() - t0}


def rollout_metrics(rollouts: Sequence[Rollout], batch: Sequence[TrainSample]) -> Metrics:
    """What the step's trials did: dense reward, resolved rate, lengths, failures, gap."""
    n = len(rollouts)
    gaps = [s.sampler_gap for s in batch if np.isfinite(s.sampler_gap)]
    return {
        "rollout/reward": sum(r.trial.passed for r in rollouts) / n,
        "rollout/resolved_rate": sum(r.trial.resolved for r in rollouts) / n,
        "rollout/turns": sum(len(r.trajectory.turns) for r in rollouts) / n,
        "rollout/tokens": sum(len(s.sample) for s in batch) / max(1, len(batch)),
        "rollout/response_tokens": sum(int(s.loss_mask.sum()) for s in batch) / max(1, len(batch)),
        "rollout/trainable": float(len(batch)),
        "rollout/failed": float(sum(r.trial.failure_mode != "none" for r in rollouts)),
        "train/logprob_gap": float(np.mean(gaps)) if gaps else float("nan"),
    }


def log_metrics(c: Campaign, step: int, metrics: Metrics) -> None:
    """Append one JSON line per step to run_dir/metrics.jsonl."""
    with (c.run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": step, **metrics}) + "\n")


def record_trajectories_of(c: Campaign, step: int, rollouts: Sequence[Rollout]) -> None:
    """One TrajectoryRecord per trial, with the weight version that generated it."""
    from warehouse import TrajectoryRecord, record_trajectories

    rows = []
    for r in rollouts:
        turns = r.trajectory.turns
        version = turns[0].generation.weight_version if turns else None
        rows.append(
            TrajectoryRecord(
                campaign=c.cfg.campaign,
                step=step,
                task_hash=r.trial.task_hash,
                weight_version=int(version) if version and version.isdigit() else 0,
                reward=float(r.trial.passed),
                assertions_passed=r.trial.passed,
                assertions_total=r.trial.total,
                turns=len(turns),
                tokens=sum(len(t.generation.output_ids) for t in turns),
                failure_mode=r.trial.failure_mode,
            )
        )
    record_trajectories(c.cfg.store, rows)


def evaluate(c: Campaign, step: int) -> EvaluationSummary:
    """Roll out every held-out task once with the current weights and record the results."""
    from warehouse import EvaluationRecord, record_evaluations

    checkpoint = f"v{c.weight_version}"
    c.agent.config = c.cfg.harness.model_copy(
        update={"temperature": c.cfg.eval_temperature, "seed": c.cfg.seed}
    )
    rows = []
    for task in c.eval_tasks:
        r = rollout_trial(task, c.agent, backend=c.cfg.sandbox_backend)
        rows.append(
            EvaluationRecord(
                campaign=c.cfg.campaign,
                checkpoint=checkpoint,
                benchmark=c.cfg.eval_benchmark,
                task_hash=r.trial.task_hash,
                task_id=task.id,
                resolved=r.trial.resolved,
                dense_score=float(r.trial.passed),
                category=task.category,
            )
        )
    if rows:
        record_evaluations(c.cfg.store, rows)
    summary = EvaluationSummary(
        campaign=c.cfg.campaign,
        step=step,
        checkpoint=checkpoint,
        benchmark=c.cfg.eval_benchmark,
        tasks=len(rows),
        resolved=sum(r.resolved for r in rows),
        dense_score=sum(r.dense_score for r in rows) / len(rows) if rows else 0.0,
    )
    log_metrics(c, step, {k: v for k, v in summary.metadata().items() if k.startswith("validate/")})
    return summary
