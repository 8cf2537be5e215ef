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


def mean_abs_gap(
    trainer: np.ndarray, sampler: np.ndarray, loss_mask: np.ndarray
) -> tuple[float, int]:
    """Mean |trainer - sampler| over loss positions where both are finite; returns (mean, count)."""
    ok = loss_mask & np.isfinite(trainer) & np.isfinite(sampler)
    count = int(ok.sum())
    if count == 0:
        return float("nan"), 0
    return float(np.abs(trainer[ok] - sampler[ok]).mean()), count
