"""The PPO math against hand-computed numbers; GAE also against a plain Python loop."""

from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")

from training.ppo_math import (  # noqa: E402 - after the importorskip
    approx_kl,
    final_token_rewards,
    gae,
    masked_mean,
    policy_loss,
    value_loss,
)

pytestmark = pytest.mark.torch

MASK = torch.tensor([False, True, True, False, True, False])  # loss at 1, 2, 4
VALUES = torch.tensor([9.0, 0.5, 1.0, 9.0, 1.5, 9.0])  # the 9s sit off the mask: ignored


def test_reward_enters_at_the_final_response_token():
    r = final_token_rewards(MASK, 2.0)
    assert r.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0, 0.0]
    with pytest.raises(ValueError):
        final_token_rewards(torch.zeros(4, dtype=torch.bool), 1.0)


def test_gae_hand_computed_gamma_lam_one():
    adv, ret = gae(final_token_rewards(MASK, 2.0), VALUES, MASK)
    # deltas (pos 4, 2, 1): 2 - 1.5, 1.5 - 1.0, 1.0 - 0.5 = 0.5 each; A sums them backwards
    assert adv.tolist() == pytest.approx([0.0, 1.5, 1.0, 0.0, 0.5, 0.0])
    assert ret.tolist() == pytest.approx([0.0, 2.0, 2.0, 0.0, 2.0, 0.0])


def test_gae_hand_computed_discounted():
    adv, ret = gae(final_token_rewards(MASK, 2.0), VALUES, MASK, gamma=0.5, lam=0.5)
    # delta_4 = 0.5; delta_2 = 0.5*1.5 - 1 = -0.25; delta_1 = 0.5*1.0 - 0.5 = 0
    # A_4 = 0.5; A_2 = -0.25 + 0.25*0.5 = -0.125; A_1 = 0 + 0.25*(-0.125) = -0.03125
    assert adv.tolist() == pytest.approx([0.0, -0.03125, -0.125, 0.0, 0.5, 0.0])
    assert ret.tolist() == pytest.approx([0.0, 0.46875, 0.875, 0.0, 2.0, 0.0])


def _gae_loop(rewards, values, mask, gamma, lam):
    """Reference: walk the whole stream backwards, skipping context positions by index."""
    n = len(rewards)
    adv = [0.0] * n
    next_adv, next_value = 0.0, 0.0
    for t in reversed(range(n)):
        if not mask[t]:
            continue
        delta = rewards[t] + gamma * next_value - values[t]
        adv[t] = delta + gamma * lam * next_adv
        next_adv, next_value = adv[t], values[t]
    return adv, [adv[t] + values[t] if mask[t] else 0.0 for t in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_a_plain_python_loop(seed):
    rng = random.Random(seed)
    n = 200
    mask = [rng.random() < 0.6 for _ in range(n)]
    mask[-5] = True
    values = [rng.uniform(-2, 2) for _ in range(n)]
    rewards = [rng.uniform(-1, 1) if m else 0.0 for m in mask]  # per-token rewards too
    gamma, lam = rng.uniform(0.8, 1.0), rng.uniform(0.8, 1.0)
    want_adv, want_ret = _gae_loop(rewards, values, mask, gamma, lam)
    adv, ret = gae(
        torch.tensor(rewards), torch.tensor(values), torch.tensor(mask), gamma=gamma, lam=lam
    )
    assert adv.tolist() == pytest.approx(want_adv, abs=1e-5)
    assert ret.tolist() == pytest.approx(want_ret, abs=1e-5)


def test_gae_guards():
    with pytest.raises(ValueError):
        gae(torch.zeros(3), torch.zeros(4), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError):
        gae(torch.zeros(3), torch.zeros(3), torch.ones(3, dtype=torch.bool), gamma=1.5)


def test_policy_loss_hand_computed_and_gradient():
    # ratios 1.5 (clipped at 1.2, A=1), 0.5 (unclipped, A=1), 1.1 (A=-2, both 2.2); a masked
    # position with NaN logprob and a huge advantage must not leak into loss or gradient
    mask = torch.tensor([False, True, True, True])
    logp = torch.tensor([float("nan"), math.log(1.5), math.log(0.5), math.log(1.1)])
    logp.requires_grad_(True)
    old = torch.tensor([float("nan"), 0.0, 0.0, 0.0])
    adv = torch.tensor([1e6, 1.0, 1.0, -2.0])
    out = policy_loss(logp, old, adv, mask, clip_eps=0.2)
    assert float(out.loss.detach()) == pytest.approx((-1.2 - 0.5 + 2.2) / 3)
    assert out.clip_fraction == pytest.approx(1 / 3)
    assert out.ratio_mean == pytest.approx((1.5 + 0.5 + 1.1) / 3)
    out.loss.backward()
    # d/dlogp of -A*r is -A*r (unclipped tokens); the clipped token gets none
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, -0.5 / 3, 2.2 / 3])


def test_policy_loss_at_ratio_one_is_minus_mean_advantage():
    mask = torch.tensor([[True, True], [True, False]])
    logp = torch.zeros(2, 2)
    adv = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    assert float(policy_loss(logp, logp, adv, mask).loss) == pytest.approx(-2.0)


def test_value_loss_hand_computed():
    mask = torch.tensor([True, True, False])
    v = torch.tensor([1.0, 3.0, 50.0])
    old = torch.tensor([0.5, 2.0, 0.0])
    ret = torch.tensor([2.0, 2.0, 0.0])
    # token 0: max((1-2)^2, (0.7-2)^2) = 1.69; token 1: max(1, (2.2-2)^2) = 1
    assert float(value_loss(v, old, ret, mask, clip=0.2)) == pytest.approx(0.5 * (1.69 + 1) / 2)
    assert float(value_loss(v, old, ret, mask, clip=None)) == pytest.approx(0.5)


def test_approx_kl_hand_computed():
    mask = torch.tensor([True, True, False])
    logp = torch.tensor([math.log(2.0), 0.0, float("nan")])
    old = torch.zeros(3)
    assert float(approx_kl(logp, old, mask)) == pytest.approx((1 - math.log(2)) / 2)
    assert float(approx_kl(old, old, mask)) == 0.0


def test_masked_mean_rejects_an_empty_mask():
    with pytest.raises(ValueError):
        masked_mean(torch.ones(3), torch.zeros(3, dtype=torch.bool))
