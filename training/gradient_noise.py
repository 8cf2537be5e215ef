"""The gradient noise scale of the policy gradient (McCandlish et al. 2018, appendix A).

The policy gradient of a batch of B trajectories is the mean of per-trajectory terms
g_i = A_i * h_i, where h_i = grad sum_t log pi(a_t) is trajectory i's score (summed over its
sampled tokens) and A_i its advantage (at ratio 1 the clipped surrogate's gradient is exactly
this, up to the batch's token count, a constant). Its expected squared norm is
E|G_B|^2 = |G|^2 + tr(Sigma) / B, so two batch sizes give both unknowns (the two-batch
estimator):

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
    B_simple  = tr(Sigma) / |G|^2

B_simple is the batch size at which the update's noise equals its signal: at B << B_simple a
step is mostly noise. Everything here works on the Gram matrix H_ij = h_i . h_j of the
scores (N x N, computed once from the model): an advantage vector turns it into the Gram
matrix of the g_i (A_i A_j H_ij), so a baseline, a binary reward or a placebo (rewards
shuffled within the batch) costs no further backward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Baseline = str
"""'batch_mean' (A_i = r_i - mean r), 'rloo' (r_i - mean of the other samples of its task) or
'none' (A_i = r_i)."""


def advantages(
    rewards: Sequence[float] | np.ndarray, groups: Sequence[int] | np.ndarray, baseline: Baseline
) -> np.ndarray:
    """(N,) advantages of trajectories with `rewards`; `groups[i]` is trajectory i's task.

    'batch_mean' subtracts the batch's mean reward (what whitening does; the critic measured
    no better, docs/ppo.md). 'rloo' subtracts the mean reward of the other samples of the same
    task (leave one out; every task needs at least two samples)."""
    r = np.asarray(rewards, dtype=np.float64)
    g = np.asarray(groups)
    if r.shape != g.shape or r.ndim != 1:
        raise ValueError(f"rewards and groups must be equal 1-d shapes: {r.shape}, {g.shape}")
    if baseline == "none":
        return r
    if baseline == "batch_mean":
        return r - r.mean()
    if baseline == "rloo":
        out = np.empty_like(r)
        for task in np.unique(g):
            idx = np.flatnonzero(g == task)
            if len(idx) < 2:
                raise ValueError(f"rloo needs >= 2 samples per task; task {task} has {len(idx)}")
            out[idx] = r[idx] - (r[idx].sum() - r[idx]) / (len(idx) - 1)
        return out
    raise ValueError(f"unknown baseline {baseline!r}")


@dataclass(frozen=True)
class NoiseScale:
    """One two-batch estimate."""

    n: int
    """Trajectories (B_big)."""
    b_small: int
    g_small_sq: float
    """Mean |G_B|^2 over the disjoint small batches."""
    g_big_sq: float
    """|G_B|^2 of all n trajectories."""
    signal: float
    """|G|^2 estimate (can come out <= 0 when the signal is below the noise of the estimate)."""
    trace: float
    """tr(Sigma) estimate: the per-trajectory gradient variance."""

    @property
    def b_simple(self) -> float:
        """tr(Sigma) / |G|^2; infinite when the signal estimate is not positive."""
        return self.trace / self.signal if self.signal > 0 else float("inf")

    def noise_share(self, batch: int) -> float:
        """Share of E|G_B|^2 that is noise at batch size `batch`: (S/B) / (|G|^2 + S/B)."""
        noise = self.trace / batch
        total = max(self.signal, 0.0) + noise
        return noise / total if total > 0 else float("nan")


def _mean_sq(gram: np.ndarray, idx: np.ndarray) -> float:
    """|mean_{i in idx} g_i|^2 from the Gram matrix of the g_i."""
    return float(gram[np.ix_(idx, idx)].sum()) / len(idx) ** 2


def two_batch_estimate(
    gram: np.ndarray, b_small: int, order: np.ndarray | None = None
) -> NoiseScale:
    """The two-batch estimate from the (N, N) Gram matrix of per-trajectory gradients g_i:
    B_big = N, |G_small|^2 averaged over the N // b_small disjoint batches of `b_small`
    consecutive trajectories of `order` (default 0..N-1)."""
    n = gram.shape[0]
    if gram.shape != (n, n):
        raise ValueError(f"gram must be square, got {gram.shape}")
    if not 1 <= b_small < n:
        raise ValueError(f"need 1 <= b_small < N = {n}, got {b_small}")
    idx = np.arange(n) if order is None else np.asarray(order)
    chunks = [idx[i : i + b_small] for i in range(0, n - b_small + 1, b_small)]
    small = float(np.mean([_mean_sq(gram, c) for c in chunks]))
    big = _mean_sq(gram, idx)
    signal = (n * big - b_small * small) / (n - b_small)
    trace = (small - big) / (1.0 / b_small - 1.0 / n)
    return NoiseScale(n, b_small, small, big, signal, trace)


def score_gram(scores: np.ndarray) -> np.ndarray:
    """(N, N) Gram matrix H_ij = h_i . h_j of (N, P) per-trajectory scores, in float64."""
    s = np.asarray(scores, dtype=np.float64)
    return s @ s.T


def gradient_gram(h: np.ndarray, adv: np.ndarray) -> np.ndarray:
    """Gram matrix of g_i = A_i h_i from the score Gram H: A_i A_j H_ij."""
    a = np.asarray(adv, dtype=np.float64)
    return h * np.outer(a, a)


@dataclass(frozen=True)
class NoiseReport:
    """A point estimate, jackknife intervals of |G|^2 and B_simple, and placebo estimates."""

    estimate: NoiseScale
    signal_interval: tuple[float, float]
    """|G|^2 +- z jackknife standard errors (tasks left out one at a time)."""
    b_simple_interval: tuple[float, float]
    """tr(Sigma) over the ends of the signal interval (inf where that end is <= 0)."""
    placebo_signals: tuple[float, ...]
    """|G|^2 estimates with the rewards shuffled within the batch (no true gradient)."""

    @property
    def placebo_rank(self) -> float:
        """Share of placebo signals at or above the true one (a permutation p-value)."""
        if not self.placebo_signals:
            return float("nan")
        above = sum(p >= self.estimate.signal for p in self.placebo_signals)
        return (above + 1) / (len(self.placebo_signals) + 1)


def noise_report(
    h: np.ndarray,
    rewards: Sequence[float] | np.ndarray,
    groups: Sequence[int] | np.ndarray,
    *,
    baseline: Baseline,
    b_small: int = 1,
    placebos: int = 100,
    seed: int = 0,
    z: float = 1.645,
) -> NoiseReport:
    """The estimate on the score Gram `h` with `rewards`, a grouped-jackknife interval (each
    task left out in turn, so 'rloo' keeps its groups) and placebo estimates (rewards permuted
    across the batch, then the same baseline).

    Not a bootstrap: resampling with replacement repeats trajectories, and a repeated pair
    g_i . g_i counts as signal in the two-batch estimate (|G|^2 comes out several times too
    high, measured); leaving tasks out never repeats one."""
    rng = np.random.default_rng(seed)
    g = np.asarray(groups)
    r = np.asarray(rewards, dtype=np.float64)
    est = two_batch_estimate(gradient_gram(h, advantages(r, g, baseline)), b_small)
    tasks = np.unique(g)
    leave_out = []
    for t in tasks if len(tasks) > 2 else ():
        idx = np.flatnonzero(g != t)
        if len(idx) <= b_small:
            continue
        a = advantages(r[idx], g[idx], baseline)
        leave_out.append(two_batch_estimate(gradient_gram(h[np.ix_(idx, idx)], a), b_small).signal)
    if leave_out:
        k = len(leave_out)
        se = float(np.sqrt((k - 1) / k * np.sum((np.asarray(leave_out) - np.mean(leave_out)) ** 2)))
        lo, hi = est.signal - z * se, est.signal + z * se
        scale = (
            est.trace / hi if hi > 0 else float("inf"),
            est.trace / lo if lo > 0 else float("inf"),
        )
    else:
        lo = hi = float("nan")
        scale = (float("nan"), float("nan"))
    placebo = []
    for _ in range(placebos):
        a = advantages(rng.permutation(r), g, baseline)
        placebo.append(two_batch_estimate(gradient_gram(h, a), b_small).signal)
    return NoiseReport(est, (lo, hi), scale, tuple(placebo))
