"""The megatron-core trainer backend: HF <-> megatron weight conversion (round trip exact), the
same logits as the HF model on the same weights (megatron's local spec with SDPA attention runs
on the CPU), R3 through megatron's RouterReplay per model, and a PPO actor + critic step of the
campaign with `trainer_backend = "megatron"`. Tests that need CUDA skip with the reason."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402

pytestmark = pytest.mark.torch

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device (bf16 megatron kernels, recompute)"
)


@pytest.fixture(scope="module")
def hf_model(tiny_config):
    pytest.importorskip("megatron.core")
    from training.policy import build_policy

    m = build_policy(tiny_config)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("gate.weight"):
                p.normal_(0, 0.5)  # routers that route
    m.eval()
    return m


@pytest.fixture(scope="module")
def mega(hf_model):
    from training.megatron_policy import megatron_policy_from_hf

    m = megatron_policy_from_hf(hf_model, device=torch.device("cpu"))
    m.eval()
    return m


def test_weight_conversion_round_trip_is_exact(hf_model):
    from training.megatron_policy import hf_to_megatron, megatron_to_hf

    state = {k: v.clone() for k, v in hf_model.state_dict().items()}
    mc = hf_to_megatron(state, hf_model.config)
    qkv = mc["decoder.layers.0.self_attention.linear_qkv.weight"]
    heads, groups = hf_model.config.num_attention_heads, hf_model.config.num_key_value_heads
    d = hf_model.config.hidden_size // heads
    # megatron groups the rows per query group: q of its heads, then k, then v
    per = heads // groups
    assert torch.equal(
        qkv[per * d : per * d + d], state["model.layers.0.self_attn.k_proj.weight"][:d]
    )
    back = megatron_to_hf(mc, hf_model.config)
    assert back.keys() == state.keys()
    assert all(torch.equal(back[k], state[k]) for k in state)


def test_megatron_logits_equal_the_hf_models(hf_model, mega):
    """Parity of the whole forward (GQA, qk-norm, rope, SwiGLU experts, routing, tied head) on
    the CPU in float32; the trainer's logprobs through either backend agree too."""
    from training.logprobs import batch_logprobs

    ids = torch.randint(0, 1024, (2, 29), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = hf_model(input_ids=ids, use_cache=False).logits
        b = mega(input_ids=ids).logits
    assert torch.allclose(a, b, atol=1e-5), float((a - b).abs().max())
    streams = [ids[0].numpy(), ids[1, :20].numpy()]
    la, lb = batch_logprobs(hf_model, streams), batch_logprobs(mega, streams)
    assert np.allclose(la.numpy(), lb.numpy(), atol=1e-5, equal_nan=True)


def test_r3_through_megatrons_router_replay(hf_model, mega):
    """The HF model's captured routing replayed in the megatron model reproduces its logprobs;
    a perturbed record changes them; gradient reaches only the recorded experts."""
    from training.logprobs import batch_logprobs
    from training.r3 import capture_routing

    ids = torch.randint(0, 1024, (1, 25), generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), capture_routing(hf_model) as cap:
        hf_model(input_ids=ids, use_cache=False)
    record = cap.rows().numpy()  # (25, L, k)
    live = batch_logprobs(mega, [ids[0].numpy()])
    same = batch_logprobs(mega, [ids[0].numpy()], routings=[record])
    assert torch.equal(torch.nan_to_num(live), torch.nan_to_num(same))
    moved = record.copy()
    moved[:, :, 0] = (moved[:, :, 1] + 1) % 8
    other = batch_logprobs(mega, [ids[0].numpy()], routings=[moved])
    assert float(torch.nan_to_num(other - live).abs().max()) > 1e-4
    # only experts {0, 1} recorded: the others get no gradient
    pinned = np.zeros_like(record)
    pinned[:, :, 1] = 1
    mega.zero_grad(set_to_none=True)
    mega.train()
    loss = torch.nansum(batch_logprobs(mega, [ids[0].numpy()], routings=[pinned], grad=True))
    loss.backward()
    mega.eval()
    experts = [
        n
        for n, p in mega.named_parameters()
        if "local_experts" in n and p.grad is not None and float(p.grad.abs().sum()) > 0
    ]
    assert experts and all(".local_experts.0." in n or ".local_experts.1." in n for n in experts)
    assert mega.replay_instances()[0].router_replay_action is None  # the scope closed


def test_a_ppo_step_with_the_megatron_backend(random_checkpoint, tmp_path, tokenizer):
    """The campaign's train_step with trainer_backend = megatron and precision bf16: actor and
    critic are megatron models in bf16 (Float16Module) with float32 masters in the optimizer,
    scored through the same logprobs / ppo_math, R3 through their own RouterReplay; the step
    trains both, publishes an HF checkpoint the engine can load, and the behaviour copy is a
    rebuilt megatron model."""
    pytest.importorskip("megatron.core")
    from tests.training.synthetic import Continue, Env, Finish, batch_of, campaign, play
    from training.campaign import (
        assemble,
        load_trainer_critic,
        load_trainer_policy,
        publish_weights,
        train_step,
    )
    from training.policy import load_policy

    c = campaign(
        random_checkpoint, tmp_path, tokenizer, trainer_backend="megatron", r3=True,
        async_rollouts=True, lr=1e-3, critic_lr=1e-3, device="cpu", precision="bf16",
    )  # fmt: skip
    c.actor = load_trainer_policy(c.cfg, random_checkpoint, c.trainer)
    c.critic = load_trainer_critic(c.cfg, random_checkpoint, c.trainer)
    from training.numerics import MasterWeightAdamW, optimizer_for

    c.actor_opt = optimizer_for(c.actor.parameters(), lr=1e-3, weight_decay=0.0)
    c.critic_opt = optimizer_for(c.critic.parameters(), lr=1e-3, weight_decay=0.0)
    assert isinstance(c.actor_opt, MasterWeightAdamW)
    assert next(c.actor.parameters()).dtype == torch.bfloat16

    def react(outs):
        return Continue([201]) if len(outs) < 2 else Finish(int(outs[-1][-1] % 2 == 0), 1)

    env = Env(prompt=[5, 17, 42, 99], tokens_per_turn=3, max_turns=2, react=react)
    samples = assemble(c, batch_of(play(c.actor, env, 4, torch.Generator().manual_seed(0))))
    for i, s in enumerate(samples):
        s.reward = float(i % 2)
    before = c.actor.hf_state_dict()
    metrics = train_step(c, samples)
    assert metrics["train/actor_updated"] == 1.0 and np.isfinite(metrics["losses/value"])
    after = c.actor.hf_state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert type(c.behavior).__name__ == "MegatronPolicy"
    masters = c.actor_opt.masters
    assert all(m.dtype == torch.float32 for m in masters)
    assert all(
        torch.equal(m.bfloat16(), p) for m, p in zip(masters, c.actor_opt.params, strict=True)
    )
    assert torch.equal(c.behavior.hf_state_dict()["lm_head.weight"], before["lm_head.weight"])

    class Client:  # the engine boundary: records the publish
        calls: list[str] = []

        def pause_generation(self, mode):
            self.calls.append(f"pause:{mode}")

        def update_weights_from_disk(self, path, weight_version):
            self.calls.append(f"update:{weight_version}")
            self.path = path

        def continue_generation(self):
            self.calls.append("continue")

    c.client = Client()  # type: ignore[assignment]
    publish_weights(c)
    from pathlib import Path

    published = load_policy(Path(c.client.path)).state_dict()
    assert all(torch.equal(published[k], after[k]) for k in after)


@needs_cuda
def test_bf16_megatron_forward_on_cuda(hf_model):
    """megatron's bf16 route (Float16Module) on a GPU against the float32 HF model."""
    from training.megatron_policy import megatron_policy_from_hf

    dev = torch.device("cuda")
    m = megatron_policy_from_hf(hf_model, device=dev, bf16=True)
    ids = torch.randint(0, 1024, (1, 32), device=dev)
    with torch.no_grad():
        ref = hf_model.to(dev)(input_ids=ids, use_cache=False).logits
        got = m(input_ids=ids).logits.float()
    hf_model.to("cpu")
    assert float((ref - got).abs().max()) < 0.1
