"""Two holes the suite left open (mutants that survived it), pinned at the campaign level:

- the campaign's weight publish must quiesce generation (`pause_generation` before the update):
  a request in flight during `publish_weights` is aborted, none decodes under two versions;
- a token sampled by weight version v-1 must get its old logprob (the denominator of the PPO
  ratio) from v-1's weights, the held previous actor, not from the current actor.
"""

from __future__ import annotations

import copy
import threading
import time

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from tests.training.synthetic import Finish, batch_of, campaign, rollout  # noqa: E402
from training.campaign import (  # noqa: E402
    _logprobs,
    assemble,
    compute_advantages,
    publish_weights,
    train_step,
)
from training.engine_protocol import (  # noqa: E402
    EngineClient,
    GenerateRequest,
    Generation,
    SamplingParams,
)
from training.tito import TurnRecord  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_campaigns_publish_aborts_requests_in_flight(random_checkpoint, tmp_path, tokenizer):
    """Mutant killed: `publish_weights` without `pause_generation`. A long request is decoding
    when the campaign publishes; it must come back aborted (the harness re-sends it) and the
    engine must count no request that decoded under two versions."""
    from training.engine_local import LocalEngine

    c = campaign(random_checkpoint, tmp_path, tokenizer, lr=1e-3)
    mc = c.actor.config
    with LocalEngine(random_checkpoint, seed=1, weight_version="0") as eng:
        c.client = EngineClient(
            eng.base_url, num_layers=mc.num_hidden_layers, top_k=mc.num_experts_per_tok
        )
        box: dict = {}
        long = SamplingParams(max_new_tokens=4000, stop_token_ids=[], temperature=1.0)

        def go():
            box["gen"] = c.client.generate(
                GenerateRequest(input_ids=[5, 17, 42], sampling_params=long)
            )

        th = threading.Thread(target=go)
        th.start()
        deadline = time.monotonic() + 60
        while eng.stats()["running"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # a few decode steps under version 0
        assert eng.stats()["running"] == 1
        metrics = publish_weights(c)
        time.sleep(0.3)  # without the pause the request would now decode under version 1
        c.client.abort_request(abort_all=True)  # end it either way
        th.join(timeout=60)
        stats = eng.stats()
        served = c.client.weight_version()
        c.client.close()
    assert metrics["weights/version"] == 1.0 and c.weight_version == 1 and served == "1"
    assert stats["requests_spanning_versions"] == 0
    assert box["gen"].finish == "abort" and box["gen"].weight_version == "0"
    assert stats["control_log"][-3:] == ["pause:abort", "update:1", "continue"]


def _two_version_trial():
    """A trial whose first turn was sampled by version 0 and second by version 1."""
    stream, turns = [5, 17, 42, 99], []
    for version, out in ((0, [600, 601, 602]), (1, [603, 604])):
        g = Generation(
            rid="r", prompt_ids=list(stream), output_ids=out, output_logprobs=[-1.0] * len(out),
            finish="stop", weight_version=str(version), routed_experts=None,
            routed_experts_start=0,
        )  # fmt: skip
        turns.append(TurnRecord(generation=g))
        stream = stream + out + [201, 202]
    return rollout(turns, "finished", Finish(1, 2))


def test_stale_tokens_are_scored_by_their_behaviour_version(random_checkpoint, tmp_path, tokenizer):
    """Mutant killed: old logprobs of every token from the current actor. The trainer holds
    version 1 (the actor) and version 0 (the behaviour copy, here perturbed so the two differ);
    the turn sampled by version 0 must get version 0's logprobs, the other turn version 1's."""
    c = campaign(random_checkpoint, tmp_path, tokenizer, lr=1e-3, async_rollouts=True)
    c.weight_version = 1
    c.behavior = copy.deepcopy(c.actor)
    with torch.no_grad():
        for p in c.behavior.parameters():
            p.add_(0.2 * torch.randn_like(p))
    samples = assemble(c, batch_of([_two_version_trial()]))
    assert len(samples) == 1
    s = samples[0]
    (a0, b0), (a1, b1) = s.sample.turn_spans
    assert s.versions[a0:b0].tolist() == [0] * (b0 - a0)
    assert s.versions[a1:b1].tolist() == [1] * (b1 - a1)
    compute_advantages(c, samples)
    current = _logprobs(c, c.actor, samples, grad=False)[0]
    previous = _logprobs(c, c.behavior, samples, grad=False)[0]
    assert not torch.allclose(current[a0:b0], previous[a0:b0], atol=1e-3)  # they differ
    assert s.old_logprobs is not None
    assert torch.allclose(s.old_logprobs[a0:b0], previous[a0:b0])  # v0 tokens: v0 weights
    assert torch.allclose(s.old_logprobs[a1:b1], current[a1:b1])  # v1 tokens: v1 weights
    # a token sampled two versions back has no weights held: refused, not silently rescored
    c.weight_version = 2
    with pytest.raises(ValueError, match="more than one version back"):
        compute_advantages(c, samples)


def test_the_update_holds_the_pre_update_actor_as_the_behaviour_version(
    random_checkpoint, tmp_path, tokenizer
):
    """In async mode the engine samples with the pre-update weights until the publish: after
    the actor update, `behavior` must hold exactly those weights (the tokens they sample next
    step are scored with them)."""
    c = campaign(random_checkpoint, tmp_path, tokenizer, lr=1e-2, async_rollouts=True)
    before = {k: v.clone() for k, v in c.actor.state_dict().items()}
    samples = assemble(c, batch_of([_two_version_trial()]))
    for s in samples:
        s.versions[s.versions >= 0] = 0  # sampled by the current version 0
    train_step(c, samples)
    after = c.actor.state_dict()
    held = c.behavior.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the actor moved
    assert all(torch.equal(before[k], held[k]) for k in before)  # behaviour = pre-update


def test_a_turn_the_engine_says_spans_two_versions_is_scored_per_token(
    random_checkpoint, tmp_path, tokenizer
):
    """An engine that returns `weight_versions` spans (a request that decoded across an update,
    e.g. an in-place pause) gets each token scored by the version that generated it."""
    from training.engine_protocol import VersionSpan

    c = campaign(random_checkpoint, tmp_path, tokenizer, lr=1e-3, async_rollouts=True)
    c.weight_version = 1
    c.behavior = copy.deepcopy(c.actor)
    with torch.no_grad():
        for p in c.behavior.parameters():
            p.add_(0.2 * torch.randn_like(p))
    out = [600, 601, 602, 603, 604]
    g = Generation(
        rid="r", prompt_ids=[5, 17, 42, 99], output_ids=out, output_logprobs=[-1.0] * 5,
        finish="stop", weight_version="0", routed_experts=None, routed_experts_start=0,
        weight_version_spans=[VersionSpan("0", 0, 2), VersionSpan("1", 2, 5)],
    )  # fmt: skip
    samples = assemble(c, batch_of([rollout([TurnRecord(generation=g)], "finished", Finish(1, 1))]))
    s = samples[0]
    (a, b) = s.sample.turn_spans[0]
    assert s.versions[a:b].tolist() == [0, 0, 1, 1, 1]
    compute_advantages(c, samples)
    assert s.old_logprobs is not None
    previous = _logprobs(c, c.behavior, samples, grad=False)[0]
    current = _logprobs(c, c.actor, samples, grad=False)[0]
    assert torch.allclose(s.old_logprobs[a : a + 2], previous[a : a + 2])
    assert torch.allclose(s.old_logprobs[a + 2 : b], current[a + 2 : b])
