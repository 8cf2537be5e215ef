"""An embedded rollout engine: SGLang's HTTP protocol served on 127.0.0.1 over the HF model.

It exists so the whole rollout path (client, harness, TITO, R3) runs on a CPU with the same client
code that drives a real SGLang server. Its numerics are deliberately *not* the trainer's: weights
in bfloat16 and eager attention here, float32 and SDPA in the trainer (training/logprobs.py), so
the train-inference mismatch the paper measures is real rather than zero by construction.

How it serves many trials at once (continuous batching, as SGLang does):
- one scheduler thread owns the model. HTTP threads only enqueue a request and wait for its
  answer. Each scheduler step prefills newly admitted requests (one forward each, only the part
  not found in the prefix cache), then runs ONE decode forward for every running request
  together: their KV caches are left-padded to a common length, masked, and given explicit
  positions, so requests from concurrent trials share forward passes (`/engine_stats`:
  `decode_forwards`, `decode_rows`, `max_batch`).
- a prefix cache keeps the KV and routing rows of finished requests (what was fed: prompt plus
  all outputs but the last); a multi-turn trial's next prompt extends its previous stream, so
  only the new observation and the last sampled token are prefilled (`cached_tokens` in the
  answer, as SGLang's radix cache reports it). It is bounded in tokens and flushed by a weight
  update (old KV must never continue under new weights) and by `/flush_cache`.
- routing rows are captured per forward and split per request, so requests never mix.
- `/pause_generation` `abort` aborts every running and queued request and holds new ones until
  `/continue_generation`; `in_place` holds running requests between decode steps (they continue
  on whatever weights are loaded at continue); `retract` also drops their KV, which is
  recomputed at continue. A request whose forwards ran under two weight versions is counted in
  `requests_spanning_versions` (it happens only when weights change without an abort pause).
- `/update_weights_from_disk` refuses (`success: false`, weights kept) a checkpoint whose
  parameter names or shapes differ from the served model's, as SGLang, which loads into the
  architecture it serves, does.
- logprobs are log_softmax(logits / temperature) in float32 of the sampled token.
- `skip_tokenizer_init=True` answers without `text`, exactly like SGLang launched with
  `--skip-tokenizer-init`.
- `device`: `auto` serves on CUDA when torch sees one (sampling itself runs on the host with the
  request's seeded generator, so the sampled ids do not depend on the device). A dense Qwen3
  checkpoint has no router: a request for routed experts gets an empty record (rows, 0, 0).

`python -m training.engine_local --model-path DIR [--port N]` serves it as its own process
(`spawn_local_engine`), so the trainer and the engine run in parallel on two cores.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import ValidationError

from training.engine_protocol import GenerateRequest, encode_routed_experts
from training.numerics import DeviceSetting, resolve_numerics
from training.policy import AttentionImpl, load_policy, routing_shape
from training.r3 import capture_routing

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer (keys, values), each (1, kv_heads, n, head_dim)."""


@dataclass(eq=False)
class _Seq:
    """One request inside the scheduler (compared by identity)."""

    rid: str
    req: GenerateRequest
    gen: torch.Generator
    stop_ids: set[int]
    done: threading.Event = field(default_factory=threading.Event)
    fed: list[int] = field(default_factory=list)
    """Ids whose KV is cached, positions 0..len-1 of prompt + outputs."""
    kv: KV | None = None
    routing: list[torch.Tensor] = field(default_factory=list)
    """(m, L, k) int32 chunks, one row per fed position, in order."""
    pending: list[int] = field(default_factory=list)
    """Ids to feed next: the prompt (or its uncached suffix), then each sampled token."""
    out_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cached_tokens: int = 0
    versions: set[str] = field(default_factory=set)
    aborted: bool = False
    finish: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    answer: dict[str, Any] | None = None
    error: Exception | None = None


@dataclass(eq=False)
class _CacheEntry:
    tokens: torch.Tensor  # (n,) int64
    kv: KV
    routing: torch.Tensor  # (n, L, k) int32
    last_used: float


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
        host: str = "127.0.0.1",
        max_running_requests: int = 64,
        prefix_cache_tokens: int = 1_000_000,
        skip_tokenizer_init: bool = False,
        device: DeviceSetting = "cpu",
    ):
        self.model_path = Path(model_path)
        self.dtype = dtype
        self.attn = attn
        self.device = resolve_numerics(device).device
        self.weight_version = weight_version
        self.model = load_policy(self.model_path, dtype=dtype, attn=attn, device=self.device)
        self.skip_tokenizer_init = skip_tokenizer_init
        self.tokenizer = None if skip_tokenizer_init else _maybe_tokenizer(self.model_path)
        self.max_running_requests = max_running_requests
        self.prefix_cache_tokens = prefix_cache_tokens
        self._seed = seed
        self._port = port
        self._host = host
        self._cv = threading.Condition()
        self._waiting: collections.deque[_Seq] = collections.deque()
        self._running: list[_Seq] = []
        self._paused = False
        self._retract = False
        self._busy = False
        self._stopping = False
        self._cache: list[_CacheEntry] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._scheduler: threading.Thread | None = None
        self.requests_served = 0
        self.decode_steps = 0
        """Forward passes run so far, prefill and decode (observability for tests)."""
        self.decode_forwards = 0
        self.decode_rows = 0
        self.max_batch = 0
        self.cached_tokens_total = 0
        self.prefill_tokens_total = 0
        self.requests_spanning_versions = 0
        self.control_log: list[str] = []
        """Control calls in arrival order (pause:<mode>, update:<version>, continue, flush)."""

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("LocalEngine is not started")
        host, port = self._server.server_address[:2]
        if isinstance(host, bytes):
            host = host.decode()
        return f"http://{host}:{port}"

    def start(self) -> str:
        """Start the scheduler, bind `host` (127.0.0.1 unless told: the engine has no
        authentication) and serve in daemon threads; returns the URL."""
        self._start_scheduler()
        engine = self

        class Handler(_Handler):
            owner = engine

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def _start_scheduler(self) -> None:
        if self._scheduler is None:
            self._scheduler = threading.Thread(target=self._loop, daemon=True, name="engine")
            self._scheduler.start()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            for s in [*self._running, *self._waiting]:
                s.aborted = True
            self._cv.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._scheduler is not None:
            self._scheduler.join(timeout=30)
            self._scheduler = None

    def __enter__(self) -> LocalEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- protocol operations ---------------------------------------------------------------
    def generate(self, req: GenerateRequest) -> dict[str, Any]:
        """Serve one `/generate` body (blocking until it finishes); returns SGLang's answer."""
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
        sp = req.sampling_params
        seed = sp.sampling_seed if sp.sampling_seed is not None else self._next_seed()
        stop_ids = set(sp.stop_token_ids or [])
        eos = self.model.config.eos_token_id
        if isinstance(eos, int):
            stop_ids.add(eos)
        seq = _Seq(
            rid=req.rid or uuid.uuid4().hex,
            req=req,
            gen=torch.Generator().manual_seed(seed),
            stop_ids=stop_ids,
        )
        self._start_scheduler()
        with self._cv:
            if self._stopping:
                raise RuntimeError("engine is stopping")
            self._waiting.append(seq)
            self._cv.notify_all()
        seq.done.wait()
        if seq.error is not None:
            raise seq.error
        assert seq.answer is not None
        return seq.answer

    def update_weights_from_disk(self, body: dict[str, Any]) -> dict[str, Any]:
        path = body.get("model_path")
        if not isinstance(path, str) or not path:
            return {"success": False, "message": "model_path is required", "num_paused_requests": 0}
        if body.get("abort_all_requests"):
            self.abort(abort_all=True)
        try:
            model = load_policy(Path(path), dtype=self.dtype, attn=self.attn, device=self.device)
        except (FileNotFoundError, ValueError, OSError) as e:
            return {"success": False, "message": str(e), "num_paused_requests": 0}
        if _shapes(model) != _shapes(self.model):  # SGLang loads into the served architecture
            return {
                "success": False,
                "message": f"{path}: parameter names or shapes differ from the served model's",
                "num_paused_requests": 0,
            }
        with self._cv:
            self.model = model
            self.model_path = Path(path)
            if body.get("weight_version") is not None:
                self.weight_version = str(body["weight_version"])
            self._cache.clear()  # KV of the old weights must not seed new requests
            self.control_log.append(f"update:{self.weight_version}")
            paused = sum(1 for s in self._running if not s.aborted)
        return {
            "success": True,
            "message": "Succeeded to update model weights.",
            "num_paused_requests": paused if self._paused else 0,
        }

    def set_weight_version(self, version: str) -> None:
        with self._cv:
            self.weight_version = version

    def abort(self, rid: str | None = None, *, abort_all: bool = False) -> None:
        with self._cv:
            for s in [*self._running, *self._waiting]:
                if abort_all or s.rid == rid:
                    s.aborted = True
            self._cv.notify_all()

    def pause(self, mode: str) -> None:
        if mode not in ("abort", "in_place", "retract"):
            raise ValueError(f"Invalid mode: {mode!r}")
        with self._cv:
            self.control_log.append(f"pause:{mode}")
            if mode == "abort":
                for s in [*self._running, *self._waiting]:
                    s.aborted = True
            self._paused = True
            self._retract = mode == "retract"
            self._cv.notify_all()
            self._wait_quiet()

    def _wait_quiet(self, timeout_s: float = 120.0) -> None:
        """Wait (lock held) until no forward is in flight and every aborted request has been
        answered: after a pause returns, nothing runs on the weights about to be replaced."""
        deadline = time.monotonic() + timeout_s
        while self._busy or self._has_aborted():
            if not self._cv.wait(timeout=max(0.0, deadline - time.monotonic())):
                break

    def resume(self) -> None:
        with self._cv:
            self.control_log.append("continue")
            if self._retract:
                for s in self._running:  # recompute their KV under the weights loaded now
                    s.pending = [*s.fed, *s.pending]
                    s.fed, s.kv, s.routing = [], None, []
            self._paused = False
            self._retract = False
            self._cv.notify_all()

    def flush_cache(self) -> None:
        with self._cv:
            self._cache.clear()
            self.control_log.append("flush")

    def stats(self) -> dict[str, Any]:
        """Counters for tests and benchmarks (a local extension, not an SGLang endpoint)."""
        with self._cv:
            return {
                "weight_version": self.weight_version,
                "requests_served": self.requests_served,
                "forwards": self.decode_steps,
                "decode_forwards": self.decode_forwards,
                "decode_rows": self.decode_rows,
                "max_batch": self.max_batch,
                "cached_tokens": self.cached_tokens_total,
                "prefill_tokens": self.prefill_tokens_total,
                "prefix_cache_entries": len(self._cache),
                "prefix_cache_tokens": sum(len(e.tokens) for e in self._cache),
                "requests_spanning_versions": self.requests_spanning_versions,
                "rss_mb": _rss_mb(),
                "running": len(self._running),
                "waiting": len(self._waiting),
                "control_log": list(self.control_log),
            }

    # ---- the scheduler ---------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopping and (
                    self._paused and not self._has_aborted() or not (self._waiting or self._running)
                ):
                    self._cv.wait()
                if self._stopping and not (self._waiting or self._running):
                    return
                while self._waiting and len(self._running) < self.max_running_requests:
                    self._running.append(self._waiting.popleft())
                for s in [s for s in [*self._running, *self._waiting] if s.aborted]:
                    self._finish(s, {"type": "abort", "message": "Abort request."})
                if self._stopping:
                    continue
                if self._paused:
                    self._cv.notify_all()
                    continue
                model, version = self.model, self.weight_version
                new = [s for s in self._running if s.kv is None]
                decoding = [s for s in self._running if s.kv is not None and s.pending]
                self._busy = True
            try:
                for s in new:
                    self._prefill(s, model, version)
                if decoding:
                    self._decode(decoding, model, version)
            except Exception as e:  # noqa: BLE001 - a bad forward fails its requests, not us
                with self._cv:
                    for s in [*new, *decoding]:
                        if s in self._running:
                            s.error = RuntimeError(f"engine forward failed: {e}")
                            self._finish(s, {"type": "abort", "message": str(e)})
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _has_aborted(self) -> bool:
        return any(s.aborted for s in [*self._running, *self._waiting])

    def _prefill(self, s: _Seq, model: Any, version: str) -> None:
        """Feed a new request's prompt (after the longest cached prefix); sample its next id."""
        ids = s.pending or list(s.req.input_ids)  # a retracted request refeeds everything
        with self._cv:
            entry, m = self._lookup(ids)
        s.fed, s.routing = list(ids[:m]), []
        if entry is not None:
            s.kv = [(k[:, :, :m], v[:, :, :m]) for k, v in entry.kv]
            s.routing = [entry.routing[:m]]
            s.cached_tokens = max(s.cached_tokens, m)
        s.pending = list(ids[m:])
        feed = torch.tensor([s.pending], dtype=torch.long, device=self.device)  # (1, t)
        cache = _dynamic_cache(model, s.kv)
        with torch.no_grad(), _routing_capture(model, feed.shape[1]) as cap:
            out = model(input_ids=feed, use_cache=True, **{_cache_kwarg(model): cache})
        rows = cap.rows()  # (t, L, k)
        s.kv = [(layer.keys, layer.values) for layer in _output_cache(out).layers]
        self._after_forward(s, out.logits[0, -1].float().cpu(), rows, version)
        with self._cv:
            self.decode_steps += 1
            self.cached_tokens_total += m
            self.prefill_tokens_total += feed.shape[1]

    def _decode(self, seqs: list[_Seq], model: Any, version: str) -> None:
        """One forward for every running request: each feeds its last sampled id."""
        lengths = [len(s.fed) for s in seqs]
        width = max(lengths)
        batch = len(seqs)
        layers = len(seqs[0].kv or [])
        cache_kv: KV = []
        for layer in range(layers):
            keys, values = [], []
            for s, n in zip(seqs, lengths, strict=True):
                k, v = (s.kv or [])[layer]
                keys.append(F.pad(k, (0, 0, width - n, 0)))  # left-pad the time axis
                values.append(F.pad(v, (0, 0, width - n, 0)))
            cache_kv.append((torch.cat(keys), torch.cat(values)))  # (B, kvh, width, d)
        mask = torch.zeros(batch, width + 1, dtype=torch.long)  # (B, width + 1)
        for i, n in enumerate(lengths):
            mask[i, width - n :] = 1
        ids = torch.tensor([[s.pending[0]] for s in seqs], dtype=torch.long)  # (B, 1)
        positions = torch.tensor([[n] for n in lengths], dtype=torch.long)  # (B, 1)
        dev = self.device
        with torch.no_grad(), _routing_capture(model, batch) as cap:
            out = model(
                input_ids=ids.to(dev),
                attention_mask=mask.to(dev),
                position_ids=positions.to(dev),
                use_cache=True,
                **{_cache_kwarg(model): _dynamic_cache(model, cache_kv)},
            )
        rows = cap.rows()  # (B, L, k)
        new_layers = _output_cache(out).layers
        for i, (s, n) in enumerate(zip(seqs, lengths, strict=True)):
            s.kv = [
                (layer.keys[i : i + 1, :, width - n :], layer.values[i : i + 1, :, width - n :])
                for layer in new_layers
            ]
            self._after_forward(s, out.logits[i, -1].float().cpu(), rows[i : i + 1], version)
        with self._cv:
            self.decode_steps += 1
            self.decode_forwards += 1
            self.decode_rows += batch
            self.max_batch = max(self.max_batch, batch)

    def _after_forward(self, s: _Seq, logits: torch.Tensor, rows: torch.Tensor, version: str):
        """Record what was fed, sample the next id, finish on stop / length."""
        s.fed.extend(s.pending)
        s.routing.append(rows)
        s.pending = []
        s.versions.add(version)
        sp = s.req.sampling_params
        token, logprob = _sample(logits, sp.temperature, sp.top_p, sp.top_k, s.gen)
        s.out_ids.append(token)
        s.logprobs.append(logprob)
        with self._cv:
            if token in s.stop_ids:
                self._finish(s, {"type": "stop", "matched": token})
            elif len(s.out_ids) >= sp.max_new_tokens:
                self._finish(s, {"type": "length", "length": sp.max_new_tokens})
            else:
                s.pending = [token]

    def _finish(self, s: _Seq, finish: dict[str, Any]) -> None:
        """Answer `s` (called with the lock held) and keep its KV in the prefix cache."""
        if s in self._running:
            self._running.remove(s)
        elif s in self._waiting:
            self._waiting.remove(s)
        s.finish = finish
        if len(s.versions) > 1:
            self.requests_spanning_versions += 1
        if s.error is None:
            s.answer = self._answer(s)
        if finish["type"] != "abort" and s.kv is not None and s.versions == {self.weight_version}:
            self._insert(s)
        s.kv = None
        self.requests_served += 1
        s.done.set()
        self._cv.notify_all()

    def _answer(self, s: _Seq) -> dict[str, Any]:
        req = s.req
        meta: dict[str, Any] = {
            "id": s.rid,
            "finish_reason": s.finish,
            "prompt_tokens": len(req.input_ids),
            "completion_tokens": len(s.out_ids),
            "cached_tokens": s.cached_tokens,
            "weight_version": min(s.versions) if s.versions else self.weight_version,
            "e2e_latency": time.monotonic() - s.started,
        }
        if req.return_logprob:
            meta["output_token_logprobs"] = [
                [lp, t, None] for lp, t in zip(s.logprobs, s.out_ids, strict=True)
            ]
        aborted = (s.finish or {}).get("type") == "abort"
        if req.return_routed_experts and not aborted:
            fed = torch.cat(s.routing, dim=0) if s.routing else None
            # rows exist for every fed position: the prompt plus all outputs but the last
            expected = len(req.input_ids) + len(s.out_ids) - 1
            if fed is None or fed.shape[0] != expected:
                got = None if fed is None else fed.shape[0]
                raise RuntimeError(f"captured {got} routing rows, expected {expected}")
            meta["routed_experts"] = encode_routed_experts(
                fed[req.routed_experts_start_len :].numpy()
            )
        answer: dict[str, Any] = {"output_ids": list(s.out_ids), "meta_info": meta}
        if not self.skip_tokenizer_init:
            answer["text"] = _decode(self, s.out_ids)
        return answer

    # ---- the prefix cache (called with the lock held) --------------------------------------
    def _lookup(self, prompt: list[int]) -> tuple[_CacheEntry | None, int]:
        """The entry with the longest prefix of `prompt`, and how many ids of it to reuse
        (at most len(prompt) - 1: the last prompt id is always fed, its logits are needed)."""
        ids = torch.tensor(prompt, dtype=torch.long)
        best, best_m = None, 0
        for e in self._cache:
            m = min(len(e.tokens), len(prompt) - 1)
            if m > best_m and torch.equal(e.tokens[:m], ids[:m]):
                best, best_m = e, m
        if best is not None:
            self._cache.remove(best)  # the request that extends it will insert the longer one
        return best, best_m

    def _insert(self, s: _Seq) -> None:
        assert s.kv is not None
        routing = torch.cat(s.routing, dim=0)
        self._cache.append(
            _CacheEntry(torch.tensor(s.fed, dtype=torch.long), s.kv, routing, time.monotonic())
        )
        total = sum(len(e.tokens) for e in self._cache)
        while total > self.prefix_cache_tokens and self._cache:
            oldest = min(self._cache, key=lambda e: e.last_used)
            self._cache.remove(oldest)
            total -= len(oldest.tokens)

    def _next_seed(self) -> int:
        with self._cv:
            self._seed += 1
            return self._seed


def _shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def _rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


@dataclass
class _NoRouting:
    """The routing capture of a dense model: `positions` rows of shape (0, 0)."""

    positions: int

    def rows(self) -> torch.Tensor:
        return torch.zeros((self.positions, 0, 0), dtype=torch.int32)


def _routing_capture(model: Any, positions: int) -> Any:
    """`capture_routing` for a MoE model; an empty capture for a dense one."""
    if routing_shape(model.config)[0] == 0:
        return contextlib.nullcontext(_NoRouting(positions))
    return capture_routing(model)


def _cache_kwarg(model: Any) -> str:
    """The name the model's forward gives its KV cache: `cache` in transformers >= 5.2x,
    `past_key_values` before (the GPU machine's 5.17 knows only the latter)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _output_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _dynamic_cache(model: Any, kv: KV | None) -> Any:
    """A transformers DynamicCache holding `kv` (empty when None)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    for layer, (k, v) in enumerate(kv or []):
        cache.update(k, v, layer)
    return cache


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
            eng.flush_cache()
            self._send(200, "Cache flushed.\n")
        elif self.path == "/engine_stats":
            self._send(200, eng.stats())
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
                eng.set_weight_version(str(body["new_version"]))
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
                eng.flush_cache()
                self._send(200, "Cache flushed.\n")
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
        except (ValidationError, ValueError, KeyError) as e:
            self._send(400, {"error": {"message": str(e)}})
        except Exception as e:  # noqa: BLE001 - an engine bug answers 500, the server lives on
            self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})


# ---- the engine as its own process ---------------------------------------------------------
READY = "T1_LOCAL_ENGINE_READY"


class LocalEngineProcess:
    """A `python -m training.engine_local` child process; `url` is set once it serves."""

    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc = proc
        self.url = url

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)

    def __enter__(self) -> LocalEngineProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn_local_engine(
    model_path: Path,
    *,
    weight_version: str = "0",
    seed: int = 0,
    port: int = 0,
    host: str = "127.0.0.1",
    threads: int = 1,
    skip_tokenizer_init: bool = True,
    ready_timeout_s: float = 180.0,
    device: DeviceSetting = "cpu",
) -> LocalEngineProcess:
    """Start the local engine in a child process and wait until it serves.

    Raises RuntimeError (with the child's last output) when it exits or stays silent.
    """
    cmd = [
        sys.executable,
        "-m",
        "training.engine_local",
        "--model-path",
        str(model_path),
        "--weight-version",
        weight_version,
        "--seed",
        str(seed),
        "--port",
        str(port),
        "--host",
        host,
        "--threads",
        str(threads),
        "--device",
        device,
    ]
    if skip_tokenizer_init:
        cmd.append("--skip-tokenizer-init")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(READY):
            url = line.split()[1]
            threading.Thread(target=_drain, args=(proc,), daemon=True).start()
            return LocalEngineProcess(proc, url)
    proc.kill()
    proc.wait(timeout=20)
    raise RuntimeError(f"local engine did not start: {''.join(lines)[-2000:]}")


def _drain(proc: subprocess.Popen) -> None:
    """Read the child's output so its pipe never fills and stalls it."""
    assert proc.stdout is not None
    for _ in proc.stdout:
        pass


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-path", type=Path, required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind and advertise (a cluster: this IP)"
    )
    p.add_argument("--weight-version", default="0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    p.add_argument("--skip-tokenizer-init", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    engine = LocalEngine(
        args.model_path,
        weight_version=args.weight_version,
        seed=args.seed,
        port=args.port,
        host=args.host,
        skip_tokenizer_init=args.skip_tokenizer_init,
        device=args.device,
    )
    url = engine.start()
    print(f"{READY} {url}", flush=True)
    stop = threading.Event()
    import signal

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    while not stop.wait(1.0):
        if os.getppid() != parent:  # the campaign died without stopping us: do not linger
            break
    engine.stop()


if __name__ == "__main__":
    main()
