"""R3, rollout routing replay: record the sampler's top-k experts, replay them in training.

Contract (paper, section 4.3): in the training forward pass the *selection* of experts at every MoE
layer comes from the record, while the *weights* are the softmax of the live router logits
renormalized over the recorded experts. The router therefore stays trainable and gradient reaches
exactly the experts that produced the sample.

A routing record is an int tensor of shape (n, L, k) for one stream (or (B, n, L, k) for a batch):
position, MoE layer, top-k slot. Missing rows are filled with -1. SGLang never returns a row for
the last position of a sequence (that token was sampled, never fed back), so a training stream
always ends with at least one missing row; `FailurePolicy` says what to do with those:
'live' computes the live top-k for them, 'error' raises `RoutingRecordError`.

HF backend: forward hooks on every `Qwen3MoeTopKRouter` (the `gate` of `Qwen3MoeSparseMoeBlock`).
The hook takes the router's own live logits and swaps its (weights, indices) outputs; the router
is wrapped, not reimplemented, and parameter names are untouched. The megatron-core backend is in
training/r3_megatron.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FailurePolicy = Literal["live", "error"]
MISSING = -1
"""Expert id marking a position/layer with no recorded selection."""


class RoutingRecordError(ValueError):
    """A routing record is missing, short or inconsistent and the policy is 'error'."""


def live_topk(
    router_logits: torch.Tensor, top_k: int, *, norm_topk: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Conventional routing: softmax over all experts, top-k, optional renormalization.

    router_logits: (n, E). Returns weights (n, k) float32 and indices (n, k) int64.
    """
    probs = F.softmax(router_logits, dim=-1, dtype=torch.float)  # (n, E)
    weights, indices = torch.topk(probs, top_k, dim=-1)  # (n, k), (n, k)
    if norm_topk:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, indices


def replay_topk(
    router_logits: torch.Tensor,
    recorded: torch.Tensor,
    *,
    norm_topk: bool,
    policy: FailurePolicy,
) -> tuple[torch.Tensor, torch.Tensor]:
    """R3 selection: recorded experts, weights from the live logits.

    router_logits: (n, E) live logits carrying gradient. recorded: (n, k) expert ids, -1 where the
    record has no selection. Returns weights (n, k) float32 and indices (n, k) int64 where
    weights[i] = softmax(router_logits[i])[recorded[i]], renormalized over the recorded experts
    when `norm_topk` (Qwen3's norm_topk_prob). Rows with any -1 follow `policy`.
    """
    n, num_experts = router_logits.shape
    if recorded.dim() != 2 or recorded.shape[0] != n:
        raise RoutingRecordError(f"record rows {tuple(recorded.shape)} do not match {n} positions")
    top_k = recorded.shape[1]
    recorded = recorded.to(device=router_logits.device, dtype=torch.long)
    missing = (recorded < 0).any(dim=-1)  # (n,)
    if bool((recorded >= num_experts).any()):
        raise RoutingRecordError(f"record names an expert >= {num_experts}")
    if bool(missing.any()):
        if policy == "error":
            first = int(missing.nonzero()[0, 0])
            raise RoutingRecordError(
                f"{int(missing.sum())} of {n} positions have no recorded routing "
                f"(first at row {first}) and the failure policy is 'error'"
            )
        if policy != "live":
            raise ValueError(f"unknown failure policy {policy!r}")
        _, live_idx = live_topk(router_logits.detach(), top_k, norm_topk=norm_topk)
        recorded = torch.where(missing[:, None], live_idx, recorded)
    if norm_topk:
        # softmax over all experts renormalized over the recorded ones == softmax over the
        # recorded logits; computing it that way gives exact-zero gradient to other experts
        picked = router_logits.gather(-1, recorded).float()  # (n, k)
        return F.softmax(picked, dim=-1), recorded
    probs = F.softmax(router_logits, dim=-1, dtype=torch.float)  # (n, E)
    return probs.gather(-1, recorded), recorded  # (n, k)


def fit_record(record: torch.Tensor, positions: int) -> torch.Tensor:
    """Pad a short (n, L, k) record with -1 rows, or reject a long one, to `positions` rows."""
    if record.dim() != 3:
        raise RoutingRecordError(f"record must be (n, L, k), got shape {tuple(record.shape)}")
    n = record.shape[0]
    if n > positions:
        raise RoutingRecordError(f"record has {n} rows for a stream of {positions} positions")
    if n == positions:
        return record
    pad = torch.full((positions - n, *record.shape[1:]), MISSING, dtype=record.dtype)
    return torch.cat([record, pad.to(record.device)], dim=0)


def _routers(model: PreTrainedModel) -> list[torch.nn.Module]:
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

    routers: list[torch.nn.Module] = [
        m for m in model.modules() if isinstance(m, Qwen3MoeTopKRouter)
    ]
    if not routers:
        raise ValueError("model has no Qwen3MoeTopKRouter; R3's HF backend needs Qwen3-MoE")
    return routers


@dataclass
class RoutingCapture:
    """Per-layer top-k indices captured over successive forward calls (batch size 1)."""

    layers: list[list[torch.Tensor]]

    def rows(self) -> torch.Tensor:
        """(n, L, k) int32: one row per position fed through the model, in feeding order."""
        per_layer = [torch.cat(chunks, dim=0) for chunks in self.layers]  # L x (n, k)
        return torch.stack(per_layer, dim=1).to(torch.int32)  # (n, L, k)


@contextmanager
def capture_routing(model: PreTrainedModel) -> Iterator[RoutingCapture]:
    """Record the top-k experts each router selects while the block is active (inference side)."""
    routers = _routers(model)
    capture = RoutingCapture(layers=[[] for _ in routers])
    handles = []
    for layer, router in enumerate(routers):

        def hook(_module, _args, output, layer=layer):
            capture.layers[layer].append(output[2].detach().cpu())

        handles.append(router.register_forward_hook(hook))
    try:
        yield capture
    finally:
        for h in handles:
            h.remove()


@dataclass
class ReplayStats:
    """What a replay pass did: positions replayed and positions that fell back to live routing."""

    replayed: int = 0
    live_fallback: int = 0


@contextmanager
def replay_routing(
    model: PreTrainedModel,
    record: torch.Tensor,
    *,
    policy: FailurePolicy = "live",
) -> Iterator[ReplayStats]:
    """Replay `record` in every forward pass of `model` inside the block (training side).

    record: (n, L, k) or (B, n, L, k) expert ids, matching the input_ids of each forward call
    exactly (the whole sequence, no KV cache). Raises RoutingRecordError on a layer-count or
    top-k mismatch, or at forward time on a position-count mismatch.
    """
    routers = _routers(model)
    if record.dim() == 3:
        record = record.unsqueeze(0)  # (1, n, L, k)
    if record.dim() != 4:
        raise RoutingRecordError(f"record must be (n, L, k) or (B, n, L, k), got {record.shape}")
    batch, n, num_layers, top_k = record.shape
    if num_layers != len(routers):
        raise RoutingRecordError(f"record has {num_layers} layers, model has {len(routers)}")
    if top_k != routers[0].top_k:
        raise RoutingRecordError(f"record has top-{top_k}, router uses top-{routers[0].top_k}")
    per_layer = [record[:, :, layer, :].reshape(batch * n, top_k) for layer in range(num_layers)]
    stats = ReplayStats()
    handles = []
    for layer, router in enumerate(routers):

        def hook(module, _args, output, layer=layer):
            logits = output[0]  # (B*n, E), live, differentiable
            rec = per_layer[layer]
            if logits.shape[0] != rec.shape[0]:
                raise RoutingRecordError(
                    f"layer {layer}: forward has {logits.shape[0]} positions, "
                    f"record has {rec.shape[0]}"
                )
            weights, indices = replay_topk(
                logits, rec, norm_topk=module.norm_topk_prob, policy=policy
            )
            if layer == 0:
                fell_back = int((rec < 0).any(dim=-1).sum())
                stats.live_fallback += fell_back
                stats.replayed += rec.shape[0] - fell_back
            return logits, weights.to(logits.dtype), indices

        handles.append(router.register_forward_hook(hook))
    try:
        yield stats
    finally:
        for h in handles:
            h.remove()


def record_bytes_per_token_per_layer(top_k: int, dtype: torch.dtype = torch.int32) -> int:
    """Storage of one position's selection at one layer: k expert ids of `dtype`."""
    return top_k * torch.empty((), dtype=dtype).element_size()
