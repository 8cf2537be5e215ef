"""An embedded rollout engine: SGLang's HTTP protocol served on 127.0.0.1 over the HF model.

It exists so the whole rollout path (client, harness, TITO, R3) runs on a CPU with the same client
code that drives a real SGLang server. Its numerics are deliberately *not* the trainer's: weights
in bfloat16 and eager attention here, float32 and SDPA in the trainer (training/logprobs.py), so
the train-inference mismatch the paper measures is real rather than zero by construction.

Behaviour worth knowing:
- one model, many HTTP threads: forward passes are serialized by a lock, each request keeps its
  own KV cache; routing is captured per forward call under that lock, so requests never mix.
- no prefix cache is kept across requests, so `/flush_cache` has nothing to drop (it succeeds).
- `/pause_generation` with mode `abort` aborts in-flight requests and holds new ones until
  `/continue_generation`; `in_place` and `retract` hold in-flight requests between decode steps.
- logprobs are log_softmax(logits / temperature) in float32 of the sampled token.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from training.engine_protocol import GenerateRequest, encode_routed_experts
from training.policy import AttentionImpl, load_policy
from training.r3 import capture_routing


class LocalEngine:
    """HF-backed engine speaking SGLang's native protocol on a local port.

    Use as a context manager; `base_url` is valid after `start()`. `weight_version` is the
    version reported in every answer until `/update_weights_from_disk` sets a new one.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        dtype: torch.dtype = torch.bfloat16,
        attn: AttentionImpl = "eager",
        weight_version: str = "0",
        seed: int = 0,
        port: int = 0,
    ):
        self.model_path = Path(model_path)
        self.dtype = dtype
        self.attn = attn
        self.weight_version = weight_version
        self.model = load_policy(self.model_path, dtype=dtype, attn=attn)
        self.tokenizer = _maybe_tokenizer(self.model_path)
        self._model_lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self._abort_all_epoch = 0
        self._aborted: set[str] = set()
        self._state_lock = threading.Lock()
        self._seed = seed
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests_served = 0
        self.decode_steps = 0
        """Forward passes run so far (observability for tests and benchmarks)."""

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("LocalEngine is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        """Bind 127.0.0.1 and serve in a daemon thread; returns the base URL."""
        engine = self

        class Handler(_Handler):
            owner = engine

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._running.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LocalEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- protocol operations ---------------------------------------------------------------
    def generate(self, req: GenerateRequest) -> dict[str, Any]:
        """Serve one `/generate` body; returns SGLang's answer dict."""
        if not req.input_ids:
            raise ValueError("input_ids cannot be empty")
        vocab = self.model.config.vocab_size
        if min(req.input_ids) < 0 or max(req.input_ids) >= vocab:
            raise ValueError(f"input_ids out of range for vocab {vocab}")
        total_in = len(req.input_ids)
        if not 0 <= req.routed_experts_start_len <= total_in:
            raise ValueError(
                f"routed_experts_start_len must be in [0, {total_in}], "
                f"got {req.routed_experts_start_len}"
            )
        rid = req.rid or uuid.uuid4().hex
        sp = req.sampling_params
        gen = torch.Generator().manual_seed(
            sp.sampling_seed if sp.sampling_seed is not None else self._next_seed()
        )
        stop_ids = set(sp.stop_token_ids or [])
        eos = self.model.config.eos_token_id
        if isinstance(eos, int):
            stop_ids.add(eos)
        started = time.monotonic()
        self._running.wait()
        epoch = self._abort_all_epoch
        out_ids: list[int] = []
        logprobs: list[float] = []
        routing_chunks: list[torch.Tensor] = []
        finish: dict[str, Any] = {"type": "length", "length": sp.max_new_tokens}
        weight_version = self.weight_version
        past = None
        feed = torch.tensor([req.input_ids], dtype=torch.long)  # (1, n)
        for _ in range(sp.max_new_tokens):
            if self._is_aborted(rid, epoch):
                finish = {"type": "abort", "message": "Abort request."}
                break
            self._running.wait()
            if self._is_aborted(rid, epoch):
                finish = {"type": "abort", "message": "Abort request."}
                break
            with self._model_lock, torch.no_grad(), capture_routing(self.model) as cap:
                out = self.model(input_ids=feed, cache=past, use_cache=True)
            past = out.cache
            self.decode_steps += 1
            routing_chunks.append(cap.rows())  # (fed, L, k)
            logits = out.logits[0, -1].float()  # (V,)
            token, logprob = _sample(logits, sp.temperature, sp.top_p, sp.top_k, gen)
            out_ids.append(token)
            logprobs.append(logprob)
            if token in stop_ids:
                finish = {"type": "stop", "matched": token}
                break
            feed = torch.tensor([[token]], dtype=torch.long)
        with self._state_lock:
            self._aborted.discard(rid)
            self.requests_served += 1
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": total_in,
            "completion_tokens": len(out_ids),
            "cached_tokens": 0,
            "weight_version": weight_version,
            "e2e_latency": time.monotonic() - started,
        }
        if req.return_logprob:
            meta["output_token_logprobs"] = [
                [lp, t, None] for lp, t in zip(logprobs, out_ids, strict=True)
            ]
        if req.return_routed_experts:
            fed = torch.cat(routing_chunks, dim=0) if routing_chunks else None
            # rows exist for every fed position: the prompt plus all outputs but the last
            expected = total_in + len(out_ids) - 1
            if fed is None or fed.shape[0] != expected:
                got = None if fed is None else fed.shape[0]
                raise RuntimeError(f"captured {got} routing rows, expected {expected}")
            meta["routed_experts"] = encode_routed_experts(
                fed[req.routed_experts_start_len :].numpy()
            )
        text = _decode(self, out_ids)
        return {"text": text, "output_ids": out_ids, "meta_info": meta}

    def update_weights_from_disk(self, body: dict[str, Any]) -> dict[str, Any]:
        path = body.get("model_path")
        if not isinstance(path, str) or not path:
            return {"success": False, "message": "model_path is required", "num_paused_requests": 0}
        if body.get("abort_all_requests"):
            self.abort(abort_all=True)
        try:
            model = load_policy(Path(path), dtype=self.dtype, attn=self.attn)
        except (FileNotFoundError, ValueError, OSError) as e:
            return {"success": False, "message": str(e), "num_paused_requests": 0}
        with self._model_lock:
            self.model = model
            self.model_path = Path(path)
            if body.get("weight_version") is not None:
                self.weight_version = str(body["weight_version"])
        return {
            "success": True,
            "message": "Succeeded to update model weights.",
            "num_paused_requests": 0,
        }

    def abort(self, rid: str | None = None, *, abort_all: bool = False) -> None:
        with self._state_lock:
            if abort_all:
                self._abort_all_epoch += 1
            elif rid is not None:
                self._aborted.add(rid)

    def pause(self, mode: str) -> None:
        if mode not in ("abort", "in_place", "retract"):
            raise ValueError(f"Invalid mode: {mode!r}")
        if mode == "abort":
            self.abort(abort_all=True)
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    # ---- internals -------------------------------------------------------------------------
    def _is_aborted(self, rid: str, epoch: int) -> bool:
        with self._state_lock:
            return rid in self._aborted or epoch != self._abort_all_epoch

    def _next_seed(self) -> int:
        with self._state_lock:
            self._seed += 1
            return self._seed


def _sample(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int, gen: torch.Generator
) -> tuple[int, float]:
    """Sample one token; returns (id, log-prob under the temperature-scaled distribution)."""
    if temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)  # (V,)
        token = int(torch.argmax(logits))
        return token, float(logp[token])
    logp = torch.log_softmax(logits / temperature, dim=-1)  # (V,)
    probs = logp.exp()
    if top_k > 0:
        kth = torch.topk(probs, min(top_k, probs.numel())).values[-1]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
        mask = torch.zeros_like(probs, dtype=torch.bool)
        mask[order[keep]] = True
        probs = torch.where(mask, probs, torch.zeros_like(probs))
    token = int(torch.multinomial(probs / probs.sum(), 1, generator=gen))
    return token, float(logp[token])


def _decode(engine: LocalEngine, ids: list[int]) -> str:
    if engine.tokenizer is None:
        return ""
    return engine.tokenizer.decode(ids, skip_special_tokens=False)


def _maybe_tokenizer(directory: Path) -> Any:
    """The checkpoint's tokenizer when it ships one (only used to fill the `text` field)."""
    from training.chat_tokenizer import load_chat_tokenizer

    try:
        return load_chat_tokenizer(directory)
    except FileNotFoundError:
        return None


class _Handler(BaseHTTPRequestHandler):
    owner: LocalEngine
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def _send(self, status: int, payload: Any) -> None:
        if isinstance(payload, str | bytes):
            body = payload.encode() if isinstance(payload, str) else payload
            ctype = "text/plain"
        else:
            body = json.dumps(payload).encode()
            ctype = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        data = json.loads(self.rfile.read(length))
        if not isinstance(data, dict):
            raise ValueError("request body must be a JSON object")
        return data

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        eng = self.owner
        if self.path in ("/health", "/health_generate"):
            self._send(200, "")
        elif self.path == "/model_info":
            self._send(
                200,
                {
                    "model_path": str(eng.model_path),
                    "is_generation": True,
                    "weight_version": eng.weight_version,
                },
            )
        elif self.path == "/get_weight_version":
            self._send(200, {"weight_version": eng.weight_version})
        elif self.path == "/flush_cache":
            self._send(200, "Cache flushed.\n")
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        eng = self.owner
        try:
            body = self._body()
        except ValueError as e:
            self._send(400, {"error": {"message": f"bad JSON: {e}"}})
            return
        try:
            if self.path == "/generate":
                req = GenerateRequest.model_validate(body)
                if req.stream:
                    raise ValueError("streaming is not supported by the local engine")
                self._send(200, eng.generate(req))
            elif self.path == "/update_weights_from_disk":
                ans = eng.update_weights_from_disk(body)
                self._send(200 if ans["success"] else HTTPStatus.BAD_REQUEST, ans)
            elif self.path == "/update_weight_version":
                eng.weight_version = str(body["new_version"])
                self._send(
                    200,
                    {
                        "success": True,
                        "new_version": eng.weight_version,
                        "message": f"Weight version updated to {eng.weight_version}",
                    },
                )
            elif self.path == "/pause_generation":
                eng.pause(body.get("mode", "abort"))
                self._send(200, {"message": "Generation paused successfully.", "status": "ok"})
            elif self.path == "/continue_generation":
                eng.resume()
                self._send(200, {"message": "Generation continued successfully.", "status": "ok"})
            elif self.path == "/abort_request":
                eng.abort(body.get("rid"), abort_all=bool(body.get("abort_all", False)))
                self._send(200, "")
            elif self.path == "/flush_cache":
                self._send(200, "Cache flushed.\n")
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
        except (ValidationError, ValueError, KeyError) as e:
            self._send(400, {"error": {"message": str(e)}})
        except Exception as e:  # noqa: BLE001 - an engine bug answers 500, the server lives on
            self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
