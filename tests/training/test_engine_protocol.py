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


# An answer in the shape SGLang returns when launched with --skip-tokenizer-init (how
# `engine_sglang` launches it): TokenizerManager builds it from BatchTokenIDOutput for a finished,
# non-streamed request as {"output_ids", "meta_info"}: there is no "text" (nothing detokenizes)
# and logprob triples carry None for the token text.
SKIP_TOKENIZER_INIT_ANSWER = {
    "output_ids": [17, 42, 7],
    "meta_info": {
        "id": "3f1c0c6a2d8e4b0f9a7d5e1b2c3d4e5f",
        "finish_reason": {"type": "stop", "matched": 7},
        "prompt_tokens": 4,
        "weight_version": "12",
        "completion_tokens": 3,
        "cached_tokens": 0,
        "e2e_latency": 0.0314,
        "output_token_logprobs": [[-0.25, 17, None], [-1.5, 42, None], [-0.01, 7, None]],
        "routed_experts": base64.b64encode(
            np.arange(4 + 3 - 1 - 2, dtype="<i4").repeat(2 * 2).tobytes()
        ).decode(),
    },
}


class _FakeSGLang:
    """Fake at the inference-server boundary (stands for SGLang on a GPU, launched with
    --skip-tokenizer-init): a stdlib HTTP server that answers /generate with a fixed body."""

    def __init__(self, answer: dict) -> None:
        import json
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        body = json.dumps(answer).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_answer_without_text_from_skip_tokenizer_init_sglang_is_read():
    """Regression: `text` was required, so every answer of a --skip-tokenizer-init server
    failed validation. Ids, logprobs, version and routing must come through without it."""
    fake = _FakeSGLang(SKIP_TOKENIZER_INIT_ANSWER)
    client = EngineClient(fake.url, num_layers=2, top_k=2)
    try:
        g = client.generate(
            GenerateRequest(
                input_ids=[1, 2, 3, 4], return_routed_experts=True, routed_experts_start_len=2
            )
        )
    finally:
        client.close()
        fake.close()
    assert g.output_ids == [17, 42, 7] and g.finish == "stop" and g.weight_version == "12"
    assert g.output_logprobs == [-0.25, -1.5, -0.01]
    assert g.routed_experts is not None and g.routed_experts.shape == (4, 2, 2)
    assert g.routed_experts[3].tolist() == [[3, 3], [3, 3]]
    # builds before `output_ids` answered `token_ids`; no ids at all is an error
    legacy = {"token_ids": [5], "meta_info": {**SKIP_TOKENIZER_INIT_ANSWER["meta_info"]}}
    from training.engine_protocol import GenerateResponse

    assert GenerateResponse.model_validate(legacy).output_ids == [5]
    with pytest.raises(ValueError):
        GenerateResponse.model_validate({"meta_info": legacy["meta_info"]})


def test_local_engine_with_skip_tokenizer_init_answers_like_sglang(random_checkpoint):
    with LocalEngine(random_checkpoint, skip_tokenizer_init=True) as eng:
        body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 3, "stop_token_ids": []}}
        ans = httpx.post(f"{eng.base_url}/generate", json=body, timeout=60).json()
    assert "text" not in ans and len(ans["output_ids"]) == 3


def _request(seed: int, prompt=PROMPT, n: int = 24, start: int = 0) -> GenerateRequest:
    return GenerateRequest(
        input_ids=list(prompt),
        sampling_params=SamplingParams(
            max_new_tokens=n, temperature=1.0, stop_token_ids=[], sampling_seed=seed
        ),
        return_routed_experts=True,
        routed_experts_start_len=start,
    )


def test_concurrent_requests_share_decode_forwards(random_checkpoint, tiny_config):
    """Requests from concurrent trials are decoded in one forward per step (left-padded KV,
    masked, explicit positions), and each gets exactly what it gets alone: same ids, logprobs
    and routing rows for the same seed."""
    layers, k = tiny_config.num_hidden_layers, tiny_config.num_experts_per_tok
    prompts = [PROMPT[: 3 + i] for i in range(4)]  # different lengths: padding is exercised
    with LocalEngine(random_checkpoint, seed=1) as eng:
        client = EngineClient(eng.base_url, num_layers=layers, top_k=k)
        alone = []
        for i, p in enumerate(prompts):
            alone.append(client.generate(_request(100 + i, p)))
            eng.flush_cache()
        before = eng.stats()
        together: list = [None] * len(prompts)
        go = threading.Barrier(len(prompts))

        def run(i):
            go.wait()
            together[i] = client.generate(_request(100 + i, prompts[i]))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        after = eng.stats()
        client.close()
    for a, b in zip(alone, together, strict=True):
        assert a.output_ids == b.output_ids and a.output_logprobs == b.output_logprobs
        assert np.array_equal(a.routed_experts, b.routed_experts)
    forwards = after["decode_forwards"] - before["decode_forwards"]
    rows = after["decode_rows"] - before["decode_rows"]
    assert after["max_batch"] >= 2 and rows > forwards  # forwards were shared
    assert rows == sum(len(g.output_ids) - 1 for g in together)  # one row per decoded token


def test_prefix_cache_serves_the_next_turn(random_checkpoint, tiny_config):
    """A multi-turn prompt extends the previous stream: only the new part is prefilled, and the
    answer (ids, routing rows from `routed_experts_start_len`) equals an uncached one."""
    layers, k = tiny_config.num_hidden_layers, tiny_config.num_experts_per_tok
    with LocalEngine(random_checkpoint, seed=1) as eng:
        client = EngineClient(eng.base_url, num_layers=layers, top_k=k)
        first = client.generate(_request(5))
        stream = first.prompt_ids + first.output_ids + [11, 12, 13]
        cached = client.generate(_request(6, stream, n=8, start=len(PROMPT)))
        meta_cached = eng.stats()["cached_tokens"]
        eng.flush_cache()
        fresh = client.generate(_request(6, stream, n=8, start=len(PROMPT)))
        client.close()
    assert meta_cached == len(PROMPT) + len(first.output_ids) - 1  # all that was fed before
    assert cached.output_ids == fresh.output_ids
    assert np.array_equal(cached.routed_experts, fresh.routed_experts)


def test_publish_quiesces_generation_so_no_request_spans_two_versions(
    random_checkpoint, tiny_config
):
    """pause(abort) -> update -> continue: the request in flight is aborted (the harness sends
    it again) and nothing decodes under two versions. Without the pause, the same update lands
    between two decode steps of a running request and the engine counts it as spanning."""
    layers, k = tiny_config.num_hidden_layers, tiny_config.num_experts_per_tok
    long = SamplingParams(max_new_tokens=4000, stop_token_ids=[], temperature=1.0)
    with LocalEngine(random_checkpoint, seed=1, weight_version="0") as eng:
        client = EngineClient(eng.base_url, num_layers=layers, top_k=k)
        th, box = _generate_in_thread(client, sampling_params=long)
        time.sleep(0.3)
        client.pause_generation("abort")
        client.update_weights_from_disk(str(random_checkpoint), weight_version="1")
        client.continue_generation()
        th.join(timeout=60)
        assert box["gen"].finish == "abort" and eng.stats()["requests_spanning_versions"] == 0
        assert eng.stats()["control_log"][-3:] == ["pause:abort", "update:1", "continue"]
        # the regression: an update without the pause
        th, box = _generate_in_thread(client, sampling_params=long)
        time.sleep(0.3)
        client.update_weights_from_disk(str(random_checkpoint), weight_version="2")
        time.sleep(0.2)
        client.abort_request(abort_all=True)
        th.join(timeout=60)
        assert eng.stats()["requests_spanning_versions"] == 1
        client.close()


@pytest.mark.parametrize("dtype, wire", [("uint8", "u1"), ("uint16", "<u2"), (None, "<i4")])
def test_routed_experts_in_narrow_wire_formats_and_weight_version_spans(dtype, wire):
    """Regression: the client read every `routed_experts` payload as int32, so a newer SGLang's
    uint8 (<= 256 experts) or uint16 payload failed the size check or decoded garbage, and it
    dropped the `weight_versions` spans those builds return. Rows at 256 experts (ids up to
    255) and beyond (uint16) must come through exactly; the spans are kept and a request's
    version is its oldest span's."""
    rows, layers, k = 4 + 3 - 1 - 2, 2, 2
    experts = 255 if dtype == "uint8" else 1000
    want = np.random.default_rng(0).integers(0, experts + 1, size=(rows, layers, k))
    meta = {
        **SKIP_TOKENIZER_INIT_ANSWER["meta_info"],
        "routed_experts": base64.b64encode(want.astype(wire).tobytes()).decode(),
        "weight_versions": [
            {"version": "11", "start": 0, "end": 1},
            {"version": "12", "start": 1, "end": 3},
        ],
    }
    if dtype is not None:
        meta["routed_experts_dtype"] = dtype
    fake = _FakeSGLang({**SKIP_TOKENIZER_INIT_ANSWER, "meta_info": meta})
    client = EngineClient(fake.url, num_layers=layers, top_k=k)
    try:
        g = client.generate(
            GenerateRequest(
                input_ids=[1, 2, 3, 4], return_routed_experts=True, routed_experts_start_len=2
            )
        )
    finally:
        client.close()
        fake.close()
    assert g.routed_experts is not None and g.routed_experts.dtype == np.int32
    assert np.array_equal(g.routed_experts, want)
    assert g.weight_version_spans is not None
    assert [(s.version, s.start, s.end) for s in g.weight_version_spans] == [
        ("11", 0, 1),
        ("12", 1, 3),
    ]
    assert g.weight_version == "11"  # as old as its oldest token


def test_wire_format_and_span_errors_are_named():
    from training.engine_protocol import decode_routed_experts, version_spans

    payload = base64.b64encode(np.arange(8, dtype="u1").tobytes()).decode()
    assert decode_routed_experts(payload, rows=2, num_layers=2, top_k=2, dtype="uint8").shape == (
        2,
        2,
        2,
    )
    with pytest.raises(EngineError, match="expected 2x2x2"):  # uint8 bytes read as int32
        decode_routed_experts(payload, rows=2, num_layers=2, top_k=2)
    with pytest.raises(EngineError, match="routed_experts_dtype"):
        decode_routed_experts(payload, rows=2, num_layers=2, top_k=2, dtype="float8")
    assert [(s.version, s.start, s.end) for s in version_spans(["3", "3", "4"], 3) or []] == [
        ("3", 0, 2),
        ("4", 2, 3),
    ]
    assert version_spans(None, 3) is None
    with pytest.raises(EngineError, match="cover 2 of 3"):
        version_spans([{"version": "1", "start": 0, "end": 2}], 3)
    with pytest.raises(EngineError, match="tile"):
        version_spans([{"version": "1", "start": 1, "end": 3}], 3)
