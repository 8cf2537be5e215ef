"""The warm-started tiny policy: tokenizer trained, model built, brief SFT on tool-call turns.

`warm_started_policy()` returns a local checkpoint directory (model + tokenizer) and builds it
only when the cache has none for this exact recipe: the key hashes the policy config, the
warm-start config and the training texts, so new seeds produce a new checkpoint and unchanged
inputs reuse the old one. The cache lives under `.cache/t1-forge/policy/<key>/` (override the root
with T1_FORGE_CACHE); a build writes to a temporary directory and renames it into place.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from training.chat_format import CHAT_TEMPLATE
from training.policy import PolicyConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
SEED_DIR = REPO_ROOT / "tasks" / "seeds"


class WarmStartConfig(BaseModel):
    """The supervised warm start: how long and how hard to fit the reference turns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: int = Field(400, description="optimizer steps")
    batch_size: int = Field(4, description="examples per step")
    max_tokens: int = Field(1536, description="examples are cut to this many tokens")
    lr: float = Field(3e-3, description="peak AdamW learning rate (cosine decay)")
    weight_decay: float = 0.0
    seed: int = 0


def cache_root() -> Path:
    return Path(os.environ.get("T1_FORGE_CACHE", REPO_ROOT / ".cache" / "t1-forge"))


# The libraries whose numerics decide the weights: a recipe rebuilt under other versions gave
# other weights (a countdown SFT checkpoint built twice a day apart resolved 40.7% and 20.7%
# of the same held-out draws), so their versions are part of every checkpoint's key.
NUMERICS_LIBRARIES = ("torch", "transformers", "tokenizers")


def numerics_versions() -> dict[str, str]:
    """Installed version of each of NUMERICS_LIBRARIES ('-' where one is missing)."""
    from importlib import metadata

    versions = {}
    for name in NUMERICS_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "-"
    return versions


def weights_digest(checkpoint: Path) -> str:
    """sha256 of a checkpoint's weights file (16 hex): equal digests, equal starting points."""
    h = hashlib.sha256()
    with (Path(checkpoint) / "model.safetensors").open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def recipe_key(
    policy: PolicyConfig,
    warm: WarmStartConfig,
    texts: list[str],
    versions: dict[str, str] | None = None,
) -> str:
    """Cache key of a warm-start recipe: configs, texts, template and the numerics libraries'
    versions (`numerics_versions()` unless given)."""
    h = hashlib.sha256()
    h.update(json.dumps(versions or numerics_versions(), sort_keys=True).encode())
    h.update(json.dumps(policy.model_dump(), sort_keys=True).encode())
    h.update(json.dumps(warm.model_dump(), sort_keys=True).encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode()).digest())
    h.update(CHAT_TEMPLATE.encode())
    h.update(b"recipe-v1")
    return h.hexdigest()[:16]


def warm_started_policy(
    policy: PolicyConfig | None = None,
    warm: WarmStartConfig | None = None,
    *,
    seed_dir: Path = SEED_DIR,
    reuse_stale: bool = False,
    log: bool = False,
    device: str | None = None,
) -> Path:
    """Directory of the warm-started checkpoint (model + tokenizer), building it if needed.

    The key covers the seed trajectories, so new or edited seed solutions rebuild it. With
    `reuse_stale`, a checkpoint of the same policy and warm-start configs built from older seeds
    is returned instead of rebuilding (the newest one): for tests that need *a* tool-calling
    policy, not the one matching today's seeds. `device` (default: the CPU) is where a build
    trains, bf16 autocast on CUDA; it is not part of the key.
    """
    from training.trajectories import tokenizer_corpus, training_trajectories

    policy = policy or PolicyConfig()
    warm = warm or WarmStartConfig()
    trajectories = training_trajectories(seed_dir)
    texts = tokenizer_corpus(trajectories)
    key = recipe_key(policy, warm, texts)
    target = cache_root() / "policy" / key
    found = _cached(target, policy, warm, reuse_stale)
    if found is not None:
        return found
    # One build per recipe on this machine: a second process asking meanwhile (the demo and
    # the UI, two test workers) waits for the first one's checkpoint instead of building it
    # again beside it.
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _cached(target, policy, warm, reuse_stale)
        if found is not None:
            return found
        tmp = target.with_name(f"{key}.tmp-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        _build(policy, warm, trajectories, texts, tmp, log=log, device=device)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "warm_start.json").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
    return target


def _cached(
    target: Path, policy: PolicyConfig, warm: WarmStartConfig, reuse_stale: bool
) -> Path | None:
    """The finished checkpoint at `target`, else (with `reuse_stale`) the newest of the same
    configs, else None."""
    if (target / "warm_start.json").is_file():
        return target
    if reuse_stale:
        stale = _same_recipe_checkpoints(policy, warm)
        if stale:
            return stale[0]
    return None


def _same_recipe_checkpoints(policy: PolicyConfig, warm: WarmStartConfig) -> list[Path]:
    """Finished checkpoints built with these configs (any seeds), newest first."""
    found: list[tuple[float, Path]] = []
    root = cache_root() / "policy"
    if not root.is_dir():
        return []
    for meta_path in root.glob("*/warm_start.json"):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        same = (
            meta.get("policy") == policy.model_dump()
            and meta.get("warm_start") == warm.model_dump()
            and meta.get("chat_template") == CHAT_TEMPLATE
        )
        if same:
            found.append((meta_path.stat().st_mtime, meta_path.parent))
    return [p for _, p in sorted(found, reverse=True)]


def _build(policy, warm, trajectories, texts, out: Path, *, log: bool, device=None) -> None:
    from training.chat_tokenizer import save_chat_tokenizer, train_chat_tokenizer
    from training.policy import build_policy, save_policy

    t0 = time.monotonic()
    tokenizer = train_chat_tokenizer(texts, vocab_size=policy.vocab_size)
    if len(tokenizer) > policy.vocab_size:
        raise ValueError(f"tokenizer has {len(tokenizer)} ids > vocab_size {policy.vocab_size}")
    model = build_policy(policy, attn="sdpa")
    model.config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.generation_config.pad_token_id = model.config.pad_token_id
    losses = supervised_steps(model, tokenizer, trajectories, warm, log=log, t0=t0, device=device)
    model.eval()
    save_policy(model.cpu(), out)
    save_chat_tokenizer(tokenizer, out)
    meta = {
        "policy": policy.model_dump(),
        "warm_start": warm.model_dump(),
        "trajectories": [t.task_id for t in trajectories],
        "chat_template": CHAT_TEMPLATE,
        "final_loss": sum(losses[-20:]) / max(1, len(losses[-20:])),
        "first_loss": losses[0] if losses else None,
        "seconds": time.monotonic() - t0,
    }
    (out / "warm_start.json").write_text(json.dumps(meta, indent=2))


def supervised_steps(
    model,
    tokenizer,
    trajectories,
    warm: WarmStartConfig,
    *,
    log: bool = False,
    t0: float = 0.0,
    render: dict | None = None,
    device: str | None = None,
) -> list[float]:
    """`warm.steps` AdamW steps of next-token loss on the assistant text of rendered
    trajectories (warm-up then cosine decay); returns the loss of every step. `render` holds
    keyword arguments of `render_example` (tool-call styles, final reasoning). `device`: where
    the steps run (the model is moved there; bf16 autocast on CUDA)."""
    import contextlib
    import math

    import torch

    from training.trajectories import render_example

    dev = torch.device(device or "cpu")
    model.to(dev)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if dev.type == "cuda"
        else contextlib.nullcontext()
    )

    rng = random.Random(warm.seed)
    torch.manual_seed(warm.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=warm.lr, weight_decay=warm.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(s, warm.steps) / warm.steps))
        ),
    )
    model.train()
    losses: list[float] = []
    for step in range(warm.steps):
        batch = [
            render_example(tokenizer, rng.choice(trajectories), rng, **(render or {}))
            for _ in range(warm.batch_size)
        ]
        width = min(warm.max_tokens, max(len(b.token_ids) for b in batch))
        ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for i, ex in enumerate(batch):
            n = min(width, len(ex.token_ids))
            ids[i, :n] = torch.tensor(ex.token_ids[:n])
            attn[i, :n] = 1
            lab = torch.tensor(ex.token_ids[:n])
            lab[~torch.tensor(ex.loss_mask[:n])] = -100
            labels[i, :n] = lab
        with autocast:
            result = model(
                input_ids=ids.to(dev), attention_mask=attn.to(dev), labels=labels.to(dev),
                use_cache=False,
            )  # fmt: skip
        opt.zero_grad(set_to_none=True)
        result.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(result.loss.detach()))
        if log and (step % 50 == 0 or step == warm.steps - 1):
            print(
                f"sft step {step:4d} loss {losses[-1]:.3f} ({time.monotonic() - t0:.0f}s)",
                flush=True,
            )
    return losses


def fine_tuned_policy(
    base: Path,
    trajectories: list,
    warm: WarmStartConfig,
    *,
    name: str = "sft",
    log: bool = False,
    render: dict | None = None,
    device: str | None = None,
) -> Path:
    """A checkpoint fine-tuned from `base` (model + tokenizer) on `trajectories`, cached under
    `.cache/t1-forge/sft/<key>` where the key covers the base's weights (not its path), the
    config, the examples and the numerics libraries' versions."""
    from training.chat_tokenizer import load_chat_tokenizer, save_chat_tokenizer
    from training.policy import load_policy, save_policy

    h = hashlib.sha256()
    h.update(weights_digest(base).encode())
    h.update(json.dumps(numerics_versions(), sort_keys=True).encode())
    h.update(json.dumps(warm.model_dump(), sort_keys=True).encode())
    for t in trajectories:
        h.update(repr(t).encode())
    h.update(json.dumps(render or {}, sort_keys=True, default=str).encode())
    h.update(b"sft-v1")
    target = cache_root() / "sft" / f"{name}-{h.hexdigest()[:16]}"
    if (target / "warm_start.json").is_file():
        return target
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    t0 = time.monotonic()
    tokenizer = load_chat_tokenizer(Path(base))
    model = load_policy(Path(base))
    losses = supervised_steps(
        model, tokenizer, trajectories, warm, log=log, t0=t0, render=render, device=device
    )
    model.eval()
    save_policy(model.cpu(), tmp)
    save_chat_tokenizer(tokenizer, tmp)
    meta = {
        "base": str(base),
        "warm_start": warm.model_dump(),
        "trajectories": [t.task_id for t in trajectories],
        "first_loss": losses[0] if losses else None,
        "final_loss": sum(losses[-20:]) / max(1, len(losses[-20:])),
        "seconds": time.monotonic() - t0,
    }
    (tmp / "warm_start.json").write_text(json.dumps(meta, indent=2))
    try:
        tmp.rename(target)
    except OSError:
        if not (target / "warm_start.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return target
