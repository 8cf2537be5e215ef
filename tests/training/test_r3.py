"""R3: hand-computed replay weights, replayed choices equal the record, gradients reach the
router and only the recorded experts, the failure policy, and megatron-core's RouterReplay."""

from __future__ import annotations

import math

import pytest
import torch

from training.r3 import (
    RoutingRecordError,
    capture_routing,
    fit_record,
    live_topk,
    record_bytes_per_token_per_layer,
    replay_routing,
    replay_topk,
)

pytestmark = pytest.mark.torch


def test_replay_weights_by_hand():
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.0]])
    w, idx = replay_topk(logits, torch.tensor([[0, 3]]), norm_topk=True, policy="error")
    e = math.e
    assert idx.tolist() == [[0, 3]]  # the record, not the live top-2 (experts 2 and 1)
    assert w[0].tolist() == pytest.approx([e / (e + 1), 1 / (e + 1)])
    w2, _ = replay_topk(logits, torch.tensor([[0, 3]]), norm_topk=False, policy="error")
    z = e + e**2 + e**3 + 1
    assert w2[0].tolist() == pytest.approx([e / z, 1 / z])
    lw, li = live_topk(logits, 2, norm_topk=True)
    assert li.tolist() == [[2, 1]] and lw[0].tolist() == pytest.approx([e / (e + 1), 1 / (e + 1)])


def test_replay_policy_on_missing_rows():
    logits = torch.tensor([[0.0, 5.0, 1.0, 4.0], [1.0, 0.0, 0.0, 0.0]])
    rec = torch.tensor([[2, 0], [-1, -1]])
    with pytest.raises(RoutingRecordError, match="policy is 'error'"):
        replay_topk(logits, rec, norm_topk=True, policy="error")
    _, idx = replay_topk(logits, rec, norm_topk=True, policy="live")
    assert idx[0].tolist() == [2, 0]
    assert set(idx[1].tolist()) == {0, int(idx[1, 1])} and idx[1, 0] == 0
    with pytest.raises(RoutingRecordError, match="expert >= 4"):
        replay_topk(logits, torch.tensor([[7, 0], [0, 1]]), norm_topk=True, policy="live")


@pytest.fixture(scope="module")
def model(tiny_config):
    from training.policy import build_policy

    m = build_policy(tiny_config)
    m.train()
    return m


def _experts_seen(model):
    """Hook every experts module; collect the (indices, weights) it is called with."""
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    seen: list[torch.Tensor] = []
    handles = [
        m.register_forward_pre_hook(lambda _m, args: seen.append(args[1].detach().clone()))
        for m in model.modules()
        if isinstance(m, Qwen3MoeExperts)
    ]
    return seen, handles


def _random_record(n, layers, k, experts, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(layers)])
            for _ in range(n)
        ]
    )  # (n, L, k)


def test_replayed_choices_equal_the_record(model, tiny_config):
    ids = torch.randint(0, tiny_config.vocab_size, (1, 12))
    with capture_routing(model) as cap, torch.no_grad():
        model(input_ids=ids)
    live = cap.rows()  # (12, L, k)
    assert live.shape == (12, tiny_config.num_hidden_layers, tiny_config.num_experts_per_tok)
    record = _random_record(12, tiny_config.num_hidden_layers, 2, tiny_config.num_experts)
    assert not torch.equal(record.to(torch.int32), live)
    seen, handles = _experts_seen(model)
    try:
        with replay_routing(model, record, policy="error") as stats, torch.no_grad():
            model(input_ids=ids)
    finally:
        for h in handles:
            h.remove()
    assert stats.replayed == 12 and stats.live_fallback == 0
    for layer, used in enumerate(seen):
        assert torch.equal(used, record[:, layer, :])
    # the same record replayed twice gives the same logits (selection is fully determined)
    with replay_routing(model, record), torch.no_grad():
        a = model(input_ids=ids).logits
    with replay_routing(model, record), torch.no_grad():
        b = model(input_ids=ids).logits
    assert torch.equal(a, b)


def test_gradients_reach_the_router_and_only_recorded_experts(model, tiny_config):
    n = 6
    ids = torch.randint(0, tiny_config.vocab_size, (1, n))
    # every position uses experts {1, 4} in layer 0 and {0, 6} in layer 1
    record = torch.tensor([[[1, 4], [0, 6]]] * n)
    model.zero_grad(set_to_none=True)
    with replay_routing(model, record, policy="error"):
        out = model(input_ids=ids).logits
    out.float().pow(2).mean().backward()
    blocks = [layer.mlp for layer in model.model.layers]
    for layer, block in enumerate(blocks):
        used = set(record[0, layer].tolist())
        router_grad = block.gate.weight.grad  # (E, hidden)
        expert_grad = block.experts.gate_up_proj.grad  # (E, 2I, hidden)
        assert router_grad is not None and expert_grad is not None
        for e in range(tiny_config.num_experts):
            touched_router = bool(router_grad[e].abs().sum() > 0)
            touched_expert = bool(expert_grad[e].abs().sum() > 0)
            assert touched_router == (e in used), (layer, e)
            assert touched_expert == (e in used), (layer, e)


def test_failure_policy_for_the_final_position(model, tiny_config):
    n = 9
    ids = torch.randint(0, tiny_config.vocab_size, (1, n))
    with capture_routing(model) as cap, torch.no_grad():
        model(input_ids=ids[:, :-1])  # the engine never feeds the last sampled token
    short = cap.rows()  # (n-1, L, k)
    record = fit_record(short, n)
    assert (record[-1] == -1).all()
    with pytest.raises(RoutingRecordError, match="policy is 'error'"), torch.no_grad():
        with replay_routing(model, record, policy="error"):
            model(input_ids=ids)
    with replay_routing(model, record, policy="live") as stats, torch.no_grad():
        replayed = model(input_ids=ids).logits
    assert stats.live_fallback == 1 and stats.replayed == n - 1
    with torch.no_grad():
        plain = model(input_ids=ids).logits
    # fp32, same numerics: replaying our own record reproduces the live forward exactly enough
    assert torch.allclose(replayed, plain, atol=1e-5)
    with pytest.raises(RoutingRecordError, match="rows for a stream"):
        fit_record(short, n - 3)
    with pytest.raises(RoutingRecordError, match="forward has"), torch.no_grad():
        with replay_routing(model, record[:-2], policy="live"):
            model(input_ids=ids)
    with pytest.raises(RoutingRecordError, match="layers"):
        with replay_routing(model, record[:, :1], policy="live"):
            pass


def test_record_cost():
    assert record_bytes_per_token_per_layer(2) == 8
    assert record_bytes_per_token_per_layer(8, torch.uint8) == 8


def test_megatron_router_replay_adapter():
    pytest.importorskip("megatron.core")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function
        from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    from training.r3_megatron import load_replay, megatron_to_records, records_to_megatron

    b, n, layers, k, experts = 2, 5, 2, 2, 8
    record = _random_record(b * n, layers, k, experts, seed=4).reshape(b, n, layers, k)
    per_layer = records_to_megatron(record)
    assert len(per_layer) == layers and per_layer[0].shape == (n * b, k)
    # megatron orders tokens sequence-major: token (s, b) is row s * B + b
    assert torch.equal(per_layer[1][3 * b + 1], record[1, 3, 1])
    assert torch.equal(megatron_to_records(per_layer, batch=b), record.to(torch.int32))

    RouterReplay.clear_global_router_replay_instances()
    try:
        instances = [RouterReplay() for _ in range(layers)]
        holed = record.clone()
        holed[0, -1] = -1  # the final position of sequence 0 was never fed to the engine
        logits = torch.randn(n * b, experts, requires_grad=True)
        load_replay(holed, policy="live")
        probs, routing_map = topk_routing_with_score_function(
            logits, k, use_pre_softmax=False, router_replay=instances[0]
        )
        target = records_to_megatron(holed)[0]
        for row in range(n * b):
            chosen = set(routing_map[row].nonzero().flatten().tolist())
            if (target[row] >= 0).all():
                assert chosen == set(target[row].tolist())
                sel = logits[row, target[row]]
                assert probs[row, target[row]].tolist() == pytest.approx(
                    torch.softmax(sel, -1).tolist(), rel=1e-5
                )
            else:
                assert chosen == set(torch.topk(logits[row], k).indices.tolist())
        probs.sum().backward()
        assert logits.grad is not None and logits.grad.abs().sum() > 0
        load_replay(holed, policy="error")
        with pytest.raises(RoutingRecordError, match="policy 'error'"):
            topk_routing_with_score_function(
                logits, k, use_pre_softmax=False, router_replay=instances[0]
            )
        with pytest.raises(RoutingRecordError, match="RouterReplay"):
            load_replay(record[:, :, :1])
    finally:
        RouterReplay.set_global_router_replay_action(RouterReplayAction.RECORD)
        RouterReplay.clear_global_router_replay_instances()


def test_megatron_replay_records_are_cleared_every_step():
    """Regression: load_replay never cleared megatron's per-layer replay lists, which
    `set_target_indices` appends to and activation recompute (REPLAY_BACKWARD) pops from the
    front; after 3 steps a recompute replayed step 1's routing. Over 3 steps each layer must
    hold exactly the current step's record, and recompute must replay it."""
    pytest.importorskip("megatron.core")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function
        from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    from training.r3_megatron import clear_replay, load_replay, records_to_megatron

    b, n, layers, k, experts = 1, 6, 2, 2, 8
    RouterReplay.clear_global_router_replay_instances()
    try:
        instances = [RouterReplay() for _ in range(layers)]
        for step in range(3):
            record = _random_record(n, layers, k, experts, seed=10 + step).reshape(b, n, layers, k)
            load_replay(record, policy="error")
            want = records_to_megatron(record)
            for layer, inst in enumerate(instances):
                assert len(inst.replay_backward_list) == 1, (step, layer)
                assert torch.equal(inst.target_topk_idx, want[layer])
            RouterReplay.set_global_router_replay_action(RouterReplayAction.REPLAY_BACKWARD)
            logits = torch.randn(n * b, experts)
            _, routing_map = topk_routing_with_score_function(
                logits, k, use_pre_softmax=False, router_replay=instances[0]
            )
            for row in range(n * b):
                chosen = set(routing_map[row].nonzero().flatten().tolist())
                assert chosen == set(want[0][row].tolist()), (step, row)
        clear_replay()
        assert all(i.target_topk_idx is None and not i.replay_backward_list for i in instances)
        assert all(i.router_replay_action is None for i in instances)
    finally:
        RouterReplay.set_global_router_replay_action(RouterReplayAction.RECORD)
        RouterReplay.clear_global_router_replay_instances()


def test_batched_logprobs_equal_each_stream_alone(model, tiny_config):
    """The trainer's micro-batches right-pad streams into one forward: every real position
    must get what its stream alone gets (with R3 replay of its own record)."""
    import numpy as np

    from training.logprobs import batch_logprobs, stream_logprobs

    g = torch.Generator().manual_seed(7)
    lengths = [5, 11, 8]
    streams = [torch.randint(0, tiny_config.vocab_size, (n,), generator=g).numpy() for n in lengths]
    records = [
        _random_record(n - 1, tiny_config.num_hidden_layers, 2, tiny_config.num_experts, seed=n)
        .numpy()
        .astype(np.int32)
        for n in lengths
    ]  # one row short, as the engine returns them: the last position replays live
    batched = batch_logprobs(model, streams, routings=records, temperature=0.7)
    assert batched.shape == (3, 11)
    for i, (s, r) in enumerate(zip(streams, records, strict=True)):
        alone, _ = stream_logprobs(model, s, routing=r, temperature=0.7)
        n = lengths[i]
        assert torch.allclose(batched[i, 1:n], alone[1:], atol=1e-5)
        assert torch.isnan(batched[i, n:]).all() and torch.isnan(batched[i, 0])


def test_megatron_replay_of_two_micro_batches_per_step():
    """Regression: the records were cleared on every load, i.e. per micro-batch. With two
    micro-batches per step (both forwards, then both recomputes) the first micro-batch's
    recompute replayed the second's routing. Cleared once per step, appended per micro-batch,
    each recompute must replay its own micro-batch's record, and the next step starts empty."""
    pytest.importorskip("megatron.core")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function
        from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    from training.r3_megatron import append_replay, begin_replay_step, records_to_megatron

    b, n, layers, k, experts = 1, 6, 2, 2, 8

    def routed(inst) -> list[set[int]]:
        _, routing_map = topk_routing_with_score_function(
            torch.randn(n * b, experts), k, use_pre_softmax=False, router_replay=inst
        )
        return [set(routing_map[row].nonzero().flatten().tolist()) for row in range(n * b)]

    def want(record, layer: int = 0) -> list[set[int]]:
        return [set(r.tolist()) for r in records_to_megatron(record)[layer]]

    RouterReplay.clear_global_router_replay_instances()
    try:
        instances = [RouterReplay() for _ in range(layers)]
        for step in range(2):
            micro = [
                _random_record(n, layers, k, experts, seed=20 + 2 * step + m).reshape(
                    b, n, layers, k
                )
                for m in range(2)
            ]
            assert want(micro[0]) != want(micro[1])
            begin_replay_step(policy="error")
            for record in micro:  # forward of each micro-batch
                append_replay(record)
                for layer, inst in enumerate(instances):
                    assert routed(inst) == want(record, layer)
            assert all(len(i.replay_backward_list) == 2 for i in instances), step
            RouterReplay.set_global_router_replay_action(RouterReplayAction.REPLAY_BACKWARD)
            for record in micro:  # recompute in the same order
                for layer, inst in enumerate(instances):
                    assert routed(inst) == want(record, layer), (step, layer)
            assert all(not i.replay_backward_list for i in instances)
    finally:
        RouterReplay.set_global_router_replay_action(RouterReplayAction.RECORD)
        RouterReplay.clear_global_router_replay_instances()
