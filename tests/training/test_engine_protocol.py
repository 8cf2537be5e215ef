"""Protocol conformance of the local engine against SGLang's /generate and control endpoints,
over real HTTP on 127.0.0.1, plus the SGLang launcher's command line."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from training.engine_local import LocalEngine
from training.engine_protocol import EngineClient, EngineError, GenerateRequest, SamplingParams
from training.engine_sglang import SGLangLaunch, sglang_command

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def engine(random_checkpoint):
    with LocalEngine(random_checkpoint, weight_version="v0", seed=1) as eng:
        yield eng


@pytest.fixture(scope="module")
def client(engine, tiny_config):
    c = EngineClient(
        engine.base_url,
        num_layers=tiny_config.num_hidden_layers,
        top_k=tiny_config.num_experts_per_tok,
    )
    yield c
    c.close()


PROMPT = [5, 17, 42, 99, 7, 300, 12]


def test_generate_answers_with_sglang_field_names(engine, tiny_config):
    body = {
        "input_ids": PROMPT,
        "sampling_params": {"max_new_tokens": 6, "temperature": 1.0, "stop_token_ids": []},
        "return_logprob": True,
        "return_routed_experts": True,
        "routed_experts_start_len": 3,
        "rid": "req-1",
    }
    r = httpx.post(f"{engine.base_url}/generate", json=body, timeout=60)
    assert r.status_code == 200
    ans = r.json()
    assert set(ans) >= {"text", "output_ids", "meta_info"}
    meta = ans["meta_info"]
    out = ans["output_ids"]
    assert meta["id"] == "req-1"
    assert meta["prompt_tokens"] == len(PROMPT) and meta["completion_tokens"] == len(out)
    assert meta["weight_version"] == "v0" and meta["cached_tokens"] == 0
    assert meta["finish_reason"]["type"] in ("stop", "length")
    if meta["finish_reason"]["type"] == "length":
        assert meta["finish_reason"]["length"] == 6 and len(out) == 6
    triples = meta["output_token_logprobs"]
    assert [t[1] for t in triples] == out and all(t[0] <= 0 for t in triples)
    assert all(len(t) == 3 for t in triples)
    raw = np.frombuffer(base64.b64decode(meta["routed_experts"]), dtype="<i4")
    layers, k = tiny_config.num_hidden_layers, tiny_config.num_experts_per_tok
    # rows cover positions [routed_experts_start_len, prompt + output - 1)
    assert raw.size == (len(PROMPT) + len(out) - 1 - 3) * layers * k
    assert raw.min() >= 0 and raw.max() < tiny_config.num_experts


def test_logprobs_and_routing_are_the_engines_own_numerics(engine, client):
    """The engine reports bf16/eager numbers: recomputing with its own model reproduces them."""
    from training.logprobs import token_logprobs
    from training.r3 import capture_routing

    g = client.generate(
        GenerateRequest(
            input_ids=PROMPT,
            sampling_params=SamplingParams(max_new_tokens=8, stop_token_ids=[]),
            return_routed_experts=True,
        )
    )
    full = torch.tensor([PROMPT + g.output_ids])
    with torch.no_grad(), capture_routing(engine.model) as cap:
        logits = engine.model(input_ids=full[:, :-1]).logits[0].float()
    lp = token_logprobs(torch.cat([logits, logits[-1:]]), full[0])[len(PROMPT) :]
    assert np.allclose(lp.numpy(), g.output_logprobs, atol=0.05)
    rows = cap.rows().numpy()
    assert g.routed_experts.shape == rows.shape
    agree = (np.sort(g.routed_experts, -1) == np.sort(rows, -1)).all(axis=-1).mean()
    assert agree > 0.9  # the KV-cached decode and a full forward differ only on near-ties
    assert g.weight_version == "v0" and g.finish in ("stop", "length")


def test_bad_requests_are_rejected(engine):
    url = f"{engine.base_url}/generate"
    assert httpx.post(url, json={"input_ids": PROMPT, "bogus_field": 1}).status_code == 400
    assert (
        httpx.post(
            url,
            json={
                "input_ids": PROMPT,
                "return_routed_experts": True,
                "routed_experts_start_len": 99,
            },
        ).status_code
        == 400
    )
    assert httpx.post(url, json={"input_ids": [10**6]}).status_code == 400
    assert httpx.post(f"{engine.base_url}/nope", json={}).status_code == 404


def test_weight_update_carries_a_version(engine, client, random_checkpoint, tmp_path):
    assert client.weight_version() == "v0"
    with pytest.raises(EngineError):
        client.update_weights_from_disk(str(tmp_path / "missing"), weight_version="bad")
    assert client.weight_version() == "v0"
    client.update_weights_from_disk(str(random_checkpoint), weight_version="v1")
    assert client.weight_version() == "v1"
    legacy = httpx.get(f"{engine.base_url}/get_weight_version").json()
    assert legacy == {"weight_version": "v1"}
    g = client.generate(
        GenerateRequest(input_ids=PROMPT, sampling_params=SamplingParams(max_new_tokens=2))
    )
    assert g.weight_version == "v1"
    client.update_weight_version("v0")
    client.flush_cache()
    assert httpx.get(f"{engine.base_url}/flush_cache").status_code == 200


def _generate_in_thread(client, **kw):
    box: dict = {}

    def go():
        box["gen"] = client.generate(GenerateRequest(input_ids=PROMPT, **kw))

    th = threading.Thread(target=go)
    th.start()
    return th, box


def test_pause_continue_and_abort(engine, client):
    long = SamplingParams(max_new_tokens=4000, stop_token_ids=[], temperature=1.0)
    # abort by rid while decoding
    th, box = _generate_in_thread(client, sampling_params=long, rid="long-1")
    time.sleep(0.5)
    client.abort_request("long-1")
    th.join(timeout=60)
    assert box["gen"].finish == "abort" and len(box["gen"].output_ids) < 4000
    # pause (abort mode) holds new requests until continue
    client.pause_generation("abort")
    th, box = _generate_in_thread(client, sampling_params=SamplingParams(max_new_tokens=3))
    time.sleep(0.5)
    assert "gen" not in box
    client.continue_generation()
    th.join(timeout=60)
    assert box["gen"].finish in ("stop", "length")
    # in-place pause stalls a running request between decode steps, continue resumes it
    th, box = _generate_in_thread(client, sampling_params=long, rid="inplace")
    time.sleep(0.3)
    client.pause_generation("in_place")
    time.sleep(0.2)  # let the step in flight finish
    held = engine.decode_steps
    time.sleep(0.5)
    assert engine.decode_steps == held and "gen" not in box
    client.continue_generation()
    time.sleep(0.5)
    assert engine.decode_steps > held
    client.abort_request(abort_all=True)
    th.join(timeout=60)
    assert box["gen"].finish == "abort"
    with pytest.raises(ValueError):
        client.abort_request()


def test_sglang_command_line():
    launch = SGLangLaunch(
        model_path=Path("/models/qwen3-30b-a3b"), port=31000, tp_size=4, weight_version="7"
    )
    cmd = sglang_command(launch, python="python")
    assert cmd[:3] == ["python", "-m", "sglang.launch_server"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert flags["--model-path"] == "/models/qwen3-30b-a3b" and flags["--tp-size"] == "4"
    assert "--enable-return-routed-experts" in cmd and "--skip-tokenizer-init" in cmd
    assert cmd[cmd.index("--weight-version") + 1] == "7"
    assert cmd[cmd.index("--port") + 1] == "31000"
    off = sglang_command(launch.model_copy(update={"return_routed_experts": False}))
    assert "--enable-return-routed-experts" not in off
    with pytest.raises(ValueError, match="absolute"):
        sglang_command(SGLangLaunch(model_path=Path("relative/model")))
