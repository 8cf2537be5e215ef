"""SGLang's native HTTP protocol as typed records, and the one client both engines are driven by.

Field names follow SGLang (python/sglang/srt/managers/io_struct.py, entrypoints/http_server.py):

- `POST /generate` takes `GenerateReqInput` fields: `input_ids`, `sampling_params`,
  `return_logprob`, `logprob_start_len`, `return_routed_experts`, `routed_experts_start_len`,
  `rid`. It answers `{"text", "output_ids", "meta_info"}` where `meta_info` carries `id`,
  `finish_reason` (`{"type": "stop"|"length"|"abort", ...}`), `prompt_tokens`,
  `completion_tokens`, `cached_tokens`, `weight_version`, `output_token_logprobs`
  (`[[logprob, token_id, text|None], ...]`) and `routed_experts`: base64 of a little-endian
  C-order array of shape (seq_len - 1 - routed_experts_start_len, num_moe_layers, top_k) covering
  positions [routed_experts_start_len, seq_len - 1) of prompt + output, int32 unless
  `routed_experts_dtype` names a narrower wire format (newer builds: `uint8` up to 256 experts,
  `uint16` beyond). Newer builds also return `weight_versions`, the spans of output tokens
  each weight version generated (`[{"version", "start", "end"}, ...]`, end exclusive).
- `POST /update_weights_from_disk` (`model_path`, `weight_version`, `abort_all_requests`,
  `flush_cache`), `POST /update_weight_version` (`new_version`), `GET /model_info`
  (with `weight_version`; older builds: `GET /get_weight_version`).
- `POST /pause_generation` (`mode`: abort | in_place | retract), `POST /continue_generation`,
  `POST /abort_request` (`rid`, `abort_all`), `POST /flush_cache` (GET also accepted).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    import httpx


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
    routed_experts_dtype: str | None = None
    weight_versions: list[Any] | None = None
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
    weight_version_spans: list[VersionSpan] | None = None
    """Which weight version generated which output tokens, when the engine says (a request
    that decoded across a weight update has two spans); None: all of `weight_version`."""


@dataclass(frozen=True)
class VersionSpan:
    """Output tokens [start, end) of one request were generated by weights `version`."""

    version: str
    start: int
    end: int


class EngineError(RuntimeError):
    """The engine answered with an error status or a malformed body."""


def encode_routed_experts(rows: np.ndarray) -> str:
    """SGLang's wire format: base64 of little-endian int32, C order."""
    return base64.b64encode(np.ascontiguousarray(rows, dtype="<i4").tobytes()).decode("ascii")


ROUTED_EXPERTS_DTYPES = {
    "int32": "<i4",
    "uint8": "u1",
    "uint16": "<u2",
    "int16": "<i2",
    "int8": "i1",
    "uint32": "<u4",
}
"""Wire formats of `routed_experts` (little-endian), by the name in `routed_experts_dtype`."""


def decode_routed_experts(
    payload: str, *, rows: int, num_layers: int, top_k: int, dtype: str | None = None
) -> np.ndarray:
    """Inverse of `encode_routed_experts` (or of a narrower `dtype` wire format: 'uint8',
    'uint16', ...; None: int32), reshaped to (rows, num_layers, top_k) int32.

    Raises EngineError for an unknown dtype, and when the payload size does not match the
    expected shape, which catches an engine launched with a different model, a wrong
    `routed_experts_start_len`, or a payload read with the wrong width.
    """
    name = (dtype or "int32").removeprefix("torch.")
    if name not in ROUTED_EXPERTS_DTYPES:
        raise EngineError(
            f"routed_experts_dtype {dtype!r} is not one of {sorted(ROUTED_EXPERTS_DTYPES)}"
        )
    raw = base64.b64decode(payload)
    width = np.dtype(ROUTED_EXPERTS_DTYPES[name]).itemsize
    if len(raw) % width:
        raise EngineError(f"routed_experts has {len(raw)} bytes, not a multiple of {width}")
    flat = np.frombuffer(raw, dtype=ROUTED_EXPERTS_DTYPES[name])
    if flat.size != rows * num_layers * top_k:
        raise EngineError(
            f"routed_experts has {flat.size} ids, expected {rows}x{num_layers}x{top_k}"
        )
    return flat.reshape(rows, num_layers, top_k).astype(np.int32)


def version_spans(raw: list[Any] | None, n_output: int) -> list[VersionSpan] | None:
    """`meta_info.weight_versions` as spans over the output tokens: a list of
    {"version", "start", "end"} objects, or one version per output token (compressed into
    spans). None when absent. Raises EngineError when the spans do not tile the output."""
    if raw is None:
        return None
    spans: list[VersionSpan] = []
    if all(isinstance(x, dict) for x in raw):
        try:
            spans = [VersionSpan(str(x["version"]), int(x["start"]), int(x["end"])) for x in raw]
        except (KeyError, TypeError, ValueError) as e:
            raise EngineError(f"weight_versions span without version/start/end: {raw!r}") from e
    elif all(isinstance(x, str | int) for x in raw) and len(raw) == n_output:
        for i, v in enumerate(raw):
            if spans and spans[-1].version == str(v):
                spans[-1] = VersionSpan(spans[-1].version, spans[-1].start, i + 1)
            else:
                spans.append(VersionSpan(str(v), i, i + 1))
    else:
        raise EngineError(f"weight_versions is neither spans nor one version per token: {raw!r}")
    pos = 0
    for sp in spans:
        if sp.start != pos or sp.end < sp.start:
            raise EngineError(f"weight_versions spans do not tile the output: {raw!r}")
        pos = sp.end
    if pos != n_output:
        raise EngineError(f"weight_versions cover {pos} of {n_output} output tokens")
    return spans


def finish_type(reason: dict[str, Any] | None) -> FinishType:
    """Map SGLang's finish_reason dict to stop / length / abort."""
    kind = (reason or {}).get("type")
    if kind in ("stop", "length", "abort"):
        return kind
    raise EngineError(f"unknown finish_reason {reason!r}")


class EngineClient:
    """Synchronous client for SGLang-protocol servers (the real one or the local engine).

    `base_url` is where generation goes: the one server, or a router in front of several
    (`sglang_router`). `servers` lists the servers' own URLs when there are several: the
    control calls (pause, weight update, continue, flush, abort, weight version) go to every
    one of them, since a router would hand each to one server only; empty: `base_url` is the
    one server. Without a router (`base_url` None) a trial generates through `for_trial`, on the
    server a stable hash of its id picks. A failure on one server raises an EngineError that
    names it. `num_layers` and `top_k` are the policy's MoE shape, needed to decode
    `routed_experts`.
    """

    def __init__(
        self,
        base_url: str | None,
        *,
        num_layers: int,
        top_k: int,
        timeout_s: float = 600.0,
        servers: Sequence[str] = (),
    ):
        import httpx

        if base_url is None and not servers:
            raise ValueError("EngineClient needs a base_url (a server or a router) or servers")
        if len(set(servers)) != len(servers):
            raise ValueError(f"servers lists a URL twice: {list(servers)}")
        self.base_url = base_url.rstrip("/") if base_url is not None else None
        self.num_layers = num_layers
        self.top_k = top_k
        self._http = (
            httpx.Client(base_url=self.base_url, timeout=timeout_s)
            if self.base_url is not None
            else None
        )
        self.servers = [
            EngineClient(u, num_layers=num_layers, top_k=top_k, timeout_s=timeout_s)
            for u in servers
        ]
        """One client per server (empty: this client's own URL is the one server)."""

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        for s in self.servers:
            s.close()

    def for_trial(self, trial_id: str) -> EngineClient:
        """The client one trial generates through: this one (its URL is the server or the
        router), or without a router the server a stable hash of `trial_id` picks, so that a
        trial's turns extend one server's prefix cache (same pick in every process)."""
        if self.base_url is not None:
            return self
        digest = hashlib.sha256(trial_id.encode()).digest()
        return self.servers[int.from_bytes(digest[:8], "big") % len(self.servers)]

    def _client(self) -> httpx.Client:
        if self._http is None:
            raise EngineError(
                f"no router in front of {[s.base_url for s in self.servers]}: "
                "generate through for_trial(trial_id)"
            )
        return self._http

    def _post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self._client().post(path, json=body if body is not None else {})
        if resp.status_code != 200:
            raise EngineError(f"POST {path} -> {resp.status_code}: {resp.text[:500]}")
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            return resp.text

    def _on_each(self, what: str, call: Callable[[EngineClient], Any]) -> list[Any]:
        """`call` on every server in order; the first failure raises, naming its server."""
        return [_on(s, what, call) for s in self.servers or [self]]

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
                meta.routed_experts,
                rows=rows,
                num_layers=self.num_layers,
                top_k=self.top_k,
                dtype=meta.routed_experts_dtype,
            )
        spans = version_spans(meta.weight_versions, len(resp.output_ids))
        version = meta.weight_version
        if spans:
            # a request that decoded across an update is as old as its oldest span
            version = min((s.version for s in spans), key=_version_key)
        return Generation(
            rid=meta.id,
            prompt_ids=list(request.input_ids),
            output_ids=list(resp.output_ids),
            output_logprobs=logprobs,
            finish=finish,
            weight_version=version,
            routed_experts=routing,
            routed_experts_start=request.routed_experts_start_len,
            weight_version_spans=spans,
        )

    def update_weights_from_disk(
        self, model_path: str, *, weight_version: str, abort_all_requests: bool = False
    ) -> None:
        """Load new weights from a checkpoint directory on every server (in order) and tag
        them with a version; each must answer success and then report `weight_version`."""
        body = {
            "model_path": model_path,
            "weight_version": weight_version,
            "abort_all_requests": abort_all_requests,
            "flush_cache": True,
        }

        def update(s: EngineClient) -> None:
            ans = s._post("/update_weights_from_disk", body)
            if not isinstance(ans, dict) or not ans.get("success"):
                raise EngineError(f"weight update refused: {ans!r}")
            served = s._served_version()
            if served != weight_version:
                raise EngineError(f"serves weight version {served!r} after the update")

        self._on_each(f"update_weights_from_disk({model_path})", update)

    def update_weight_version(self, new_version: str) -> None:
        self._on_each(
            "update_weight_version",
            lambda s: s._post("/update_weight_version", {"new_version": new_version}),
        )

    def weight_version(self) -> str | None:
        """Current weight version (`/model_info`, falling back to `/get_weight_version`); with
        several servers, the one they all serve (an EngineError when they differ)."""
        versions = self._on_each("weight_version", lambda s: s._served_version())
        if len(set(versions)) > 1:
            by_server = {s.base_url: v for s, v in zip(self.servers, versions, strict=True)}
            raise EngineError(f"the servers serve different weight versions: {by_server}")
        return versions[0]

    def _served_version(self) -> str | None:
        for path in ("/model_info", "/get_weight_version"):
            resp = self._client().get(path)
            if resp.status_code == 200:
                return resp.json().get("weight_version")
        raise EngineError("engine reports no weight version")

    def pause_generation(self, mode: Literal["abort", "in_place", "retract"] = "abort") -> None:
        """Pause every server; when one fails, those already paused are continued (best
        effort) before the failure is raised, so a failed pause leaves none paused."""
        paused: list[EngineClient] = []

        def pause(s: EngineClient) -> None:
            s._post("/pause_generation", {"mode": mode})
            paused.append(s)

        try:
            self._on_each("pause_generation", pause)
        except EngineError:
            for s in paused:
                with contextlib.suppress(Exception):
                    s._post("/continue_generation", {})
            raise

    def continue_generation(self) -> None:
        """Continue every server, even after one fails; then raise the failures, named."""
        failed: list[EngineError] = []
        for s in self.servers or [self]:
            try:
                _on(s, "continue_generation", lambda s: s._post("/continue_generation", {}))
            except EngineError as e:
                failed.append(e)
        if failed:
            raise EngineError("; ".join(str(e) for e in failed)) from failed[0]

    def abort_request(self, rid: str | None = None, *, abort_all: bool = False) -> None:
        """Abort by rid (on every server: only the one running it knows the rid) or all."""
        if rid is None and not abort_all:
            raise ValueError("abort_request needs a rid or abort_all=True")
        body: dict[str, Any] = {"abort_all": abort_all}
        if rid is not None:
            body["rid"] = rid
        self._on_each("abort_request", lambda s: s._post("/abort_request", body))

    def flush_cache(self) -> None:
        self._on_each("flush_cache", lambda s: s._post("/flush_cache"))

    def engine_stats(self) -> dict[str, Any]:
        """The local engine's counters (`GET /engine_stats`; not an SGLang endpoint)."""
        resp = self._client().get("/engine_stats")
        if resp.status_code != 200:
            raise EngineError(f"GET /engine_stats -> {resp.status_code}")
        return resp.json()

    def healthy(self) -> bool:
        """Every server answers `/health` (a router's own health is not its servers')."""
        return all(s._healthy() for s in self.servers or [self])

    def _healthy(self) -> bool:
        try:
            return self._client().get("/health").status_code == 200
        except Exception:  # noqa: BLE001 - any transport failure means "not healthy"
            return False


def _on(server: EngineClient, what: str, call: Callable[[EngineClient], Any]) -> Any:
    """`call(server)`; any failure (an error status, a refusal, a transport error) becomes
    an EngineError naming the server."""
    try:
        return call(server)
    except Exception as e:
        raise EngineError(f"{what} failed on {server.base_url}: {e}") from e


def _version_key(v: str) -> tuple[int, int | str]:
    """Order weight versions numerically when they are integers (as the campaign publishes)."""
    return (0, int(v)) if v.isdigit() else (1, v)
