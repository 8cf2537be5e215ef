"""The two-batch gradient-noise estimator on synthetic gradients with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from training.gradient_noise import (
    advantages,
    gradient_gram,
    noise_report,
    score_gram,
    two_batch_estimate,
)


def test_two_batch_estimate_recovers_signal_and_trace():
    rng = np.random.default_rng(0)
    n, p = 4000, 50
    true = np.zeros(p)
    true[0] = 1.0  # |G|^2 = 1
    sigma = 2.0  # per-coordinate std: tr(Sigma) = 50 * 4 = 200, B_simple = 200
    g = true + sigma * rng.standard_normal((n, p))
    est = two_batch_estimate(score_gram(g), b_small=1)
    assert est.signal == pytest.approx(1.0, abs=0.35)
    assert est.trace == pytest.approx(200.0, rel=0.05)
    assert 130 < est.b_simple < 300
    assert est.noise_share(12) > 0.9 and est.noise_share(2000) < 0.15
    # a larger small batch estimates the same quantities
    est8 = two_batch_estimate(score_gram(g), b_small=8)
    assert est8.trace == pytest.approx(200.0, rel=0.15)


def test_pure_noise_has_no_signal():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((2000, 30))
    est = two_batch_estimate(score_gram(g), b_small=1)
    assert abs(est.signal) < 0.1 and est.trace == pytest.approx(30, rel=0.1)


def test_advantages_batch_mean_and_leave_one_out():
    r = [1.0, 0.0, 3.0, 1.0]
    assert advantages(r, [0, 0, 1, 1], "batch_mean").tolist() == [-0.25, -1.25, 1.75, -0.25]
    assert advantages(r, [0, 0, 1, 1], "rloo").tolist() == [1.0, -1.0, 2.0, -2.0]
    with pytest.raises(ValueError, match="rloo needs"):
        advantages(r, [0, 1, 1, 1], "rloo")
    with pytest.raises(ValueError, match="unknown baseline"):
        advantages(r, [0, 0, 1, 1], "critic")


def test_placebo_separates_a_real_gradient_from_shuffled_rewards():
    """Scores h_i whose first coordinate predicts the reward: the true |G|^2 stands above the
    placebos'; with rewards unrelated to the scores it does not."""
    rng = np.random.default_rng(2)
    n, p = 400, 20
    h = rng.standard_normal((n, p))
    rewards = (h[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(float)
    groups = np.arange(n) // 2
    real = noise_report(score_gram(h), rewards, groups, baseline="rloo", placebos=50)
    assert real.placebo_rank < 0.05
    lo, hi = real.signal_interval
    assert 0 < lo < real.estimate.signal < hi
    assert real.b_simple_interval[0] < real.estimate.b_simple < real.b_simple_interval[1]
    unrelated = rng.permutation(rewards)
    null = noise_report(score_gram(h), unrelated, groups, baseline="rloo", placebos=50)
    assert null.placebo_rank > 0.05


def test_gradient_gram_is_the_gram_of_weighted_scores():
    rng = np.random.default_rng(3)
    h = rng.standard_normal((6, 4))
    a = rng.standard_normal(6)
    assert np.allclose(gradient_gram(score_gram(h), a), score_gram(a[:, None] * h))


def test_the_jackknife_interval_covers_the_true_signal():
    """Per-task pairs of gradients around a known mean: the 90% interval covers |G|^2 = 1 in
    most of 20 draws (a bootstrap with replacement did not: repeated trajectories count as
    signal)."""
    covered = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        n, p = 200, 10
        g = np.zeros(p)
        g[0] = 1.0
        scores = g + 3.0 * rng.standard_normal((n, p))
        rep = noise_report(score_gram(scores), np.ones(n), np.arange(n) // 2,
                           baseline="none", placebos=0)  # fmt: skip
        lo, hi = rep.signal_interval
        covered += lo <= 1.0 <= hi
    assert covered >= 15
