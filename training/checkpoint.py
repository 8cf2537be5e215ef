"""Resumable campaign checkpoints: everything a run needs to continue as if never stopped.

A checkpoint is a directory `run_dir/checkpoints/step-NNNNNN/` written after the step's publish:

    actor/            the actor (HF safetensors + config) and tokenizer: also the engine's weights
    behavior/         the previous weight version (one-step async recomputes stale tokens with it)
    critic.pt         critic state dict
    optimizers.pt     actor and critic AdamW state dicts
    rng.pt            torch, numpy and python RNG states
    state.json        `CheckpointState`: step to run next, engine weight version, data position,
                      reward scale, run id, initial policy path

It is written to a temporary directory and renamed into place, so a run killed mid-save leaves
the previous checkpoint as the latest. Resuming loads all of it and restarts the engine on the
checkpoint's actor at its version; in one-step async mode the batch that was generating when
the checkpoint was taken is generated again from the same data position.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

CHECKPOINTS = "checkpoints"


class CheckpointState(BaseModel):
    """The scalars of a checkpoint (state.json)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    step: int = Field(ge=0, description="the next step to run")
    weight_version: int = Field(ge=0, description="version of actor/ (what the engine serves)")
    data_position: int = Field(ge=0, description="task draws consumed before `step`")
    reward_scale: float | None = None
    policy_path: str = Field(description="initial checkpoint: critic shape, KL reference")
    has_behavior: bool = False


def checkpoint_due(
    step: int, *, last: bool, every: int, minutes: float | None, since_s: float
) -> bool:
    """Whether to save after step `step` (1-based: steps done): the last step, every
    `every`-th step (0: never by count), or `minutes` after the previous save (or the run's
    start) has passed (`since_s` seconds). Before this, campaigns saved only their last step
    by default, and a killed run had nothing to resume from."""
    if last or (every and step % every == 0):
        return True
    return minutes is not None and since_s >= minutes * 60


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / CHECKPOINTS / f"step-{step:06d}"


def save_checkpoint(
    directory: Path,
    state: CheckpointState,
    *,
    actor: Any,
    tokenizer: Any,
    critic: torch.nn.Module,
    actor_opt: torch.optim.Optimizer,
    critic_opt: torch.optim.Optimizer,
    behavior: Any | None = None,
) -> Path:
    """Write one checkpoint atomically (temp dir + rename); returns its directory."""
    from training.chat_tokenizer import save_chat_tokenizer
    from training.policy import save_policy

    tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_policy(actor, tmp / "actor")
    save_chat_tokenizer(tokenizer, tmp / "actor")
    if behavior is not None:
        save_policy(behavior, tmp / "behavior")
    torch.save(critic.state_dict(), tmp / "critic.pt")
    torch.save(
        {"actor": actor_opt.state_dict(), "critic": critic_opt.state_dict()}, tmp / "optimizers.pt"
    )
    torch.save(
        {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        },
        tmp / "rng.pt",
    )
    state = state.model_copy(update={"has_behavior": behavior is not None})
    (tmp / "state.json").write_text(state.model_dump_json(indent=2))
    if directory.exists():
        shutil.rmtree(directory)
    tmp.rename(directory)
    return directory


def latest_checkpoint(path: Path) -> Path:
    """`path` itself when it is a checkpoint, else the newest checkpoint of the run at `path`.

    Raises ValueError naming the path when there is none.
    """
    if (path / "state.json").is_file():
        return path
    found = sorted((path / CHECKPOINTS).glob("step-*/state.json")) if path.is_dir() else []
    if not found:
        raise ValueError(f"no campaign checkpoint under {path}")
    return found[-1].parent


def read_state(directory: Path) -> CheckpointState:
    try:
        return CheckpointState.model_validate(json.loads((directory / "state.json").read_text()))
    except (OSError, ValueError) as e:
        raise ValueError(f"{directory / 'state.json'}: unreadable checkpoint state: {e}") from e


def load_training_state(
    directory: Path,
    *,
    critic: torch.nn.Module,
    actor_opt: torch.optim.Optimizer,
    critic_opt: torch.optim.Optimizer,
) -> None:
    """Load critic, optimizers and RNG states of a checkpoint into live objects (the actor is
    loaded from `directory/actor` by the caller, like any policy checkpoint)."""
    critic.load_state_dict(torch.load(directory / "critic.pt", weights_only=True))
    opts = torch.load(directory / "optimizers.pt", weights_only=True)
    actor_opt.load_state_dict(opts["actor"])
    critic_opt.load_state_dict(opts["critic"])
    rng = torch.load(directory / "rng.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints."""
    found = sorted((run_dir / CHECKPOINTS).glob("step-*"))
    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
