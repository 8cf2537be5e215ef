"""Trainer-side log-probabilities of a stream, with or without R3 routing replay.

The trainer recomputes the behaviour policy's log-probabilities (the PPO ratio's denominator) in
its own numerics: float32 master weights (under bf16 autocast on a GPU, training/numerics.py) and
SDPA attention, one full forward pass over the stream. The train-inference gap is then
|logp_trainer - logp_sampler| at loss positions.

Memory: the decoder's last hidden states (B, n, H) are computed once; the vocabulary projection,
the float32 log-softmax and the entropy run over `chunk_tokens` positions at a time, so the whole
(B, n, V) logits tensor never exists (at a 151k vocabulary one 32k-token stream would need
19 GB in float32). With autograd each chunk is checkpointed: its logits are recomputed in the
backward pass instead of being kept.

A trainer model is an HF causal LM, or anything with the same two members (`get_decoder()`
returning a module whose output has `last_hidden_state`, `get_output_embeddings()` mapping hidden
states to logits) and, for R3, a `routing_replay(record, policy=...)` context manager
(training/megatron_policy.py); HF models replay through training/r3.py's router hooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from training.numerics import module_device
from training.r3 import FailurePolicy, ReplayStats, fit_record, replay_routing

if TYPE_CHECKING:
    from transformers import PreTrainedModel

DEFAULT_CHUNK_TOKENS = 1024
"""Positions per vocabulary chunk: 1024 x 151k x 4 bytes = 0.6 GB of float32 log-softmax."""


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each token given its prefix.

    logits: (n, V) next-token logits at every position; token_ids: (n,).
    Returns (n,) float32: out[0] is NaN (no prefix), out[i] = log_softmax(logits[i-1])[id_i].
    """
    assert logits.dim() == 2 and token_ids.dim() == 1 and logits.shape[0] == token_ids.shape[0]
    logp = torch.log_softmax(logits[:-1].float(), dim=-1)  # (n-1, V)
    picked = logp.gather(-1, token_ids[1:, None]).squeeze(-1)  # (n-1,)
    head = torch.full((1,), float("nan"), dtype=picked.dtype, device=picked.device)
    return torch.cat([head, picked])  # (n,)


def _chunk_scores(
    hidden: torch.Tensor, targets: torch.Tensor, head: Any, temperature: float, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden (m, H), targets (m,) -> logprob of each target (m,) and entropy (m,) (zeros when
    not asked), both float32; the (m, V) logits live only inside this call."""
    logits = head(hidden).float() / temperature  # (m, V)
    logp = torch.log_softmax(logits, dim=-1)  # (m, V)
    picked = logp.gather(-1, targets[:, None]).squeeze(-1)  # (m,)
    if not entropy:
        return picked, torch.zeros_like(picked.detach())
    with torch.no_grad():
        ent = -(logp.exp() * logp).sum(-1)  # (m,)
    return picked, ent


def chunked_token_logprobs(
    hidden: torch.Tensor,
    token_ids: torch.Tensor,
    head: Any,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of `token_ids` (B, n) from the decoder's last hidden states `hidden` (B, n, H).

    Position p is scored from hidden[:, p - 1] through `head` (the vocabulary projection) at
    `temperature`, `chunk_tokens` positions at a time (checkpointed under autograd). Returns
    (logprobs (B, n), entropy (B, n)), float32, NaN at position 0; entropy is detached and 0
    unless asked.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    batch, n, width = hidden.shape
    flat_h = hidden[:, :-1].reshape(-1, width)  # (B*(n-1), H)
    flat_t = token_ids[:, 1:].reshape(-1)  # (B*(n-1),)
    picked, ents = [], []
    grad = torch.is_grad_enabled() and flat_h.requires_grad
    for s in range(0, flat_h.shape[0], chunk_tokens):
        h, t = flat_h[s : s + chunk_tokens], flat_t[s : s + chunk_tokens]
        if grad:
            lp, en = checkpoint(
                _chunk_scores, h, t, head, temperature, entropy, use_reentrant=False
            )
        else:
            lp, en = _chunk_scores(h, t, head, temperature, entropy)
        picked.append(lp)
        ents.append(en)
    nan = torch.full((batch, 1), float("nan"), device=hidden.device)
    if not picked:  # streams of one token
        return nan, torch.zeros_like(nan)
    logp = torch.cat([nan, torch.cat(picked).view(batch, n - 1)], dim=1)  # (B, n)
    ent = torch.cat([torch.zeros_like(nan), torch.cat(ents).view(batch, n - 1)], dim=1)
    return logp, ent


def padded_ids(streams: list[np.ndarray], device: torch.device) -> tuple[torch.Tensor, list[int]]:
    """Streams right-padded with id 0 into (B, n_max) on `device`, and their lengths."""
    lengths = [len(s) for s in streams]
    ids = torch.zeros((len(streams), max(lengths)), dtype=torch.long)  # (B, n_max)
    for i, s in enumerate(streams):
        ids[i, : lengths[i]] = torch.as_tensor(s, dtype=torch.long)
    return ids.to(device), lengths


def padded_record(routings: list[np.ndarray], lengths: list[int]) -> torch.Tensor:
    """(B, n_max, L, k) routing record of right-padded streams: each stream's record fitted to
    its length (-1 rows where it is short), pad rows naming experts 0..k-1 (valid, never used
    by a real position)."""
    _, layers, k = np.asarray(routings[0]).shape
    width = max(lengths)
    record = torch.arange(k).expand(len(routings), width, layers, k).clone()  # (B, n_max, L, k)
    for i, r in enumerate(routings):
        record[i, : lengths[i]] = fit_record(torch.as_tensor(r, dtype=torch.long), lengths[i])
    return record


@contextmanager
def routing_replay(
    model: Any, record: torch.Tensor | None, *, policy: FailurePolicy = "live"
) -> Iterator[ReplayStats | None]:
    """Replay `record` ((n, L, k) or (B, n, L, k)) in every forward of `model` inside the block,
    through the model's own `routing_replay` when it has one (megatron), else the HF router
    hooks. None: no replay (live routing). Keep the block open across the backward pass when
    activations are recomputed (gradient checkpointing): the recompute must replay too."""
    if record is None:
        yield None
        return
    own = getattr(model, "routing_replay", None)
    if own is not None:
        with own(record, policy=policy):
            yield None
        return
    with replay_routing(model, record, policy=policy) as stats:
        yield stats


def _scores(
    model: Any,
    ids: torch.Tensor,
    temperature: float,
    chunk_tokens: int,
    entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state  # (B, n, H)
    return chunked_token_logprobs(
        hidden, ids, model.get_output_embeddings(), temperature=temperature,
        chunk_tokens=chunk_tokens, entropy=entropy,
    )  # fmt: skip


def stream_logprobs(
    model: PreTrainedModel,
    token_ids: np.ndarray,
    *,
    routing: np.ndarray | None = None,
    policy: FailurePolicy = "live",
    temperature: float = 1.0,
    grad: bool = False,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
) -> tuple[torch.Tensor, ReplayStats | None]:
    """Trainer log-probabilities for one stream, optionally replaying `routing` (R3).

    token_ids: (n,) ids; routing: (n, L, k) recorded experts, -1 for missing rows (a short record
    is padded with -1 first). `temperature` must be the sampling temperature: the engine reports
    log_softmax(logits / T), so the trainer scores the same distribution.
    Returns ((n,) logprobs on the model's device, replay stats or None without R3).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    ids = torch.as_tensor(token_ids, dtype=torch.long)[None, :].to(module_device(model))  # (1, n)
    record = None
    if routing is not None:
        record = fit_record(torch.as_tensor(routing, dtype=torch.long), ids.shape[1])
    with torch.enable_grad() if grad else torch.no_grad():
        with routing_replay(model, record, policy=policy) as stats:
            logp, _ = _scores(model, ids, temperature, chunk_tokens, False)
    return logp[0], stats


def batch_scores(
    model: PreTrainedModel,
    streams: list[np.ndarray],
    *,
    routings: list[np.ndarray] | None = None,
    policy: FailurePolicy = "live",
    temperature: float = 1.0,
    grad: bool = False,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch_logprobs` and the entropy of the policy at each position (detached, 0 unless
    `entropy`), each (B, n_max) float32 on the model's device, NaN / 0 at position 0 and at
    padding."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    ids, lengths = padded_ids(streams, module_device(model))  # (B, n_max)
    record = padded_record(routings, lengths) if routings is not None else None
    with torch.enable_grad() if grad else torch.no_grad():
        with routing_replay(model, record, policy=policy):
            logp, ent = _scores(model, ids, temperature, chunk_tokens, entropy)
    width = ids.shape[1]
    real = (
        torch.arange(width, device=ids.device)[None, :]
        < torch.tensor(lengths, device=ids.device)[:, None]
    )  # (B, n_max)
    logp = torch.where(real, logp, torch.full_like(logp, float("nan")))
    return logp, torch.where(real, ent, torch.zeros_like(ent))


def batch_logprobs(
    model: PreTrainedModel,
    streams: list[np.ndarray],
    *,
    routings: list[np.ndarray] | None = None,
    policy: FailurePolicy = "live",
    temperature: float = 1.0,
    grad: bool = False,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
) -> torch.Tensor:
    """`stream_logprobs` for several streams in one forward pass: right-padded to the longest.

    Right padding needs no attention mask: a causal model never lets a real position see a pad
    to its right, and MoE routing is per token, so each real position's logprob is what its
    stream alone would give (up to floating-point reduction order). Pad rows of the routing
    record name experts 0..k-1 (valid, never used by a real position).
    Returns (B, n_max) float32 on the model's device: NaN at position 0 of each stream and at
    padding.
    """
    logp, _ = batch_scores(
        model, streams, routings=routings, policy=policy, temperature=temperature, grad=grad,
        chunk_tokens=chunk_tokens,
    )  # fmt: skip
    return logp


def mean_abs_gap(
    trainer: np.ndarray, sampler: np.ndarray, loss_mask: np.ndarray
) -> tuple[float, int]:
    """Mean |trainer - sampler| over loss positions where both are finite; returns (mean, count)."""
    ok = loss_mask & np.isfinite(trainer) & np.isfinite(sampler)
    count = int(ok.sum())
    if count == 0:
        return float("nan"), 0
    return float(np.abs(trainer[ok] - sampler[ok]).mean()), count
