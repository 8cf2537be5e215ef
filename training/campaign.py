"""The PPO campaign: `run_campaign` holds the step order, once; the pieces are defined below it.

Per step k (paper, sections 2, 4 and 5):
  rollouts of step k (started one step earlier in async mode: generation for k+1 runs while k
  trains) -> assemble (TITO streams; reward = scale * passing assertions at the final response
  token; infrastructure failures excluded and counted; samples older than `max_staleness`
  dropped) -> advantages (old logprobs recomputed by the trainer at each token's behaviour
  version with R3; values from the pre-update critic; GAE) -> critic update, then actor update
  (critic-only during warm-up) -> publish (pause generation, abort in flight, load version
  k+1, continue: in-flight turns are re-sent and run on the new weights) -> metrics, rows
  -> evaluation every `eval_every` steps -> checkpoint every `checkpoint_every` steps (or
  `checkpoint_minutes`, and after the last).

An orchestrator (the Prefect flow, the CLI) passes `CampaignHooks`; hooks observe a run (step
metrics, evaluations, checkpoints) and never re-implement or reorder it. Metric names are a
stable namespace, documented in docs/ppo.md.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from training.campaign_config import RUN_CONFIG, CampaignConfig
from training.chat_format import IM_END
from training.checkpoint import (
    CheckpointState,
    checkpoint_dir,
    checkpoint_due,
    latest_checkpoint,
    load_training_state,
    prune_checkpoints,
    read_state,
    save_checkpoint,
)
from training.critic import Critic, load_critic
from training.engine_protocol import EngineClient
from training.evaluation import (
    EvaluationSummary,
    evaluation_jobs,
    evaluation_rows,
    summarize_evaluation,
)
from training.harness import TRUNCATED_STOPS, Rollout, version_number
from training.logprobs import batch_logprobs, mean_abs_gap, padded_record, routing_replay
from training.numerics import Numerics, optimizer_for, resolve_numerics
from training.policy import load_policy, routing_shape, save_policy
from training.ppo_math import (
    approx_kl,
    final_token_rewards,
    gae,
    placebo_rewards,
    policy_loss,
    value_loss,
)
from training.rollouts import RolloutBatch, RolloutPool, launch_count, plan_jobs
from training.tito import AuditReport, RolloutSample, assemble_trial, audit_sample
from warehouse.permutation import epoch_permutation

if TYPE_CHECKING:
    from tasks.model import Task
    from tasks.results import Pay, ReferenceVerdict

Metrics = dict[str, float]


@dataclass
class CampaignHooks:
    """Callbacks of one run, each optional, each called in the campaign's thread.

    on_step(step, metrics): after step `step` is trained, published and recorded.
    on_evaluation(summary): after an evaluation is recorded in the warehouse.
    on_checkpoint(step, path): after a resumable checkpoint is written (`path` a directory).
    """

    on_step: Callable[[int, Metrics], None] | None = None
    on_evaluation: Callable[[EvaluationSummary], None] | None = None
    on_checkpoint: Callable[[int, Path], None] | None = None


# ---- the loop -------------------------------------------------------------------------------
def run_campaign(
    cfg: CampaignConfig,
    store: Path | None = None,
    *,
    hooks: CampaignHooks | None = None,
    tasks: Sequence[Task] | None = None,
    eval_tasks: Sequence[Task] | None = None,
) -> CampaignResult:
    """Run (or, with `cfg.resume_from`, continue) a campaign to `cfg.steps` steps.

    `store` overrides `cfg.store`; `tasks` / `eval_tasks` override `campaign_tasks(cfg)`.
    Returns the metrics of the steps run here and every evaluation.
    """
    hooks = hooks or CampaignHooks()
    c = setup(cfg, store, tasks, eval_tasks)
    result = CampaignResult(run_id=c.run_id, run_dir=c.run_dir)
    pending: RolloutBatch | None = None
    try:
        if cfg.eval_at_start and c.step == 0:
            _evaluated(c, result, hooks, evaluate(c, step=-1))
        started = saved = time.monotonic()
        pending = start_rollouts(c, c.step)
        while c.step < cfg.steps:
            step, t0 = c.step, time.monotonic()
            batch = pending.result()
            wait_s = time.monotonic() - t0
            pending = None
            budget = cfg.time_budget_s is not None and t0 - started >= cfg.time_budget_s
            last = step + 1 == cfg.steps or budget
            if cfg.async_rollouts and not last:
                pending = start_rollouts(c, step + 1)  # generation for k+1 overlaps update k
            samples = assemble(c, batch)
            metrics = rollout_metrics(c, batch, samples)
            trainer_version = c.weight_version
            metrics |= train_step(c, samples)
            if metrics.get("train/actor_updated"):
                metrics |= publish_weights(c)
            metrics |= {"perf/step_seconds": time.monotonic() - t0, "perf/wait_seconds": wait_s}
            c.step = step + 1
            log_metrics(c, step, metrics)
            record_rollouts(c, step, batch, samples, trainer_version)
            result.metrics.append(metrics)
            if hooks.on_step is not None:
                hooks.on_step(step, metrics)
            if c.step % cfg.eval_every == 0 or last:
                _evaluated(c, result, hooks, evaluate(c, step))
            if checkpoint_due(
                c.step, last=last, every=cfg.checkpoint_every, minutes=cfg.checkpoint_minutes,
                since_s=time.monotonic() - saved,
            ):  # fmt: skip
                path = checkpoint(c)
                saved = time.monotonic()
                if hooks.on_checkpoint is not None:
                    hooks.on_checkpoint(step, path)
            if last:
                break
            if pending is None:
                pending = start_rollouts(c, c.step)
    finally:
        close(c, pending)
    return result


def _evaluated(c: Campaign, result: CampaignResult, hooks: CampaignHooks, s: EvaluationSummary):
    result.evaluations.append(s)
    if hooks.on_evaluation is not None:
        hooks.on_evaluation(s)


# ---- state and records --------------------------------------------------------------------
@dataclass
class Campaign:
    """The live objects of one run. Built by `setup`, released by `close`."""

    cfg: CampaignConfig
    run_id: str
    run_dir: Path
    store: Path | None
    policy_path: Path
    tasks: list[Task]
    eval_tasks: list[Task]
    actor: Any
    critic: Critic
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer
    client: EngineClient
    pool: RolloutPool
    tokenizer: Any
    engine: Any = None
    """The local engine (in-process LocalEngine or LocalEngineProcess) when we started it."""
    behavior: Any = None
    """The actor at version `weight_version - 1` (async: tokens sampled one version back)."""
    reference: Any = None
    """The initial policy, frozen (only when `kl_coef` > 0)."""
    weight_version: int = 0
    step: int = 0
    reward_scale: float | None = None
    numerics: Numerics | None = None
    """Device and precision of the trainer (None: resolved from cfg.device / cfg.precision)."""
    verdicts: dict[str, ReferenceVerdict] = field(default_factory=dict)
    """The reference verdict the audit recorded for each training task that has one (by
    content hash): a trial is paid only the outcomes it also earned (`tasks.results.pay`)."""

    @property
    def trainer(self) -> Numerics:
        """The trainer's device and precision (resolved once from the config)."""
        if self.numerics is None:
            self.numerics = resolve_numerics(self.cfg.device, self.cfg.precision)
        return self.numerics

    def autocast(self) -> Any:
        """The trainer's autocast for a forward pass: the HF backend's bf16 autocast over float32
        masters; none for megatron, whose bf16 route is bf16 weights (Float16Module) with
        float32 masters in the optimizer (its custom autograd functions break under autocast:
        the router's backward multiplies a bf16 gradient by a float32 weight)."""
        if self.cfg.trainer_backend == "megatron":
            return contextlib.nullcontext()
        return self.trainer.autocast()

    @property
    def r3(self) -> bool:
        """Routing replay is on: asked for, and the policy is a MoE (a dense one has no router)."""
        return self.cfg.r3 and routing_shape(self.actor.config)[0] > 0

    @property
    def draws_per_step(self) -> int:
        """Tasks drawn per step: enough for ceil((1 + alpha) * B) trials of k samples each."""
        launch = launch_count(self.cfg.batch_size, self.cfg.oversample)
        return math.ceil(launch / self.cfg.samples_per_task)


@dataclass
class TrainSample:
    """One admitted trial ready for the update: its TITO stream and per-position tensors (n,)."""

    task_id: str
    slot: int
    """The trial's launch slot in its step (its warehouse row's `sample`)."""
    sample: RolloutSample
    reward: float
    """What enters at the final response token: scale * passing assertions, or 0/1 (binary)."""
    loss_mask: torch.Tensor
    versions: np.ndarray
    """(n,) weight version that sampled each position (-1 off the sampled spans)."""
    audit: AuditReport | None = None
    """TITO audit of the stream against its turns (drift in the loss region must be 0)."""
    old_logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    sampler_gap: float = float("nan")


@dataclass
class CampaignResult:
    run_id: str
    run_dir: Path
    metrics: list[Metrics] = field(default_factory=list)
    evaluations: list[EvaluationSummary] = field(default_factory=list)


# ---- setup ----------------------------------------------------------------------------------
def campaign_tasks(cfg: CampaignConfig, store: Path | None = None) -> tuple[list[Task], list[Task]]:
    """(train, eval) tasks: a task directory, the pool or the seeds, filtered by the id lists;
    held out: `eval_dir` or the seed ids of `eval_task_ids`.

    Training tasks keep their source order (a pool's quality rank); `draw_positions` permutes
    them per epoch. Raises ValueError on an unknown id, an empty training set, a task in both
    sets (by content hash), or a directory with rejected tasks.
    """
    from tasks.corpus import import_dir, load_seeds

    seeds = sorted(load_seeds(), key=lambda t: t.id)
    if cfg.train_dir is not None:
        pool = _load_dir(cfg.train_dir, import_dir)
    elif cfg.pool is not None:
        from warehouse import load_pool, pool_tasks

        pool = pool_tasks(
            load_pool(store if store is not None else cfg.store, cfg.pool, cfg.pool_version)
        )
    else:
        pool = seeds
    if cfg.eval_dir is not None:
        eval_tasks = _load_dir(cfg.eval_dir, import_dir)
    else:
        by_id = {t.id: t for t in seeds}
        unknown = set(cfg.eval_task_ids) - by_id.keys()
        if unknown:
            raise ValueError(f"unknown eval task ids: {sorted(unknown)}")
        eval_tasks = [by_id[i] for i in cfg.eval_task_ids]
    eval_ids = {t.id for t in eval_tasks}
    if cfg.train_task_ids is not None:
        missing = set(cfg.train_task_ids) - {t.id for t in pool}
        if missing:
            raise ValueError(f"train task ids not in the pool: {sorted(missing)}")
        keep = set(cfg.train_task_ids)
        train = [t for t in pool if t.id in keep]
    elif cfg.train_dir is not None:
        train = list(pool)  # an explicit training set: an overlap is refused, not filtered
    else:
        train = [t for t in pool if t.id not in eval_ids]
    overlap = {t.id for t in train} & eval_ids
    overlap |= {t.id for t in train if t.content_hash in {e.content_hash for e in eval_tasks}}
    if overlap:
        raise ValueError(f"tasks both trained on and held out: {sorted(overlap)}")
    if not train:
        raise ValueError("no training tasks")
    return train, eval_tasks


def _load_dir(path: Path, import_dir: Callable) -> list[Task]:
    tasks, rejects = import_dir(path)
    if rejects:
        raise ValueError(f"{rejects[0].path}: {rejects[0].reason} ({len(rejects)} rejected)")
    return tasks


def campaign_verdicts(store: Path | None, tasks: Sequence[Task]) -> dict[str, ReferenceVerdict]:
    """The reference verdicts the audit recorded for `tasks` in `store` (none without one)."""
    if store is None:
        return {}
    from warehouse import StoreNotFoundError, reference_verdicts

    try:
        return reference_verdicts(store, (t.content_hash for t in tasks))
    except StoreNotFoundError:
        return {}


def new_run_id(campaign: str) -> str:
    """'<campaign>-<UTC yyyymmddThhmmss>-<4 hex>': unique per run, sortable by start time."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{campaign}-{stamp}-{secrets.token_hex(2)}"


def setup(
    cfg: CampaignConfig,
    store: Path | None = None,
    tasks: Sequence[Task] | None = None,
    eval_tasks: Sequence[Task] | None = None,
) -> Campaign:
    """Load (or resume) actor, critic and optimizers, start (or reach) the engine, and write
    the full config into the run's own directory."""
    from training.chat_tokenizer import load_chat_tokenizer

    store = store if store is not None else cfg.store
    if tasks is None or eval_tasks is None:
        default_train, default_eval = campaign_tasks(cfg, store)
        tasks = default_train if tasks is None else tasks
        eval_tasks = default_eval if eval_tasks is None else eval_tasks
    if not tasks:
        raise ValueError("a campaign needs at least one training task")
    resume = latest_checkpoint(cfg.resume_from) if cfg.resume_from is not None else None
    state = read_state(resume) if resume is not None else None
    if state is not None:
        run_id, policy_path = state.run_id, Path(state.policy_path)
        run_dir = resume.parent.parent if resume is not None else cfg.runs_dir / run_id
    else:
        run_id = cfg.run_id or new_run_id(cfg.campaign)
        run_dir = cfg.runs_dir / run_id
        if (run_dir / RUN_CONFIG).exists():
            raise ValueError(f"run {run_id!r} exists at {run_dir}: resume it or pick a new id")
        if cfg.policy_path is not None:
            policy_path = cfg.policy_path
        else:
            from training.warm_start import warm_started_policy

            policy_path = warm_started_policy(reuse_stale=True)
    if state is not None:
        keep_metrics_before(run_dir / "metrics.jsonl", state.step)
    torch.manual_seed(cfg.seed)
    if cfg.trainer_threads is not None:
        torch.set_num_threads(cfg.trainer_threads)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_CONFIG).write_text(
        json.dumps(
            {
                **cfg.model_dump(mode="json"),
                "run_id": run_id,
                "policy_path": str(policy_path),
                "resumed_from": str(resume) if resume is not None else None,
            },
            indent=2,
        )
    )
    tokenizer = load_chat_tokenizer(Path(policy_path))
    numerics = resolve_numerics(cfg.device, cfg.precision)
    actor_path = resume / "actor" if resume is not None else Path(policy_path)
    actor = load_trainer_policy(cfg, actor_path, numerics)
    critic = load_trainer_critic(cfg, Path(policy_path), numerics)
    actor_opt = optimizer_for(actor.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    critic_opt = optimizer_for(critic.parameters(), lr=cfg.critic_lr, weight_decay=cfg.weight_decay)
    version = state.weight_version if state is not None else 0
    behavior = None
    if resume is not None and state is not None:
        load_training_state(resume, critic=critic, actor_opt=actor_opt, critic_opt=critic_opt)
        if state.has_behavior and cfg.behavior_copy:
            behavior = load_frozen_policy(cfg, resume / "behavior", numerics)
    engine, url = _start_engine(cfg, actor_path, version)
    layers, top_k = routing_shape(actor.config)
    client = EngineClient(url, num_layers=layers, top_k=top_k, servers=cfg.engine_servers)
    try:
        served = client.weight_version()  # every server's (they must agree)
        if served != str(version):
            where = url if not cfg.engine_servers else cfg.engine_servers
            raise ValueError(f"engine at {where} serves weight version {served!r}, not {version}")
        pool = RolloutPool(
            client, tokenizer, workers=cfg.rollout_workers, backend=cfg.sandbox_backend,
            executor=cfg.executor, name=run_id,
        )  # fmt: skip
    except BaseException:
        client.close()
        if engine is not None:
            engine.stop()
        raise
    reference = None
    if cfg.kl_coef > 0:
        reference = load_frozen_policy(cfg, Path(policy_path), numerics)
    return Campaign(
        cfg=cfg,
        run_id=run_id,
        run_dir=run_dir,
        store=store,
        policy_path=Path(policy_path),
        tasks=list(tasks),
        eval_tasks=list(eval_tasks),
        actor=actor,
        critic=critic,
        actor_opt=actor_opt,
        critic_opt=critic_opt,
        client=client,
        pool=pool,
        tokenizer=tokenizer,
        engine=engine,
        behavior=behavior,
        reference=reference,
        weight_version=version,
        step=state.step if state is not None else 0,
        reward_scale=state.reward_scale if state is not None else cfg.reward_scale,
        verdicts=campaign_verdicts(store, tasks),
        numerics=numerics,
    )


def load_trainer_policy(cfg: CampaignConfig, path: Path, numerics: Numerics) -> Any:
    """The actor of `cfg.trainer_backend` from a local checkpoint on the trainer's device, train
    mode, gradient checkpointing when asked: float32 weights (HF: run under bf16 autocast when
    the precision is bf16), or for megatron under bf16 its Float16Module in bf16 (the float32
    masters live in the optimizer, `optimizer_for`)."""
    if cfg.trainer_backend == "megatron":
        from training.megatron_policy import load_megatron_policy

        bf16 = numerics.precision == "bf16"
        actor: Any = load_megatron_policy(path, device=numerics.device, bf16=bf16)
    else:
        actor = load_policy(path, device=numerics.device)
    if cfg.gradient_checkpointing:
        actor.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    actor.train()
    return actor


def load_trainer_critic(cfg: CampaignConfig, policy_path: Path, numerics: Numerics) -> Critic:
    """The critic of `cfg.trainer_backend`, warm-started from the initial policy (float32 on
    the trainer's device, train mode)."""
    if cfg.trainer_backend == "megatron":
        from training.megatron_policy import load_megatron_policy

        bf16 = numerics.precision == "bf16"
        policy = load_megatron_policy(policy_path, device=numerics.device, bf16=bf16)
        if cfg.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
        critic = Critic(policy.get_decoder(), policy.config.hidden_size).to(numerics.device)
        critic.train()
        return critic
    critic = load_critic(policy_path, device=numerics.device)
    if cfg.gradient_checkpointing:
        backbone: Any = critic.backbone
        backbone.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    return critic


def load_frozen_policy(cfg: CampaignConfig, path: Path, numerics: Numerics) -> Any:
    """A checkpoint loaded for scoring only (reference, held behaviour version): eval mode, no
    gradients, weights in the precision's frozen dtype, on the trainer's device."""
    if cfg.trainer_backend == "megatron":
        from training.megatron_policy import load_megatron_policy

        model: Any = load_megatron_policy(
            path, device=numerics.device, bf16=numerics.precision == "bf16"
        )
    else:
        model = load_policy(path, dtype=numerics.frozen_dtype, device=numerics.device)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def frozen_copy(model: Any, numerics: Numerics) -> Any:
    """A frozen copy of a policy for scoring only (reference, behaviour version): eval mode, no
    gradients, weights in the precision's frozen dtype (bf16 under `bf16`)."""
    if hasattr(model, "frozen_copy"):  # megatron: bf16 through its Float16Module
        return model.frozen_copy(bf16=numerics.precision == "bf16")
    twin = copy.deepcopy(model).to(dtype=numerics.frozen_dtype)
    twin.eval()
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin


def copy_weights(dst: Any, src: Any) -> None:
    """Load `src`'s current weights into `dst` (a frozen copy of it, any dtype)."""
    if hasattr(dst, "copy_weights_from"):
        dst.copy_weights_from(src)
    else:
        dst.load_state_dict(src.state_dict())


def _start_engine(cfg: CampaignConfig, weights: Path, version: int) -> tuple[Any, str | None]:
    """(engine we own or None, base URL: None for external servers without a router). An
    external engine must already serve `version`."""
    if cfg.engine_url is not None or cfg.engine_servers:
        return None, cfg.engine_url
    if cfg.local_engine == "process":
        from training.engine_local import spawn_local_engine

        proc = spawn_local_engine(
            weights, weight_version=str(version), seed=cfg.seed, host=cfg.engine_host,
            device=cfg.device,
        )  # fmt: skip
        return proc, proc.url
    from training.engine_local import LocalEngine

    engine = LocalEngine(
        weights, seed=cfg.seed, weight_version=str(version), skip_tokenizer_init=True,
        host=cfg.engine_host, device=cfg.device,
    )  # fmt: skip
    return engine, engine.start()


def close(c: Campaign, pending: RolloutBatch | None = None) -> None:
    """Cancel rollouts still running, stop the pool, the client and an engine we started."""
    if pending is not None:
        pending.cancel_all()
        try:
            pending.result()
            pending.cancelled()
        except Exception:  # noqa: BLE001 - closing: the error was or will be reported
            pass
    c.pool.close()
    c.client.close()
    if c.engine is not None:
        c.engine.stop()


# ---- rollouts and assembly ----------------------------------------------------------------
def draw_positions(pool_size: int, start: int, count: int, seed: int) -> list[int]:
    """Pool indices for draws start .. start + count - 1 of the seeded per-epoch permutations.

    Draw number s is index s % pool_size of the permutation of epoch s // pool_size, so every
    epoch visits every task once, in an order fixed by (seed, epoch).
    """
    if pool_size < 1 or count < 1 or start < 0:
        raise ValueError(f"need pool_size, count >= 1, start >= 0: {pool_size}, {count}, {start}")
    out: list[int] = []
    for s in range(start, start + count):
        epoch, pos = divmod(s, pool_size)
        out.append(epoch_permutation(pool_size, seed, epoch)[pos])
    return out


def draw_tasks(pool_size: int, per_step: int, step: int, seed: int) -> list[int]:
    """Pool indices for `step` when each step draws `per_step` tasks."""
    if per_step < 1 or step < 0:
        raise ValueError(f"need per_step >= 1, step >= 0: {per_step}, {step}")
    return draw_positions(pool_size, step * per_step, per_step, seed)


def start_rollouts(c: Campaign, step: int) -> RolloutBatch:
    """Launch step `step`'s trials now (ceil((1 + alpha) * B) of them); decided in background."""
    cfg = c.cfg
    picks = draw_tasks(len(c.tasks), c.draws_per_step, step, cfg.seed)
    jobs = plan_jobs(
        c.tasks,
        picks,
        samples_per_task=cfg.samples_per_task,
        launch=launch_count(cfg.batch_size, cfg.oversample),
        step=step,
        seed=cfg.harness.seed,
    )
    return c.pool.start(step, jobs, _harness(c), want=cfg.batch_size, admission=cfg.admission)


def _harness(c: Campaign, **update: Any) -> Any:
    """The harness config of the run's trials: no routing records asked of the engine for a
    dense policy (R3 is for MoE only)."""
    if routing_shape(c.actor.config)[0] == 0:
        update["return_routed_experts"] = False
    return c.cfg.harness.model_copy(update=update) if update else c.cfg.harness


def trial_reward(c: Campaign, passed: int, total: int, resolved: bool) -> float:
    """The scalar at the final response token: dense (scale * passing) or binary (resolved)."""
    if c.cfg.reward == "binary":
        return 1.0 if resolved else 0.0
    if c.reward_scale is None:
        raise ValueError("the reward scale is fixed by the first batch; none was set")
    return c.reward_scale * passed


def truncated(r: Rollout) -> bool:
    """The trial was cut by a limit (turns, context, agent time), not ended by the policy."""
    return r.trajectory.stop in TRUNCATED_STOPS


def paid(c: Campaign, r: Rollout) -> Pay:
    """What the trial earned: only what the judge vouches for (no outcome recorded after the
    agent's code ran in the test runner's own process) and, where the task has a reference
    verdict, only the outcomes the reference solution also earned."""
    return r.trial.pay(c.verdicts.get(r.trial.task_hash))


def trained_reward(c: Campaign, r: Rollout) -> float | None:
    """The reward an admitted trial trains on; None when it is left out of the loss.

    A truncated trial earns what `cfg.truncation` says: its verdict ('scored', like a finish),
    0 ('zero') or nothing ('masked'). Scored like a finish, a truncation is a free pass: a
    policy that never declares completion loses nothing (docs/ppo.md)."""
    if truncated(r):
        if c.cfg.truncation == "masked":
            return None
        if c.cfg.truncation == "zero":
            return 0.0
    p = paid(c, r)
    return trial_reward(c, len(p.passed), p.total, p.resolved)


def assemble(c: Campaign, batch: RolloutBatch) -> list[TrainSample]:
    """TITO samples of the admitted trials that sampled at least one token, are at most
    `max_staleness` versions behind the trainer and are not masked out as truncated
    (`trained_reward`). Fixes the reward scale on the first batch; with `placebo_rewards` the
    rewards are shuffled among the samples."""
    if c.reward_scale is None and c.cfg.reward == "dense":
        most = max((paid(c, r).total for r in batch.admitted), default=0)
        if most > 0:
            c.reward_scale = 1.0 / most
    im_end = int(c.tokenizer.convert_tokens_to_ids(IM_END))
    layers, top_k = routing_shape(c.actor.config)
    out = []
    for r in batch.admitted:
        turns = r.trajectory.turns
        if not turns or staleness(c.weight_version, r) > c.cfg.max_staleness:
            continue
        reward = trained_reward(c, r)
        if reward is None:
            continue
        sample = assemble_trial(turns, im_end_id=im_end, num_layers=layers, top_k=top_k)
        mask = torch.as_tensor(sample.loss_mask, dtype=torch.bool)  # (n,)
        if not bool(mask.any()):
            continue
        versions = np.full(len(sample), -1, dtype=np.int64)  # (n,)
        for (s, e), v, turn in zip(
            sample.turn_spans, r.trajectory.weight_versions(), turns, strict=True
        ):
            versions[s:e] = v
            for span in turn.generation.weight_version_spans or []:  # an engine that says
                versions[s + span.start : s + span.end] = version_number(span.version)
        ts = TrainSample(r.trajectory.task_id, r.sample, sample, reward, mask, versions)
        ts.audit = audit_sample(sample, turns)
        out.append(ts)
    if c.cfg.placebo_rewards:
        shuffled = placebo_rewards([t.reward for t in out], c.cfg.seed, batch.step)
        for t, reward in zip(out, shuffled, strict=True):
            t.reward = reward
    return out


def staleness(trainer_version: int, r: Rollout) -> int:
    """Versions the trainer is ahead of the oldest turn of `r` (0 without turns)."""
    versions = r.trajectory.weight_versions()
    return trainer_version - min(versions) if versions else 0


# ---- advantages and updates ---------------------------------------------------------------
def micro_batches(batch: Sequence[TrainSample], max_tokens: int) -> list[list[TrainSample]]:
    """Groups of samples, shortest first, whose padded size (count x longest) stays within
    `max_tokens`; a stream longer than the budget forms a group alone. One forward each."""
    groups: list[list[TrainSample]] = []
    current: list[TrainSample] = []
    for s in sorted(batch, key=lambda s: len(s.sample)):
        if current and len(s.sample) * (len(current) + 1) > max_tokens:
            groups.append(current)
            current = []
        current.append(s)
    if current:
        groups.append(current)
    return groups


def _padded(rows: Sequence[torch.Tensor], width: int, fill: float | bool) -> torch.Tensor:
    """Stack (n_i,) tensors into (B, width), right-padded with `fill`."""
    out = torch.full((len(rows), width), fill, dtype=rows[0].dtype)
    for i, r in enumerate(rows):
        out[i, : r.shape[0]] = r
    return out


@contextmanager
def scored(
    c: Campaign, model: Any, group: Sequence[TrainSample], *, grad: bool
) -> Iterator[torch.Tensor]:
    """(B, n_max) trainer logprobs of the group's streams under `model` on the trainer's device,
    replaying each one's recorded routing (R3), in one right-padded forward under the trainer's
    autocast. The replay stays on until the block ends: run the backward pass inside it (a
    recomputed layer, under gradient checkpointing, must replay the same routing)."""
    streams = [s.sample.token_ids for s in group]
    record = None
    if c.r3:
        record = padded_record([s.sample.routed_experts for s in group], [len(x) for x in streams])
    with routing_replay(model, record, policy=c.cfg.routing_failure):
        with c.autocast():
            logp = batch_logprobs(
                model, streams, temperature=c.cfg.harness.temperature, grad=grad,
                chunk_tokens=c.cfg.logprob_chunk_tokens,
            )  # fmt: skip
        yield logp


def _logprobs(c: Campaign, model: Any, group: Sequence[TrainSample], *, grad: bool) -> torch.Tensor:
    """`scored` without a backward pass to keep the replay for."""
    with scored(c, model, group, grad=grad) as logp:
        return logp


def behavior_logprobs(c: Campaign, group: Sequence[TrainSample]) -> list[torch.Tensor]:
    """Each stream's (n,) logprobs (CPU) at every token's behaviour version, recomputed by the
    trainer with R3: the current actor for tokens of `weight_version`, the held previous version
    for tokens sampled one version back (more than one back was dropped by `assemble`). Without
    `behavior_copy` every token is scored by the current, pre-update actor."""
    current = _logprobs(c, c.actor, group, grad=False).cpu()  # (B, n_max)
    old = [(s.versions >= 0) & (s.versions < c.weight_version) for s in group]
    previous = None
    if c.cfg.behavior_copy and any(o.any() for o in old):
        oldest = min(int(s.versions[o].min()) for s, o in zip(group, old, strict=True) if o.any())
        if c.behavior is None or oldest < c.weight_version - 1:
            raise ValueError("no weights held for a token sampled more than one version back")
        previous = _logprobs(c, c.behavior, group, grad=False).cpu()  # (B, n_max)
    out = []
    for i, s in enumerate(group):
        n = len(s.sample)
        logp = current[i, :n]
        if previous is not None and old[i].any():
            logp = torch.where(torch.as_tensor(old[i]), previous[i, :n], logp)
        out.append(logp)
    return out


def compute_advantages(c: Campaign, batch: Sequence[TrainSample]) -> None:
    """Old logprobs (behaviour version, R3), pre-update critic values, GAE advantages/returns."""
    for group in micro_batches(batch, c.cfg.train_batch_tokens):
        olds = behavior_logprobs(c, group)
        with c.autocast():
            values = c.critic.batch_values([s.sample.token_ids for s in group]).cpu()  # (B, n)
        refs = None
        if c.reference is not None:
            refs = _logprobs(c, c.reference, group, grad=False).cpu()  # (B, n_max)
        for i, s in enumerate(group):
            n = len(s.sample)
            s.old_logprobs, s.values = olds[i], values[i, :n]  # (n,), (n,)
            rewards = final_token_rewards(s.loss_mask, s.reward)  # (n,)
            s.advantages, s.returns = gae(
                rewards, s.values, s.loss_mask, gamma=c.cfg.gamma, lam=c.cfg.lam
            )
            s.sampler_gap, _ = mean_abs_gap(
                s.old_logprobs.numpy(), s.sample.sampler_logprobs, s.sample.loss_mask
            )
            if refs is not None:
                s.ref_logprobs = refs[i, :n]
    if c.cfg.whiten_advantages:
        whiten(batch)


def whiten(batch: Sequence[TrainSample]) -> None:
    """Advantages to mean 0, std 1 over every loss token of the batch (off by default: with
    one sample per task the critic is the baseline and the scale of the reward is meaningful)."""
    flat = torch.cat([s.advantages[s.loss_mask] for s in batch if s.advantages is not None])
    mean, std = flat.mean(), flat.std(unbiased=False).clamp_min(1e-6)
    for s in batch:
        assert s.advantages is not None
        s.advantages = torch.where(s.loss_mask, (s.advantages - mean) / std, 0.0)


def train_step(c: Campaign, batch: Sequence[TrainSample]) -> Metrics:
    """Advantages from the pre-update critic, then the critic update, then the actor update
    (critic only during warm-up): the critic's pre-update values anchor the estimator."""
    if not batch:
        return {"train/actor_updated": 0.0}
    compute_advantages(c, batch)
    gaps = [s.sampler_gap for s in batch if np.isfinite(s.sampler_gap)]
    metrics = {"train/logprob_gap": float(np.mean(gaps)) if gaps else float("nan")}
    warm = c.step < c.cfg.critic_warmup_steps
    metrics |= update_critic(c, batch, warmup=warm)
    if not warm:
        metrics |= update_actor(c, batch)
    metrics["train/actor_updated"] = 0.0 if warm else 1.0
    return metrics


def _filled(t: torch.Tensor | None) -> torch.Tensor:
    if t is None:
        raise ValueError("a training sample reached the update before prepare_batch filled it")
    return t


def _stack(
    group: Sequence[TrainSample], field: str, fill: float | bool, device: torch.device | None = None
) -> torch.Tensor:
    width = max(len(s.sample) for s in group)
    out = _padded([getattr(s, field) for s in group], width, fill)  # (B, n_max)
    return out if device is None else out.to(device)


def update_critic(c: Campaign, batch: Sequence[TrainSample], *, warmup: bool = False) -> Metrics:
    """Passes of the value loss over the batch: `ppo_epochs` clipped, or during warm-up
    `critic_warmup_epochs` unclipped (a zero-initialized head must move far to fit returns).
    Each micro-batch's loss is weighted by its share of loss tokens: a token mean overall."""
    groups = micro_batches(batch, c.cfg.train_batch_tokens)
    tokens = sum(int(s.loss_mask.sum()) for s in batch)
    epochs = c.cfg.critic_warmup_epochs if warmup else c.cfg.ppo_epochs
    clip = None if warmup else c.cfg.value_clip
    total = 0.0
    for _ in range(epochs):
        c.critic_opt.zero_grad(set_to_none=True)
        total = 0.0
        dev = c.trainer.device
        for group in groups:
            mask = _stack(group, "loss_mask", False, dev)  # (B, n_max)
            with c.autocast():
                v = c.critic.batch_values([s.sample.token_ids for s in group], grad=True)
            loss = value_loss(
                v, _stack(group, "values", 0.0, dev), _stack(group, "returns", 0.0, dev), mask,
                clip=clip,
            ) * (int(mask.sum()) / tokens)  # fmt: skip
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(c.critic.parameters(), c.cfg.max_grad_norm)
        c.critic_opt.step()
    values = torch.cat([_filled(s.values)[s.loss_mask] for s in batch])  # pre-update
    returns = torch.cat([_filled(s.returns)[s.loss_mask] for s in batch])
    var = float(returns.var(unbiased=False))
    resid = float((returns - values).var(unbiased=False))
    explained = 1.0 - resid / var if var > 1e-8 else float("nan")  # undefined for equal returns
    return {
        "losses/value": total,
        "critic/value_mean": float(values.mean()),
        "critic/return_mean": float(returns.mean()),
        "critic/explained_variance": explained,
        "critic/warmup": 1.0 if warmup else 0.0,
    }


def update_actor(c: Campaign, batch: Sequence[TrainSample]) -> Metrics:
    """`ppo_epochs` passes of the clipped policy loss (+ kl_coef * k3 KL to the initial policy)
    with R3, then KL(old || new) measured. The pre-update weights become the behaviour policy
    of the tokens the engine samples before this update is published (async)."""
    groups = micro_batches(batch, c.cfg.train_batch_tokens)
    tokens = sum(int(s.loss_mask.sum()) for s in batch)
    if c.cfg.async_rollouts and c.cfg.behavior_copy:
        if c.behavior is None:
            c.behavior = frozen_copy(c.actor, c.trainer)
        copy_weights(c.behavior, c.actor)
    dev = c.trainer.device
    total = clip_frac = kl_ref = 0.0
    for _ in range(c.cfg.ppo_epochs):
        c.actor_opt.zero_grad(set_to_none=True)
        total = clip_frac = kl_ref = 0.0
        for group in groups:
            mask = _stack(group, "loss_mask", False, dev)  # (B, n_max)
            share = int(mask.sum()) / tokens
            with scored(c, c.actor, group, grad=True) as logp:  # (B, n_max)
                old = _stack(group, "old_logprobs", 0.0, dev)
                out = policy_loss(
                    logp, old, _stack(group, "advantages", 0.0, dev), mask,
                    clip_eps=c.cfg.clip_eps,
                )  # fmt: skip
                loss = out.loss
                if c.reference is not None:
                    # k3 estimate of KL(actor || reference): (r - 1) - log r, r = pi_ref / pi_actor
                    k3 = approx_kl(_stack(group, "ref_logprobs", 0.0, dev), logp, mask)
                    loss = loss + c.cfg.kl_coef * k3
                    kl_ref += share * float(k3.detach())
                (share * loss).backward()
            total += share * float(out.loss.detach())
            clip_frac += share * out.clip_fraction
        torch.nn.utils.clip_grad_norm_(c.actor.parameters(), c.cfg.max_grad_norm)
        c.actor_opt.step()
    kl = 0.0
    for group in groups:
        mask = _stack(group, "loss_mask", False, dev)
        new = _logprobs(c, c.actor, group, grad=False)  # (B, n_max)
        kl += (
            int(mask.sum())
            / tokens
            * float(approx_kl(new, _stack(group, "old_logprobs", 0.0, dev), mask))
        )
    stale = sum(int(((s.versions < c.weight_version) & s.loss_mask.numpy()).sum()) for s in batch)
    metrics: dict[str, float] = {
        "losses/policy": total,
        "train/clip_fraction": clip_frac,
        "train/kl": kl,
        "train/stale_token_fraction": stale / tokens if tokens else 0.0,
    }
    if c.reference is not None:
        metrics["train/kl_ref"] = kl_ref
    return metrics


# ---- publish, log, record -------------------------------------------------------------------
def publish_weights(c: Campaign) -> Metrics:
    """Save the actor, pause generation (in-flight requests abort; the harness re-sends their
    turns), load the new weights as version + 1, continue.

    Generation is quiesced first so no request spans two versions (paper, section 2); the
    engine is resumed even when the update fails, and the failure is raised. With several
    servers (`engine_servers`) each step reaches every one: all are paused before any update,
    each must load and report version + 1, all are continued after (docs/scale.md). A server
    that refuses fails the publish (naming it), possibly after others loaded version + 1.
    """
    version = c.weight_version + 1
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


def rollout_metrics(c: Campaign, batch: RolloutBatch, samples: Sequence[TrainSample]) -> Metrics:
    """What the step's trials did: dense reward and resolved rate of the admitted trials,
    lengths, and what was excluded (infrastructure, cancelled, stale)."""
    admitted = batch.admitted
    n = max(1, len(admitted))
    stale = [staleness(c.weight_version, r) for r in admitted]
    pays = [len(paid(c, r).passed) for r in admitted]
    return {
        "rollout/reward": sum(r.trial.passed for r in admitted) / n,
        # the passing outcomes paid (`paid`: not those outside the task's reference verdict,
        # provoked skips, or outcomes recorded after the agent's code ran in the runner), and
        # the share of trials whose task has a reference verdict to pay against
        "rollout/paid": sum(pays) / n,
        "rollout/reference_share": sum(r.trial.task_hash in c.verdicts for r in admitted) / n,
        "rollout/resolved_rate": sum(r.trial.resolved for r in admitted) / n,
        "rollout/train_reward": sum(s.reward for s in samples) / max(1, len(samples)),
        "rollout/turns": sum(len(r.trajectory.turns) for r in admitted) / n,
        "rollout/stop_rate": sum(r.trajectory.stop == "finished" for r in admitted) / n,
        "rollout/turn_limit_rate": sum(r.trajectory.stop == "turn_limit" for r in admitted) / n,
        "rollout/truncated_masked": float(
            sum(truncated(r) for r in admitted) if c.cfg.truncation == "masked" else 0
        ),
        "rollout/tokens": sum(len(s.sample) for s in samples) / max(1, len(samples)),
        "rollout/response_tokens": sum(int(s.loss_mask.sum()) for s in samples)
        / max(1, len(samples)),
        "rollout/launched": float(batch.launched),
        "rollout/admitted": float(len(admitted)),
        "rollout/trainable": float(len(samples)),
        "rollout/infra_failures": float(len(batch.infrastructure)),
        "rollout/engine_failures": float(
            sum(r.trial.failure_mode == "engine_error" for r in batch.infrastructure)
        ),
        "rollout/cancelled": float(batch.launched - len(admitted) - len(batch.infrastructure)),
        "rollout/stale_dropped": float(sum(s > c.cfg.max_staleness for s in stale)),
        "rollout/staleness_max": float(max(stale, default=0)),
        "rollout/retried_turns": float(sum(r.trajectory.retried_turns for r in admitted)),
        "rollout/seconds": batch.seconds,
        "tito/drift_rate_max": max((s.audit.drift_rate for s in samples if s.audit), default=0.0),
        "tito/span_mismatches": float(sum(s.audit.span_mismatches for s in samples if s.audit)),
        "tito/text_fallbacks": float(
            sum(s.audit.cases.get("text_fallback", 0) for s in samples if s.audit)
        ),
        "perf/trainer_rss_mb": _rss_mb(),
        **_engine_stats(c),
        "reward/scale": c.reward_scale if c.reward_scale is not None else float("nan"),
    }


def _rss_mb(pid: str = "self") -> float:
    """Resident memory of a process in MiB (Linux /proc), NaN where unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _engine_stats(c: Campaign) -> Metrics:
    """Memory and cache size of a local engine we started (its /engine_stats), else nothing."""
    if c.engine is None:
        return {}
    try:
        stats = c.client.engine_stats()
    except Exception:  # noqa: BLE001 - observability only
        return {}
    return {
        "perf/engine_rss_mb": float(stats.get("rss_mb", float("nan"))),
        "perf/engine_cache_tokens": float(stats.get("prefix_cache_tokens", 0)),
        "perf/engine_rows_per_forward": stats["decode_rows"] / max(1, stats["decode_forwards"]),
    }


def keep_metrics_before(path: Path, step: int) -> int:
    """Drop the lines of steps >= `step` from a run's metrics.jsonl (what a killed run logged
    after its last checkpoint: resuming replays those steps and logs them again; a resumed
    run used to hold them twice). Returns how many lines were dropped."""
    if not path.is_file():
        return 0
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if _before(line, step)]
    if len(kept) != len(lines):
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept))
        tmp.replace(path)
    return len(lines) - len(kept)


def _before(line: str, step: int) -> bool:
    try:
        row = json.loads(line)
    except ValueError:
        return False  # a line the kill cut short
    logged = row.get("step") if isinstance(row, dict) else None
    return not isinstance(logged, int | float) or logged < step


def log_metrics(c: Campaign, step: int, metrics: Metrics) -> None:
    """Append one JSON line per step to run_dir/metrics.jsonl."""
    with (c.run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": step, **metrics}) + "\n")


def record_rollouts(
    c: Campaign,
    step: int,
    batch: RolloutBatch,
    samples: Sequence[TrainSample],
    trainer_version: int,
) -> None:
    """One TrajectoryRecord per launched trial: its status (admitted, infrastructure,
    cancelled, stale, untrainable), its weight versions and its staleness against the trainer
    version that consumed the batch."""
    from warehouse import TrajectoryRecord, record_trajectories

    trainable = {s.slot for s in samples}
    groups = [
        (batch.admitted, "admitted"),
        (batch.infrastructure, "infrastructure"),
        (batch.cancelled(), "cancelled"),
    ]
    rows = []
    for rollouts, status in groups:
        for r in rollouts:
            turns = r.trajectory.turns
            versions = r.trajectory.weight_versions()
            stale = staleness(trainer_version, r) if versions else None
            row_status = status
            if status == "admitted" and r.sample not in trainable:
                if (stale or 0) > c.cfg.max_staleness:
                    row_status = "stale"
                elif c.cfg.truncation == "masked" and truncated(r):
                    row_status = "masked"
                else:
                    row_status = "untrainable"
            rows.append(
                TrajectoryRecord(
                    campaign=c.run_id,
                    step=step,
                    task_hash=r.trial.task_hash,
                    sample=r.sample,
                    weight_version=min(versions) if versions else trainer_version,
                    weight_version_max=max(versions) if versions else None,
                    staleness=stale,
                    reward=float(r.trial.passed),
                    assertions_passed=r.trial.passed,
                    assertions_total=r.trial.total,
                    turns=len(turns),
                    tokens=sum(len(t.generation.output_ids) for t in turns),
                    failure_mode=r.trial.failure_mode,
                    status=row_status,
                    trial_seconds=r.trial.total_s,
                )
            )
    record_trajectories(c.store, rows)


def evaluate(c: Campaign, step: int) -> EvaluationSummary:
    """Roll out every held-out task `eval_samples` times with the current weights, record the
    rows and return resolved %, dense score and the per-category table."""
    from warehouse import record_evaluations

    cfg = c.cfg
    harness = _harness(c, temperature=cfg.eval_temperature)
    jobs = evaluation_jobs(c.eval_tasks, cfg.eval_samples, seed=cfg.seed)
    rollouts = c.pool.run_all(jobs, harness) if jobs else []
    checkpoint_name = f"v{c.weight_version}"
    rows = evaluation_rows(
        jobs, rollouts, run_id=c.run_id, checkpoint=checkpoint_name,
        benchmark=cfg.eval_benchmark, weight_version=c.weight_version,
    )  # fmt: skip
    if rows:
        record_evaluations(c.store, rows)
    summary = summarize_evaluation(
        jobs, rollouts, campaign=cfg.campaign, run_id=c.run_id, step=step,
        checkpoint=checkpoint_name, benchmark=cfg.eval_benchmark,
    )  # fmt: skip
    if jobs:  # an evaluation of no tasks measured nothing: no line of its own
        log_metrics(
            c,
            step,
            {
                k: v
                for k, v in summary.metadata().items()
                if k.startswith(("validate/", "category/"))
            },
        )
    return summary


def checkpoint(c: Campaign) -> Path:
    """Write a resumable checkpoint of the run after the current step; prune old ones."""
    state = CheckpointState(
        run_id=c.run_id,
        step=c.step,
        weight_version=c.weight_version,
        data_position=c.step * c.draws_per_step,
        reward_scale=c.reward_scale,
        policy_path=str(c.policy_path),
    )
    path = save_checkpoint(
        checkpoint_dir(c.run_dir, c.step),
        state,
        actor=c.actor,
        tokenizer=c.tokenizer,
        critic=c.critic,
        actor_opt=c.actor_opt,
        critic_opt=c.critic_opt,
        behavior=c.behavior,
    )
    prune_checkpoints(c.run_dir, c.cfg.keep_checkpoints)
    return path
