"""The one typed config of a PPO campaign; every field is documented once, here.

Presets are small TOML files under training/presets/ (`load_campaign_config`). Derived values
(the batch size, the run id when unset, the run directory) are computed, not configured.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from executor import ExecutorConfig
from training.harness import HarnessConfig
from training.numerics import DeviceSetting, PrecisionSetting
from training.r3 import FailurePolicy

PRESETS = Path(__file__).resolve().parent / "presets"


class CampaignConfig(BaseModel):
    """A PPO campaign: where tasks and weights come from, rollouts, the update, evaluation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # ---- identity and places ---------------------------------------------------------------
    campaign: str = Field("ppo", min_length=1, description="campaign name (run ids start with it)")
    run_id: str | None = Field(
        None, description="this run's id; None: '<campaign>-<UTC time>-<4 hex>' (unique per run)"
    )
    runs_dir: Path = Field(Path("runs"), description="each run writes into runs_dir/<run id>/")
    resume_from: Path | None = Field(
        None, description="a run directory (its latest checkpoint) or one checkpoint directory"
    )
    preset: str | None = Field(
        None,
        description="the preset these settings came from (a name or TOML path): a label, "
        "recorded so a resumed run names it; None: not from a preset",
    )
    store: Path | None = Field(
        None, description="warehouse path; None: the default store ($T1_WAREHOUSE)"
    )
    policy_path: Path | None = Field(
        None, description="initial checkpoint (model + tokenizer); None: the warm-started policy"
    )
    engine_url: str | None = Field(
        None,
        description="an SGLang-protocol server, or the router in front of engine_servers; "
        "None and no engine_servers: start the local engine",
    )
    engine_servers: list[str] = Field(
        default_factory=list,
        description="the servers' own URLs when several serve the campaign (behind the "
        "engine_url router, or without one): a weight publish pauses, updates and continues "
        "every one; without engine_url each trial generates on the server a stable hash of "
        "its id picks; empty: engine_url (or the local engine) is the one server",
    )
    local_engine: Literal["process", "thread"] = Field(
        "process", description="local engine as a child process (parallel) or an in-process thread"
    )
    engine_host: str = Field(
        "127.0.0.1",
        description="address the local engine binds and trials connect to: 127.0.0.1 (this "
        "machine), or on a cluster this node's IP, reachable from every sandbox node",
    )
    sandbox_backend: str = Field("local", description="sandbox backend of every trial")
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="where rollout and evaluation trials run: 'local' threads, or a Ray "
        "cluster (docs/scale.md); rollout_workers stays the number of trials in flight",
    )

    # ---- tasks ------------------------------------------------------------------------------
    pool: str | None = Field(None, description="warehouse pool to train on; None: the seed tasks")
    pool_version: int | None = Field(
        None, ge=1, description="the pool's version to train on; None: the latest recorded"
    )
    train_dir: Path | None = Field(
        None, description="train on this task directory (Harbor or ours) instead of a pool"
    )
    train_task_ids: list[str] | None = Field(
        None, description="keep only these task ids of the pool (None: all but the eval tasks)"
    )
    eval_task_ids: list[str] = Field(
        default_factory=list, description="held-out seed task ids evaluated every eval_every steps"
    )
    eval_dir: Path | None = Field(
        None, description="held-out task directory (Harbor or ours) evaluated instead of the ids"
    )
    eval_benchmark: str = Field("seeds-heldout", description="benchmark name of evaluation rows")
    eval_every: int = Field(10, ge=1, description="evaluate after every K-th step (and the last)")
    eval_at_start: bool = Field(False, description="also evaluate the initial weights")
    eval_samples: int = Field(1, ge=1, description="samples per held-out task (k)")
    eval_temperature: float = Field(0.7, gt=0, description="sampling temperature when evaluating")

    # ---- rollouts ---------------------------------------------------------------------------
    steps: int = Field(100, ge=1, description="PPO steps (one rollout batch and update each)")
    time_budget_s: float | None = Field(
        None, gt=0, description="stop after the step that crosses this wall time (then evaluate)"
    )
    tasks_per_step: int = Field(8, ge=1, description="tasks drawn per step")
    samples_per_task: int = Field(1, ge=1, description="trials per drawn task (k)")
    oversample: float = Field(
        0.0, ge=0, description="alpha: launch ceil((1 + alpha) * B) trials, keep the first B"
    )
    admission: Literal["launch_order", "first_finished"] = Field(
        "launch_order",
        description="which launched trials a step trains on: the first B by launch slot "
        "(the oversampled tail only replaces infrastructure failures; the batch keeps the "
        "launched length distribution) or the first B to finish (bounded step time, but a "
        "batch filtered toward short trials, docs/ppo.md)",
    )
    rollout_workers: int = Field(4, ge=1, description="trials (sandboxes) running at once")
    async_rollouts: bool = Field(
        True, description="one-step async: generate step k+1 while step k trains"
    )
    max_staleness: int = Field(
        1, ge=0, description="drop samples more than this many versions behind the trainer"
    )
    seed: int = Field(
        0,
        description="epoch permutation, torch seed, evaluation draws and, unless harness.seed "
        "is set, the base sampling seed of the training rollouts",
    )
    harness: HarnessConfig = Field(
        default_factory=HarnessConfig,
        description="agent loop (turns, tokens, temperature); its seed defaults to `seed`",
    )

    # ---- reward -----------------------------------------------------------------------------
    reward: Literal["dense", "binary"] = Field(
        "dense", description="passing assertions (dense) or 1 for a resolved trial (binary)"
    )
    truncation: Literal["scored", "zero", "masked"] = Field(
        "zero",
        description="what a trial cut by a limit (turn limit, context limit, agent timeout) "
        "earns: 'scored' verified and scored like a finish (the paper's rule), 'zero' reward "
        "0, 'masked' left out of the loss; not 'scored' by default, since scoring it like a "
        "finish makes running out the clock free (docs/ppo.md)",
    )
    placebo_rewards: bool = Field(
        False,
        description="shuffle the trained rewards among each batch's samples (seeded by seed "
        "and step): the placebo arm of the learning benchmark, whose update has the same "
        "size and noise as the real one but no true gradient",
    )
    reward_scale: float | None = Field(
        None,
        gt=0,
        description="dense reward = scale * passing assertions; None: 1 / the most assertions "
        "of a trial in the first batch, then fixed for the run",
    )

    # ---- the update -------------------------------------------------------------------------
    lr: float = Field(1e-6, gt=0, description="actor AdamW learning rate")
    critic_lr: float = Field(1e-5, gt=0, description="critic AdamW learning rate (its own)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay, actor and critic")
    ppo_epochs: int = Field(1, ge=1, description="passes over each rollout batch per update")
    clip_eps: float = Field(0.2, gt=0, description="PPO ratio clip")
    value_clip: float | None = Field(0.2, gt=0, description="value clip; None: plain MSE")
    gamma: float = Field(1.0, ge=0, le=1, description="discount over sampled tokens")
    lam: float = Field(1.0, ge=0, le=1, description="GAE lambda")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clip, actor and critic")
    trainer_threads: int | None = Field(
        1,
        ge=1,
        description="torch intra-op threads of the trainer (None: torch's default); on a "
        "shared CPU more threads than free cores spin and slow every step several times",
    )
    train_batch_tokens: int = Field(
        8192, ge=1, description="padded tokens per trainer forward (streams are micro-batched)"
    )
    critic_warmup_steps: int = Field(
        0, ge=0, description="first steps fit the critic only (no actor update, no publish)"
    )
    critic_warmup_epochs: int = Field(
        4, ge=1, description="critic passes over each warm-up batch (unclipped value loss)"
    )
    whiten_advantages: bool = Field(
        False, description="normalize advantages to mean 0, std 1 over the batch's loss tokens"
    )
    kl_coef: float = Field(
        0.0, ge=0, description="weight of the k3 KL(actor || initial policy) loss; 0: off"
    )
    r3: bool = Field(True, description="replay the sampler's routing in the actor's forward")
    routing_failure: FailurePolicy = Field(
        "live", description="R3 rows the sampler did not record: live routing or an error"
    )

    # ---- device, precision, trainer backend -------------------------------------------------
    device: DeviceSetting = Field(
        "auto",
        description="where the trainer and a local engine run: auto (CUDA when torch sees "
        "one, else the CPU), cpu, or cuda",
    )
    precision: PrecisionSetting = Field(
        "auto",
        description="auto (bf16 on CUDA, fp32 on the CPU), fp32, or bf16: actor and critic "
        "keep float32 master weights and run under bf16 autocast, frozen copies (reference, "
        "behaviour version) are stored in bf16; logprobs, values and losses stay float32",
    )
    trainer_backend: Literal["hf", "megatron"] = Field(
        "hf",
        description="the trainer's model implementation: transformers (hf) or a megatron-core "
        "GPTModel (Qwen3-MoE only; weights published to the engine in HF layout)",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute each decoder layer's activations in the backward pass"
    )
    behavior_copy: bool = Field(
        True,
        description="hold the previous weight version to score tokens sampled one version "
        "back (async); False: no copy, every token's old logprob is the pre-update actor's "
        "(recomputed before the update; a stale token's ratio then starts at 1)",
    )
    logprob_chunk_tokens: int = Field(
        1024,
        ge=1,
        description="positions per vocabulary chunk of the trainer's log-softmax (the full "
        "(B, n, V) logits never exist)",
    )

    # ---- outputs ----------------------------------------------------------------------------
    checkpoint_every: int = Field(
        10,
        ge=0,
        description="save a resumable checkpoint every K steps and after the last (0: by "
        "time and after the last only)",
    )
    checkpoint_minutes: float | None = Field(
        10.0,
        gt=0,
        description="also save one after the first step that ends this many minutes after "
        "the run's start or its last checkpoint (None: by step count only), so a killed run "
        "loses at most about this much",
    )
    keep_checkpoints: int = Field(2, ge=1, description="checkpoints and weight versions kept")

    @model_validator(mode="before")
    @classmethod
    def _harness_seed(cls, data: object) -> object:
        """harness.seed unset: the campaign's seed, so `seed` varies the training rollouts'
        sampling draws too (a preset that pinned it made 'three seeds' vary only the torch
        initialization and the task order)."""
        if not isinstance(data, dict):
            return data
        seed = data.get("seed", 0)
        harness = data.get("harness")
        if harness is None:
            return {**data, "harness": {"seed": seed}}
        if isinstance(harness, dict) and harness.get("seed") is None:
            return {**data, "harness": {**harness, "seed": seed}}
        if isinstance(harness, HarnessConfig) and harness.seed is None:
            return {**data, "harness": harness.model_copy(update={"seed": seed})}
        return data

    @model_validator(mode="after")
    def _check(self) -> CampaignConfig:
        if self.eval_dir is not None and self.eval_task_ids:
            raise ValueError("set eval_dir or eval_task_ids, not both")
        if self.train_dir is not None and self.pool is not None:
            raise ValueError("set train_dir or pool, not both")
        if len(set(self.engine_servers)) != len(self.engine_servers):
            raise ValueError(f"engine_servers lists a URL twice: {self.engine_servers}")
        for url in [self.engine_url, *self.engine_servers]:
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"engine URL {url!r} is not http:// or https://")
        return self

    @property
    def batch_size(self) -> int:
        """B: trials trained on per step (tasks_per_step * samples_per_task)."""
        return self.tasks_per_step * self.samples_per_task


def load_campaign_config(path: Path | str, **overrides: object) -> CampaignConfig:
    """A config from a TOML preset (a name under training/presets/ or a path), with overrides.

    Raises ValueError naming the file when it is missing or invalid.
    """
    p = Path(path)
    if not p.suffix:
        p = PRESETS / f"{p.name}.toml"
    if not p.is_file():
        raise ValueError(f"no campaign preset at {p}")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{p}: {e}") from e
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return CampaignConfig.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{p}: {first_error(e)}") from e


RUN_CONFIG = "config.json"  # a run's full config, beside its metrics and checkpoints
# Keys `run_campaign` writes into RUN_CONFIG besides the config's fields.
RUN_CONFIG_EXTRAS = ("resumed_from",)


def recorded_config(run_dir: Path) -> CampaignConfig:
    """The config a run recorded in `run_dir/config.json` (its extras dropped).

    Raises ValueError naming the file when it is missing, unreadable or invalid.
    """
    path = run_dir / RUN_CONFIG
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON object expected, got {type(data).__name__}")
        for key in RUN_CONFIG_EXTRAS:
            data.pop(key, None)
        return CampaignConfig.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{path}: not a readable run config: {first_error(e)}") from e
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ValueError(f"{path}: not a readable run config: {reason}") from e


def first_error(e: ValidationError) -> str:
    """A validation error in one line naming the field: `steps: Input should be greater than
    or equal to 1 (got 0)`, `harness.max_turns: ...` (a preset's error named only the file)."""
    errors = e.errors(include_url=False)
    if not errors:
        return str(e).strip().splitlines()[0]
    first = errors[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "config"
    got = first.get("input")
    shown = f" (got {got!r})" if "input" in first and not isinstance(got, dict) else ""
    more = f"; and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{field}: {first['msg']}{shown}{more}"
