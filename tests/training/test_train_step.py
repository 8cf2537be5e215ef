"""`train_step` under the trainer's numerics settings, on synthetic episodes (no engine, no
sandbox): the whole step on `device = "cpu"` with bf16 autocast, gradient checkpointing, chunked
log-probabilities and no behaviour copy; R3 kept through the recompute of gradient
checkpointing; the behaviour copy made optional; and GAE's gamma and lambda reaching the
campaign's advantages (a campaign that ignored cfg.gamma / cfg.lam passed every earlier test)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tests.training.synthetic import Continue, Env, Finish, batch_of, campaign, play  # noqa: E402
from training.campaign import assemble, behavior_logprobs, compute_advantages, train_step  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = [5, 17, 42, 99, 7, 300, 12, 64]


def _env() -> Env:
    """Two turns of 3 sampled tokens, an observation between them; the verdict depends on the
    last sampled id, so rewards differ within a batch."""

    def react(outs: list[list[int]]):
        if len(outs) < 2:
            return Continue([201, 202])
        return Finish(int(outs[-1][-1] % 2 == 0), 1)

    return Env(prompt=PROMPT, tokens_per_turn=3, max_turns=2, react=react)


def _samples(c, episodes: int = 6, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return assemble(c, batch_of(play(c.actor, _env(), episodes, gen)))


def _experts(model) -> list[torch.Tensor]:
    return [layer.mlp.experts.gate_up_proj.detach().clone() for layer in model.model.layers]


def test_a_whole_train_step_runs_on_the_cpu_under_the_new_code_path(
    random_checkpoint, tmp_path, tokenizer
):
    """device = cpu with every new setting on: bf16 autocast over float32 master weights,
    gradient checkpointing, chunked log-softmax (3 positions a chunk), no behaviour copy, a KL
    reference in bf16. The step trains (actor and critic move), keeps float32 masters and holds
    no behaviour copy."""
    c = campaign(
        random_checkpoint, tmp_path, tokenizer, device="cpu", precision="bf16",
        gradient_checkpointing=True, logprob_chunk_tokens=3, behavior_copy=False,
        async_rollouts=True, kl_coef=0.1, r3=True, lr=1e-3, critic_lr=1e-3,
    )  # fmt: skip
    from training.campaign import load_frozen_policy, load_trainer_critic, load_trainer_policy

    c.actor = load_trainer_policy(c.cfg, random_checkpoint, c.trainer)
    c.critic = load_trainer_critic(c.cfg, random_checkpoint, c.trainer)
    c.reference = load_frozen_policy(c.cfg, random_checkpoint, c.trainer)
    c.actor_opt = torch.optim.AdamW(c.actor.parameters(), lr=1e-3, weight_decay=0.0)
    c.critic_opt = torch.optim.AdamW(c.critic.parameters(), lr=1e-3, weight_decay=0.0)
    assert c.trainer.device.type == "cpu" and c.trainer.precision == "bf16"
    assert c.actor.is_gradient_checkpointing and c.critic.backbone.is_gradient_checkpointing
    assert next(c.reference.parameters()).dtype == torch.bfloat16
    samples = _samples(c)
    for i, s in enumerate(samples):
        s.reward = float(i % 2)  # rewards that differ: something to learn
    before = {k: v.clone() for k, v in c.actor.state_dict().items()}
    head = c.critic.value_head.weight.detach().clone()
    metrics = train_step(c, samples)
    assert metrics["train/actor_updated"] == 1.0
    for key in ("losses/policy", "losses/value", "train/kl", "train/kl_ref"):
        assert math.isfinite(metrics[key]), key
    assert any(not torch.equal(v, c.actor.state_dict()[k]) for k, v in before.items())
    assert not torch.equal(head, c.critic.value_head.weight)
    assert all(p.dtype == torch.float32 for p in c.actor.parameters())
    assert c.behavior is None
    assert all(s.old_logprobs.device.type == "cpu" for s in samples)


def test_r3_replays_through_the_recompute_of_gradient_checkpointing(
    random_checkpoint, tmp_path, tokenizer
):
    """Regression guard: the replay hooks removed before the backward pass. With gradient
    checkpointing each layer's forward runs again during backward; it must replay the record
    too. Every record names experts {0, 1}: only those experts may move."""
    c = campaign(
        random_checkpoint, tmp_path, tokenizer, gradient_checkpointing=True, r3=True,
        lr=1e-3, critic_lr=1e-3,
    )  # fmt: skip
    c.actor.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    samples = _samples(c)
    for i, s in enumerate(samples):
        s.reward = float(i % 2)
        s.sample.routed_experts = np.zeros((len(s.sample), 2, 2), dtype=np.int32)
        s.sample.routed_experts[:, :, 1] = 1
    before = _experts(c.actor)
    train_step(c, samples)
    for b, a in zip(before, _experts(c.actor), strict=True):
        assert not torch.equal(b[:2], a[:2])
        assert torch.equal(b[2:], a[2:]), "an expert outside the record moved"


def test_without_the_behaviour_copy_stale_tokens_take_the_pre_update_actor(
    random_checkpoint, tmp_path, tokenizer
):
    """behavior_copy = False: no previous version is held after an async update, and a token
    sampled one version back is scored by the current (pre-update) actor. (With the copy, the
    default, it is scored by the held version: test_publish_and_behaviour.py.)"""
    from training.campaign import _logprobs

    c = campaign(
        random_checkpoint, tmp_path, tokenizer, async_rollouts=True, behavior_copy=False,
        lr=1e-2, critic_lr=1e-3,
    )  # fmt: skip
    train_step(c, _samples(c, seed=1))
    c.weight_version = 1
    assert c.behavior is None
    samples = _samples(c, seed=2)
    for s in samples:
        s.versions[s.versions >= 0] = 0  # sampled one version back
    olds = behavior_logprobs(c, samples)
    current = _logprobs(c, c.actor, samples, grad=False)
    for i, (s, old) in enumerate(zip(samples, olds, strict=True)):
        m = torch.as_tensor(s.loss_mask)
        assert torch.allclose(old[m], current[i, : len(s.sample)][m], atol=1e-6)


def test_gamma_and_lambda_reach_the_campaigns_advantages(random_checkpoint, tmp_path, tokenizer):
    """Regression guard: a campaign that ignored cfg.gamma and cfg.lam passed every test (all
    ran at 1). With gamma = 0.9, lam = 0.8 each sample's advantages must be GAE over its loss
    positions with those values (a plain loop here, from the pre-update values), which differ
    from the gamma = lam = 1 advantages of the same values; its returns (the critic's target)
    must be those advantages plus the values."""
    from training.ppo_math import final_token_rewards, gae

    gamma, lam = 0.9, 0.8
    c = campaign(random_checkpoint, tmp_path, tokenizer, gamma=gamma, lam=lam)
    torch.manual_seed(0)
    with torch.no_grad():  # a critic whose values differ by position
        c.critic.value_head.weight.normal_(0, 0.5)
        c.critic.value_head.bias.fill_(0.3)
    samples = _samples(c)
    compute_advantages(c, samples)
    for s in samples:
        pos = torch.nonzero(s.loss_mask).flatten().tolist()
        v = s.values[pos].double().tolist()
        r = [0.0] * len(pos)
        r[-1] = s.reward
        adv, running = [0.0] * len(pos), 0.0
        for i in reversed(range(len(pos))):
            nxt = v[i + 1] if i + 1 < len(pos) else 0.0
            running = r[i] + gamma * nxt - v[i] + gamma * lam * running
            adv[i] = running
        assert np.allclose(s.advantages[pos].numpy(), adv, atol=1e-5)
        assert np.allclose(s.returns[pos].numpy(), np.add(adv, v), atol=1e-5)
        at_one, _ = gae(final_token_rewards(s.loss_mask, s.reward), s.values, s.loss_mask)
        assert not torch.allclose(s.advantages[pos], at_one[pos], atol=1e-3)
