"""The one typed config of a PPO campaign; every field is documented once, here.

Presets are small TOML files under training/presets/ (`load_campaign_config`). Derived values
(the critic learning rate when unset, the run directory's layout) are computed, not configured.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from training.harness import HarnessConfig
from training.r3 import FailurePolicy

PRESETS = Path(__file__).resolve().parent / "presets"


class CampaignConfig(BaseModel):
    """A PPO campaign: where tasks and weights come from, the update, the evaluation cadence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    campaign: str = Field("ppo", min_length=1, description="campaign name in warehouse rows")
    run_dir: Path = Field(Path("runs/ppo"), description="config, metrics and published weights")
    store: Path | None = Field(
        None, description="warehouse path; None: the default store ($T1_WAREHOUSE)"
    )
    policy_path: Path | None = Field(
        None, description="initial checkpoint (model + tokenizer); None: the warm-started policy"
    )
    engine_url: str | None = Field(
        None, description="an SGLang-protocol server; None: start the local engine in-process"
    )
    sandbox_backend: str = Field("local", description="sandbox backend of every trial")

    pool: str | None = Field(
        None, description="warehouse pool to train on (latest version); None: the seed tasks"
    )
    train_task_ids: list[str] | None = Field(
        None, description="keep only these task ids of the pool (None: all but the eval tasks)"
    )
    eval_task_ids: list[str] = Field(
        default_factory=list, description="held-out seed task ids evaluated every eval_every steps"
    )
    eval_benchmark: str = Field("seeds-heldout", description="benchmark name of evaluation rows")
    eval_every: int = Field(10, ge=1, description="evaluate after every K-th step (and the last)")
    eval_temperature: float = Field(0.7, gt=0, description="sampling temperature when evaluating")

    steps: int = Field(100, ge=1, description="PPO steps (one rollout batch and update each)")
    tasks_per_step: int = Field(8, ge=1, description="trials per step, one sample per task")
    seed: int = Field(0, description="epoch permutation, sampling and torch seed")

    harness: HarnessConfig = Field(
        default_factory=HarnessConfig, description="agent loop (turns, tokens, temperature)"
    )

    lr: float = Field(1e-6, gt=0, description="actor AdamW learning rate")
    critic_lr: float | None = Field(
        None, gt=0, description="critic learning rate; None: the actor's (the paper's choice)"
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay, actor and critic")
    ppo_epochs: int = Field(1, ge=1, description="passes over each rollout batch per update")
    clip_eps: float = Field(0.2, gt=0, description="PPO ratio clip")
    value_clip: float | None = Field(0.2, gt=0, description="value clip; None: plain MSE")
    gamma: float = Field(1.0, ge=0, le=1, description="discount over sampled tokens")
    lam: float = Field(1.0, ge=0, le=1, description="GAE lambda")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clip, actor and critic")
    critic_warmup_steps: int = Field(
        0, ge=0, description="first steps that update the critic only (actor frozen)"
    )
    r3: bool = Field(True, description="replay the sampler's routing in the actor's forward")
    routing_failure: FailurePolicy = Field(
        "live", description="R3 rows the sampler did not record: live routing or an error"
    )
    keep_checkpoints: int = Field(2, ge=1, description="published weight versions kept on disk")

    @property
    def critic_learning_rate(self) -> float:
        """The critic's learning rate: `critic_lr`, else the actor's."""
        return self.critic_lr if self.critic_lr is not None else self.lr


def load_campaign_config(path: Path | str, **overrides: object) -> CampaignConfig:
    """A config from a TOML preset (a name under training/presets/ or a path), with overrides."""
    p = Path(path)
    if not p.suffix:
        p = PRESETS / f"{p.name}.toml"
    if not p.is_file():
        raise ValueError(f"no campaign preset at {p}")
    data = tomllib.loads(p.read_text())
    data.update({k: v for k, v in overrides.items() if v is not None})
    return CampaignConfig.model_validate(data)
