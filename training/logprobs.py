"""Trainer-side log-probabilities of a stream, with or without R3 routing replay.

The trainer recomputes the behaviour policy's log-probabilities (the PPO ratio's denominator) in
its own numerics: float32 weights and SDPA attention, one full forward pass over the stream. The
train-inference gap is then |logp_trainer - logp_sampler| at loss positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from training.r3 import FailurePolicy, ReplayStats, fit_record, replay_routing

if TYPE_CHECKING:
    from transformers import PreTrainedModel


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


def stream_logprobs(
    model: PreTrainedModel,
    token_ids: np.ndarray,
    *,
    routing: np.ndarray | None = None,
    policy: FailurePolicy = "live",
    temperature: float = 1.0,
    grad: bool = False,
) -> tuple[torch.Tensor, ReplayStats | None]:
    """Trainer log-probabilities for one stream, optionally replaying `routing` (R3).

    token_ids: (n,) ids; routing: (n, L, k) recorded experts, -1 for missing rows (a short record
    is padded with -1 first). `temperature` must be the sampling temperature: the engine reports
    log_softmax(logits / T), so the trainer scores the same distribution.
    Returns ((n,) logprobs, replay stats or None without R3).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    ids = torch.as_tensor(token_ids, dtype=torch.long)[None, :]  # (1, n)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        if routing is None:
            logits = model(input_ids=ids, use_cache=False).logits[0]  # (n, V)
            return token_logprobs(logits / temperature, ids[0]), None
        record = fit_record(torch.as_tensor(routing, dtype=torch.long), ids.shape[1])
        with replay_routing(model, record, policy=policy) as stats:
            logits = model(input_ids=ids, use_cache=False).logits[0]  # (n, V)
        return token_logprobs(logits / temperature, ids[0]), stats


def batch_logprobs(
    model: PreTrainedModel,
    streams: list[np.ndarray],
    *,
    routings: list[np.ndarray] | None = None,
    policy: FailurePolicy = "live",
    temperature: float = 1.0,
    grad: bool = False,
) -> torch.Tensor:
    """`stream_logprobs` for several streams in one forward pass: right-padded to the longest.

    Right padding needs no attention mask: a causal model never lets a real position see a pad
    to its right, and MoE routing is per token, so each real position's logprob is what its
    stream alone would give (up to floating-point reduction order). Pad rows of the routing
    record name experts 0..k-1 (valid, never used by a real position).
    Returns (B, n_max) float32: NaN at position 0 of each stream and at padding.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    lengths = [len(s) for s in streams]
    batch, width = len(streams), max(lengths)
    ids = torch.zeros((batch, width), dtype=torch.long)  # (B, n_max)
    for i, s in enumerate(streams):
        ids[i, : lengths[i]] = torch.as_tensor(s, dtype=torch.long)
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        if routings is None:
            logits = model(input_ids=ids, use_cache=False).logits  # (B, n_max, V)
        else:
            _, layers, k = np.asarray(routings[0]).shape
            record = torch.arange(k).expand(batch, width, layers, k).clone()  # (B, n_max, L, k)
            for i, r in enumerate(routings):
                record[i, : lengths[i]] = fit_record(
                    torch.as_tensor(r, dtype=torch.long), lengths[i]
                )
            with replay_routing(model, record, policy=policy):
                logits = model(input_ids=ids, use_cache=False).logits  # (B, n_max, V)
        logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # (B, n_max-1, V)
        picked = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, n_max-1)
        out = torch.cat([torch.full((batch, 1), float("nan")), picked], dim=1)  # (B, n_max)
        real = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # (B, n_max)
        return torch.where(real, out, torch.full_like(out, float("nan")))


def mean_abs_gap(
    trainer: np.ndarray, sampler: np.ndarray, loss_mask: np.ndarray
) -> tuple[float, int]:
    """Mean |trainer - sampler| over loss positions where both are finite; returns (mean, count)."""
    ok = loss_mask & np.isfinite(trainer) & np.isfinite(sampler)
    count = int(ok.sum())
    if count == 0:
        return float("nan"), 0
    return float(np.abs(trainer[ok] - sampler[ok]).mean()), count
