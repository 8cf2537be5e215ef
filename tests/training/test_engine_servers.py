"""A campaign served by several engine servers, over real HTTP on 127.0.0.1: each server is a
local CPU engine (`LocalEngine`). The weight publish's control calls reach every server
(pause all, update each with its version check, continue all), a refusing or dead server
fails the publish by name and leaves none paused, generation goes to the router URL when there
is one, and without one a trial's turns stay on the server a stable hash of its id picks."""

from __future__ import annotations

import socket
from contextlib import ExitStack

import pytest

pytest.importorskip("torch")

from tests.training.synthetic import campaign  # noqa: E402
from training.campaign import publish_weights  # noqa: E402
from training.campaign_config import CampaignConfig  # noqa: E402
from training.engine_local import LocalEngine  # noqa: E402
from training.engine_protocol import (  # noqa: E402
    EngineClient,
    EngineError,
    GenerateRequest,
    SamplingParams,
)

pytestmark = pytest.mark.torch

SHORT = SamplingParams(max_new_tokens=3, stop_token_ids=[], temperature=1.0)


def _engines(stack: ExitStack, *checkpoints) -> list[LocalEngine]:
    return [
        stack.enter_context(LocalEngine(ckpt, seed=i, weight_version="0"))
        for i, ckpt in enumerate(checkpoints)
    ]


def _client(base_url, servers, tiny_config, **kw) -> EngineClient:
    return EngineClient(
        base_url,
        num_layers=tiny_config.num_hidden_layers,
        top_k=tiny_config.num_experts_per_tok,
        servers=[e.base_url if isinstance(e, LocalEngine) else e for e in servers],
        **kw,
    )


def _not_paused(engine: LocalEngine, tiny_config) -> bool:
    """A paused local engine holds a new request until continue: one that answers within 30 s
    is not paused."""
    with _client(engine.base_url, [], tiny_config, timeout_s=30) as c:
        return c.generate(GenerateRequest(input_ids=[5, 17], sampling_params=SHORT)).finish in (
            "stop",
            "length",
        )


@pytest.fixture(scope="module")
def wider_checkpoint(tmp_path_factory, tokenizer, tiny_config):
    """A checkpoint of another shape (hidden size 48): a server serving it refuses the tiny
    policy's weights, as SGLang refuses weights of another architecture."""
    from training.chat_tokenizer import save_chat_tokenizer
    from training.policy import build_policy, save_policy

    out = tmp_path_factory.mktemp("wider_policy")
    model = build_policy(tiny_config.model_copy(update={"hidden_size": 48}))
    model.config.eos_token_id = None
    save_policy(model, out)
    save_chat_tokenizer(tokenizer, out)
    return out


def test_a_publish_reaches_every_server(random_checkpoint, tmp_path, tokenizer, tiny_config):
    c = campaign(random_checkpoint, tmp_path, tokenizer)
    with ExitStack() as stack:
        a, b = _engines(stack, random_checkpoint, random_checkpoint)
        c.client = stack.enter_context(_client(None, [a, b], tiny_config))
        metrics = publish_weights(c)
        served = [_client(e.base_url, [], tiny_config).weight_version() for e in (a, b)]
        assert c.client.weight_version() == "1"
        logs = [e.stats()["control_log"] for e in (a, b)]
    assert metrics["weights/version"] == 1.0 and c.weight_version == 1
    assert served == ["1", "1"]
    assert logs == [["pause:abort", "update:1", "continue"]] * 2


def test_a_server_that_refuses_the_weights_fails_the_publish_by_name(
    random_checkpoint, wider_checkpoint, tmp_path, tokenizer, tiny_config
):
    """The second server serves another architecture and refuses version 1: the publish raises
    naming it, the trainer stays at version 0, and both servers were continued. The servers
    now disagree (the first loaded version 1), which the client's version check reports."""
    c = campaign(random_checkpoint, tmp_path, tokenizer)
    with ExitStack() as stack:
        a, b = _engines(stack, random_checkpoint, wider_checkpoint)
        c.client = stack.enter_context(_client(None, [a, b], tiny_config))
        with pytest.raises(EngineError) as err:
            publish_weights(c)
        logs = [e.stats()["control_log"] for e in (a, b)]
        unpaused = [_not_paused(a, tiny_config), _not_paused(b, tiny_config)]
        with pytest.raises(EngineError, match="different weight versions"):
            c.client.weight_version()
        urls = [a.base_url, b.base_url]
    assert f"update_weights_from_disk({tmp_path / 'weights' / 'v1'}) failed on {urls[1]}" in str(
        err.value
    )
    assert "differ from the served model" in str(err.value)  # the server's own reason
    assert urls[0] not in str(err.value)
    assert c.weight_version == 0
    assert logs == [["pause:abort", "update:1", "continue"], ["pause:abort", "continue"]]
    assert unpaused == [True, True]


def test_a_dead_server_fails_the_pause_before_any_update(
    random_checkpoint, tmp_path, tokenizer, tiny_config
):
    """The second server is down: the pause fails on it, the first (already paused) is
    continued, and no server loads anything (every pause comes before any update)."""
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    c = campaign(random_checkpoint, tmp_path, tokenizer)
    with ExitStack() as stack:
        (a,) = _engines(stack, random_checkpoint)
        c.client = stack.enter_context(_client(None, [a, dead], tiny_config, timeout_s=10))
        with pytest.raises(EngineError) as err:
            publish_weights(c)
        log = a.stats()["control_log"]
        version = a.stats()["weight_version"]
        unpaused = _not_paused(a, tiny_config)
    assert dead in str(err.value) and "pause_generation" in str(err.value)
    assert log[:2] == ["pause:abort", "continue"] and not any(x.startswith("update") for x in log)
    assert version == "0" and unpaused and c.weight_version == 0


def test_generation_goes_to_the_router_and_control_calls_to_the_servers(
    random_checkpoint, tiny_config
):
    """A third engine stands in for `sglang_router` (it answers /generate, as a router forwards
    it); the publish's calls must reach the servers themselves, not the router."""
    with ExitStack() as stack:
        router, a, b = _engines(stack, random_checkpoint, random_checkpoint, random_checkpoint)
        client = stack.enter_context(_client(router.base_url, [a, b], tiny_config))
        g = client.generate(GenerateRequest(input_ids=[5, 17, 42], sampling_params=SHORT))
        client.pause_generation("abort")
        client.update_weights_from_disk(str(random_checkpoint), weight_version="1")
        client.continue_generation()
        served = [e.stats()["requests_served"] for e in (router, a, b)]
        logs = [e.stats()["control_log"] for e in (router, a, b)]
        versions = [e.stats()["weight_version"] for e in (router, a, b)]
    assert g.weight_version == "0" and served == [1, 0, 0]
    assert logs[0] == [] and logs[1] == logs[2] == ["pause:abort", "update:1", "continue"]
    assert versions == ["0", "1", "1"]


def test_without_a_router_a_trials_turns_stay_on_the_server_its_id_picks(
    random_checkpoint, tiny_config
):
    """Eight two-turn trials; the second turn extends the first's stream, so it is served
    from the prefix cache only on the server that ran the first. Every second turn is fully
    cached (the turns stayed together), both servers got trials, and a second client (another
    process) picks the same server for every id."""
    ids = [f"run:step0-1:{slot}" for slot in range(8)]
    with ExitStack() as stack:
        a, b = _engines(stack, random_checkpoint, random_checkpoint)
        client = stack.enter_context(_client(None, [a, b], tiny_config))
        other = stack.enter_context(_client(None, [a, b], tiny_config))
        with pytest.raises(EngineError, match="for_trial"):
            client.generate(GenerateRequest(input_ids=[5], sampling_params=SHORT))
        expect_cached = 0
        for i, tid in enumerate(ids):
            server = client.for_trial(tid)
            prompt = [5 + i, 17, 42, 99]
            first = server.generate(GenerateRequest(input_ids=prompt, sampling_params=SHORT))
            stream = prompt + first.output_ids
            server.generate(GenerateRequest(input_ids=[*stream, 7, 8], sampling_params=SHORT))
            expect_cached += len(stream) - 1  # all fed before: the last sampled id was not
        picks = [client.for_trial(t).base_url for t in ids]
        again = [other.for_trial(t).base_url for t in ids]
        stats = [e.stats() for e in (a, b)]
        urls = [a.base_url, b.base_url]
    assert picks == again
    assert [s["requests_served"] for s in stats] == [2 * picks.count(u) for u in urls]
    assert all(s["requests_served"] > 0 for s in stats)
    assert sum(s["cached_tokens"] for s in stats) == expect_cached


def test_engine_servers_config_rejects_what_no_client_could_use():
    assert CampaignConfig().engine_servers == []
    with pytest.raises(ValueError, match="gpu1:30000"):
        CampaignConfig(engine_servers=["gpu1:30000"])
    with pytest.raises(ValueError, match="twice"):
        CampaignConfig(engine_servers=["http://gpu1:30000", "http://gpu1:30000"])
