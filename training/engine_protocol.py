"""SGLang's native HTTP protocol as typed records, and the one client both engines are driven by.

Field names follow SGLang (python/sglang/srt/managers/io_struct.py, entrypoints/http_server.py):

- `POST /generate` takes `GenerateReqInput` fields: `input_ids`, `sampling_params`,
  `return_logprob`, `logprob_start_len`, `return_routed_experts`, `routed_experts_start_len`,
  `rid`. It answers `{"text", "output_ids", "meta_info"}` where `meta_info` carries `id`,
  `finish_reason` (`{"type": "stop"|"length"|"abort", ...}`), `prompt_tokens`,
  `completion_tokens`, `cached_tokens`, `weight_version`, `output_token_logprobs`
  (`[[logprob, token_id, text|None], ...]`) and `routed_experts`: base64 of a little-endian int32
  C-order array of shape (seq_len - 1 - routed_experts_start_len, num_moe_layers, top_k) covering
  positions [routed_experts_start_len, seq_len - 1) of prompt + output.
- `POST /update_weights_from_disk` (`model_path`, `weight_version`, `abort_all_requests`,
  `flush_cache`), `POST /update_weight_version` (`new_version`), `GET /model_info`
  (with `weight_version`; older builds: `GET /get_weight_version`).
- `POST /pause_generation` (`mode`: abort | in_place | retract), `POST /continue_generation`,
  `POST /abort_request` (`rid`, `abort_all`), `POST /flush_cache` (GET also accepted).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


class SamplingParams(BaseModel):
    """The subset of SGLang's `sampling_params` the harness uses."""

    model_config = ConfigDict(extra="forbid")

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = False
    no_stop_trim: bool = True
    sampling_seed: int | None = None


class GenerateRequest(BaseModel):
    """Body of `POST /generate` for one sequence given as token ids (never text)."""

    model_config = ConfigDict(extra="forbid")

    input_ids: list[int]
    sampling_params: SamplingParams = Field(default_factory=SamplingParams)
    rid: str | None = None
    return_logprob: bool = True
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    return_routed_experts: bool = False
    routed_experts_start_len: int = 0
    stream: bool = False


class MetaInfo(BaseModel):
    """`meta_info` of a `/generate` answer; unknown SGLang fields are kept, not rejected."""

    model_config = ConfigDict(extra="allow")

    id: str
    finish_reason: dict[str, Any] | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    weight_version: str | None = None
    output_token_logprobs: list[list[Any]] | None = None
    routed_experts: str | None = None
    e2e_latency: float | None = None


class GenerateResponse(BaseModel):
    """A `/generate` answer.

    `text` is optional: a server started with `--skip-tokenizer-init` (how we launch SGLang, ids
    in and ids out) never detokenizes and answers `{"output_ids", "meta_info"}` only. Builds of
    SGLang before `output_ids` answered `token_ids`; it is read as `output_ids`.
    """

    model_config = ConfigDict(extra="allow")

    text: str | None = None
    output_ids: list[int]
    meta_info: MetaInfo

    @model_validator(mode="before")
    @classmethod
    def _legacy_token_ids(cls, data: Any) -> Any:
        if isinstance(data, dict) and "output_ids" not in data and "token_ids" in data:
            data = {**data, "output_ids": data["token_ids"]}
        return data


FinishType = Literal["stop", "length", "abort"]


@dataclass
class Generation:
    """What the harness keeps from one engine call: ids, logprobs and routing, never text."""

    rid: str
    prompt_ids: list[int]
    output_ids: list[int]
    output_logprobs: list[float]
    finish: FinishType
    weight_version: str | None
    routed_experts: np.ndarray | None
    """(prompt + output - 1 - routed_experts_start, L, k) int32, or None when not requested or
    the request was aborted (an aborted turn is retried or ends the trial, never trained on)."""
    routed_experts_start: int


class EngineError(RuntimeError):
    """The engine answered with an error status or a malformed body."""


def encode_routed_experts(rows: np.ndarray) -> str:
    """SGLang's wire format: base64 of little-endian int32, C order."""
    return base64.b64encode(np.ascontiguousarray(rows, dtype="<i4").tobytes()).decode("ascii")


def decode_routed_experts(payload: str, *, rows: int, num_layers: int, top_k: int) -> np.ndarray:
    """Inverse of `encode_routed_experts`, reshaped to (rows, num_layers, top_k).

    Raises EngineError when the payload size does not match the expected shape, which catches an
    engine launched with a different model or a wrong `routed_experts_start_len`.
    """
    flat = np.frombuffer(base64.b64decode(payload), dtype="<i4")
    if flat.size != rows * num_layers * top_k:
        raise EngineError(
            f"routed_experts has {flat.size} ids, expected {rows}x{num_layers}x{top_k}"
        )
    return flat.reshape(rows, num_layers, top_k).astype(np.int32)


def finish_type(reason: dict[str, Any] | None) -> FinishType:
    """Map SGLang's finish_reason dict to stop / length / abort."""
    kind = (reason or {}).get("type")
    if kind in ("stop", "length", "abort"):
        return kind
    raise EngineError(f"unknown finish_reason {reason!r}")


class EngineClient:
    """Synchronous client for an SGLang-protocol server (the real one or the local engine).

    `num_layers` and `top_k` are the policy's MoE shape, needed to decode `routed_experts`.
    """

    def __init__(self, base_url: str, *, num_layers: int, top_k: int, timeout_s: float = 600.0):
        import httpx

        self.base_url = base_url.rstrip("/")
        self.num_layers = num_layers
        self.top_k = top_k
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self._http.post(path, json=body if body is not None else {})
        if resp.status_code != 200:
            raise EngineError(f"POST {path} -> {resp.status_code}: {resp.text[:500]}")
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            return resp.text

    def generate(self, request: GenerateRequest) -> Generation:
        """One `/generate` call; sampled ids, their logprobs and (optionally) routing rows."""
        if request.stream:
            raise ValueError("EngineClient.generate does not stream")
        raw = self._post("/generate", request.model_dump(exclude_none=True))
        resp = GenerateResponse.model_validate(raw)
        meta = resp.meta_info
        logprobs: list[float] = []
        if request.return_logprob:
            pairs = meta.output_token_logprobs or []
            if [int(p[1]) for p in pairs] != resp.output_ids:
                raise EngineError("output_token_logprobs ids differ from output_ids")
            logprobs = [float(p[0]) for p in pairs]
        routing = None
        finish = finish_type(meta.finish_reason)
        if request.return_routed_experts and finish != "abort":
            if meta.routed_experts is None:
                raise EngineError(
                    "routed_experts missing: launch SGLang with --enable-return-routed-experts"
                )
            rows = len(request.input_ids) + len(resp.output_ids) - 1
            rows -= request.routed_experts_start_len
            routing = decode_routed_experts(
                meta.routed_experts, rows=rows, num_layers=self.num_layers, top_k=self.top_k
            )
        return Generation(
            rid=meta.id,
            prompt_ids=list(request.input_ids),
            output_ids=list(resp.output_ids),
            output_logprobs=logprobs,
            finish=finish,
            weight_version=meta.weight_version,
            routed_experts=routing,
            routed_experts_start=request.routed_experts_start_len,
        )

    def update_weights_from_disk(
        self, model_path: str, *, weight_version: str, abort_all_requests: bool = False
    ) -> None:
        """Load new weights from a local checkpoint directory and tag them with a version."""
        body = {
            "model_path": model_path,
            "weight_version": weight_version,
            "abort_all_requests": abort_all_requests,
            "flush_cache": True,
        }
        ans = self._post("/update_weights_from_disk", body)
        if not isinstance(ans, dict) or not ans.get("success"):
            raise EngineError(f"weight update failed: {ans!r}")

    def update_weight_version(self, new_version: str) -> None:
        self._post("/update_weight_version", {"new_version": new_version})

    def weight_version(self) -> str | None:
        """Current weight version (`/model_info`, falling back to `/get_weight_version`)."""
        for path in ("/model_info", "/get_weight_version"):
            resp = self._http.get(path)
            if resp.status_code == 200:
                return resp.json().get("weight_version")
        raise EngineError("engine reports no weight version")

    def pause_generation(self, mode: Literal["abort", "in_place", "retract"] = "abort") -> None:
        self._post("/pause_generation", {"mode": mode})

    def continue_generation(self) -> None:
        self._post("/continue_generation", {})

    def abort_request(self, rid: str | None = None, *, abort_all: bool = False) -> None:
        if rid is None and not abort_all:
            raise ValueError("abort_request needs a rid or abort_all=True")
        body: dict[str, Any] = {"abort_all": abort_all}
        if rid is not None:
            body["rid"] = rid
        self._post("/abort_request", body)

    def flush_cache(self) -> None:
        self._post("/flush_cache")

    def engine_stats(self) -> dict[str, Any]:
        """The local engine's counters (`GET /engine_stats`; not an SGLang endpoint)."""
        resp = self._http.get("/engine_stats")
        if resp.status_code != 200:
            raise EngineError(f"GET /engine_stats -> {resp.status_code}")
        return resp.json()

    def healthy(self) -> bool:
        try:
            return self._http.get("/health").status_code == 200
        except Exception:  # noqa: BLE001 - any transport failure means "not healthy"
            return False
