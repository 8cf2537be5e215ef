"""The PPO math of the campaign as pure functions over one token stream (or a batch of them).

Conventions (paper, sections 2 and 5):
- the reward of a trial is the absolute number of passing assertions, a scalar that enters at
  the final response token (the last position of the TITO loss mask); every other position gets 0;
- the actions are the loss-mask positions (sampled ids). Observation and template tokens are
  context: GAE runs over the loss positions only, in stream order, so the value of the next
  *sampled* token bootstraps the current one across an observation, and the value after the
  last sampled token is 0 (the trial is over);
- losses are token means over the loss mask of the whole batch.

No module state, no torch modules: each function is tested on the CPU against hand-computed
numbers (tests/training/test_ppo_math.py); docs/ppo.md has the equations on one screen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def final_token_rewards(loss_mask: torch.Tensor, reward: float) -> torch.Tensor:
    """(n,) float32 rewards: `reward` at the last loss position, 0 elsewhere.

    loss_mask: (n,) bool. Raises ValueError when the mask has no loss position (a trial whose
    model sampled nothing cannot carry a reward).
    """
    if loss_mask.dim() != 1:
        raise ValueError(f"loss_mask must be (n,), got {tuple(loss_mask.shape)}")
    positions = torch.nonzero(loss_mask).flatten()  # (m,)
    if positions.numel() == 0:
        raise ValueError("loss_mask has no loss position to put the reward on")
    rewards = torch.zeros(loss_mask.shape[0], dtype=torch.float32, device=loss_mask.device)
    rewards[positions[-1]] = float(reward)  # (n,)
    return rewards


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over the loss positions of one stream.

    rewards, values: (n,) per stream position; loss_mask: (n,) bool. With p_0 < ... < p_{m-1} the
    loss positions, delta_i = r[p_i] + gamma * V[p_{i+1}] - V[p_i] (V[p_m] = 0) and
    A_i = delta_i + gamma * lam * A_{i+1}. Returns (advantages, returns), each (n,) float32 on
    the device of `values`, 0 off the mask; returns = advantages + values on the mask (the
    critic's target). The recursion runs in float64 on the host (one pass over m loss positions).
    """
    if not (rewards.shape == values.shape == loss_mask.shape) or rewards.dim() != 1:
        raise ValueError(
            f"rewards, values, loss_mask must be equal (n,) shapes, got "
            f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(loss_mask.shape)}"
        )
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must be in [0, 1], got {gamma!r}, {lam!r}")
    device = values.device
    loss_mask = loss_mask.to(device)
    positions = torch.nonzero(loss_mask).flatten()  # (m,)
    r = rewards.to(device)[positions].double().tolist()  # m floats
    v = values.detach()[positions].double().tolist()  # m floats
    adv = [0.0] * len(r)
    running, next_value = 0.0, 0.0
    for i in range(len(r) - 1, -1, -1):
        delta = r[i] + gamma * next_value - v[i]
        running = delta + gamma * lam * running
        adv[i] = running
        next_value = v[i]
    advantages = torch.zeros(rewards.shape[0], dtype=torch.float32, device=device)  # (n,)
    advantages[positions] = torch.tensor(adv, dtype=torch.float32, device=device)
    returns = torch.where(loss_mask, advantages + values.detach().float(), 0.0)  # (n,)
    return advantages, returns


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over True positions of `mask` (same shape); ValueError on an empty mask."""
    if x.shape != mask.shape:
        raise ValueError(f"x {tuple(x.shape)} and mask {tuple(mask.shape)} differ in shape")
    count = mask.sum()
    if int(count) == 0:
        raise ValueError("masked_mean over an empty mask")
    return torch.where(mask, x, 0.0).sum() / count


@dataclass(frozen=True)
class PolicyLoss:
    """The clipped surrogate and what to log about it (floats are detached)."""

    loss: torch.Tensor
    clip_fraction: float
    ratio_mean: float


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
) -> PolicyLoss:
    """PPO's clipped policy loss, a token mean over the TITO loss mask.

    All inputs share one shape ((n,) or (B, n)). ratio = exp(logprobs - old_logprobs);
    loss = mean_mask(max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps))). Positions off the mask
    may hold NaN (the first position has no logprob); they never reach the result or its gradient.
    """
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps!r}")
    if not (logprobs.shape == old_logprobs.shape == advantages.shape == loss_mask.shape):
        raise ValueError("logprobs, old_logprobs, advantages and loss_mask must share one shape")
    log_ratio = torch.where(loss_mask, logprobs - old_logprobs, 0.0)  # (..., n), NaN-free
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    loss = masked_mean(torch.maximum(unclipped, clipped), loss_mask)
    with torch.no_grad():
        clip_fraction = masked_mean((clipped > unclipped).float(), loss_mask)
        ratio_mean = masked_mean(ratio, loss_mask)
    return PolicyLoss(loss=loss, clip_fraction=float(clip_fraction), ratio_mean=float(ratio_mean))


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip: float | None = 0.2,
) -> torch.Tensor:
    """Clipped value loss: 0.5 * mean_mask(max((V - R)^2, (V_old + clip(V - V_old, ±c) - R)^2)).

    All inputs share one shape. `clip=None` gives the plain squared error (a critic whose values
    move far within one update, e.g. while it is being warmed up).
    """
    if not (values.shape == old_values.shape == returns.shape == loss_mask.shape):
        raise ValueError("values, old_values, returns and loss_mask must share one shape")
    if clip is not None and clip <= 0:
        raise ValueError(f"clip must be > 0 or None, got {clip!r}")
    err = (values - returns) ** 2
    if clip is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        err = torch.maximum(err, (clipped - returns) ** 2)
    return 0.5 * masked_mean(err, loss_mask)


def approx_kl(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, loss_mask: torch.Tensor
) -> torch.Tensor:
    """KL(old || new) estimated per token as (r - 1) - log r with r = exp(logp - old_logp)
    (Schulman's k3: unbiased and never negative), a mean over the loss mask."""
    if not (logprobs.shape == old_logprobs.shape == loss_mask.shape):
        raise ValueError("logprobs, old_logprobs and loss_mask must share one shape")
    log_ratio = torch.where(loss_mask, logprobs - old_logprobs, 0.0)  # (..., n)
    return masked_mean(torch.expm1(log_ratio) - log_ratio, loss_mask)


def placebo_rewards(rewards: list[float], seed: int, step: int) -> list[float]:
    """`rewards` permuted among the batch's samples, the permutation fixed by (seed, step).

    The placebo arm: an update with the real one's batch, reward distribution and noise but no
    true gradient (a trial's reward no longer belongs to its tokens)."""
    import numpy as np

    order = np.random.default_rng([seed, step]).permutation(len(rewards))
    return [rewards[i] for i in order]
