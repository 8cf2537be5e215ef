"""R3 on megatron-core: our routing records in the layout of its native `RouterReplay`.

megatron-core (>= 0.16) ships `megatron.core.transformer.moe.router_replay.RouterReplay`: one
instance per MoE layer (created when `moe_enable_routing_replay=True`), a global action
(RECORD / REPLAY_FORWARD / REPLAY_BACKWARD) and per-layer target indices of shape
(num_tokens, topk), where megatron flattens tokens sequence-major ([s, b] -> s * b). With
`use_pre_softmax=False` (Qwen3's softmax over the top-k logits) its replay gathers the live
logits at the target experts and softmaxes over them, which is the R3 contract. This module
converts records and adds the failure policy megatron lacks: rows of -1 either raise or fall
back to the live top-k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MethodType
from typing import Any

import torch

from training.r3 import MISSING, FailurePolicy, RoutingRecordError


def records_to_megatron(record: torch.Tensor) -> list[torch.Tensor]:
    """Split a (B, n, L, k) or (n, L, k) record into L tensors of shape (n * B, k), s-major.

    This is the argument of `RouterReplay.set_replay_data`; one tensor per MoE layer, in the
    order the routers were instantiated. Ids become int64 (what `torch.gather` needs).
    """
    if record.dim() == 3:
        record = record.unsqueeze(0)
    if record.dim() != 4:
        raise RoutingRecordError(f"record must be (n, L, k) or (B, n, L, k), got {record.shape}")
    batch, n, num_layers, top_k = record.shape
    seq_major = record.permute(1, 0, 2, 3)  # (n, B, L, k): megatron's [s, b] token order
    return [
        seq_major[:, :, layer, :].reshape(n * batch, top_k).to(torch.long)
        for layer in range(num_layers)
    ]


def megatron_to_records(per_layer: Sequence[torch.Tensor], *, batch: int = 1) -> torch.Tensor:
    """Inverse of `records_to_megatron`: L tensors (n * B, k) -> (B, n, L, k) int32."""
    if not per_layer:
        raise RoutingRecordError("no layers recorded")
    tokens, top_k = per_layer[0].shape
    if tokens % batch:
        raise RoutingRecordError(f"{tokens} tokens do not split into batch {batch}")
    stacked = torch.stack([t.reshape(tokens // batch, batch, top_k) for t in per_layer], dim=2)
    return stacked.permute(1, 0, 2, 3).to(torch.int32)  # (B, n, L, k)


def _policy_replay_topk(policy: FailurePolicy) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A `get_replay_topk` that applies our failure policy to -1 rows before replaying."""
    from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    native = RouterReplay.get_replay_topk

    def get_replay_topk(
        self: Any,
        scores: torch.Tensor,
        topk: int,
        num_groups: int | None = None,
        group_topk: int | None = None,
        default_compute_topk: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        replaying = self.router_replay_action in (
            RouterReplayAction.REPLAY_FORWARD,
            RouterReplayAction.REPLAY_BACKWARD,
        )
        if replaying:
            if self.router_replay_action == RouterReplayAction.REPLAY_FORWARD:
                target = self.target_topk_idx
            else:
                target = self.replay_backward_list[0]
            if target is None:
                raise RoutingRecordError("R3 replay is on but no record was set for this layer")
            if target.shape[0] != scores.shape[0]:
                raise RoutingRecordError(
                    f"record has {target.shape[0]} tokens, router sees {scores.shape[0]}"
                )
            missing = (target < 0).any(dim=-1)
            if bool(missing.any()):
                if policy == "error":
                    raise RoutingRecordError(
                        f"{int(missing.sum())} tokens have no recorded routing (policy 'error')"
                    )
                if default_compute_topk is None:
                    raise RoutingRecordError("live fallback needs megatron's default top-k")
                _, live = default_compute_topk(scores.detach(), topk, num_groups, group_topk)
                filled = torch.where(missing[:, None], live.to(target.device), target)
                if self.router_replay_action == RouterReplayAction.REPLAY_FORWARD:
                    self.target_topk_idx = filled
                else:
                    self.replay_backward_list[0] = filled
        return native(self, scores, topk, num_groups, group_topk, default_compute_topk)

    return get_replay_topk


def install_failure_policy(instances: Sequence[Any], policy: FailurePolicy) -> None:
    """Bind the policy-aware `get_replay_topk` onto each megatron `RouterReplay` instance."""
    if policy not in ("live", "error"):
        raise ValueError(f"unknown failure policy {policy!r}")
    method = _policy_replay_topk(policy)
    for inst in instances:
        inst.get_replay_topk = MethodType(method, inst)


def begin_replay_step(
    *, policy: FailurePolicy = "live", instances: Sequence[Any] | None = None
) -> None:
    """Start a training step's replay: every instance's records are cleared, once.

    megatron's `set_target_indices` *appends* to the per-layer list that activation recompute
    (REPLAY_BACKWARD) pops from the front, so the records must be cleared once per step (without
    it the k-th step's recompute replays step 1's routing) and never between the micro-batches
    of one step (a clear there drops the earlier micro-batches' records before their recompute).
    `instances`: one model's RouterReplay instances (default: megatron's global list, which
    holds those of every model built in the process).
    """
    from megatron.core.transformer.moe.router_replay import RouterReplay

    targets = RouterReplay.global_router_replay_instances if instances is None else instances
    install_failure_policy(targets, policy)
    for inst in targets:
        inst.clear_indices()


def append_replay(record: torch.Tensor, *, instances: Sequence[Any] | None = None) -> None:
    """Hand one micro-batch's record to megatron's RouterReplay instances and switch them to
    replay its forward; the record also joins the recompute queue behind the step's earlier
    micro-batches (replayed in the same order by REPLAY_BACKWARD).

    Raises RoutingRecordError when the number of MoE layers in the record differs from the
    number of RouterReplay instances (one per router with replay enabled; `instances` as in
    `begin_replay_step`).
    """
    from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    per_layer = records_to_megatron(record)
    targets = RouterReplay.global_router_replay_instances if instances is None else instances
    if len(per_layer) != len(targets):
        raise RoutingRecordError(
            f"record has {len(per_layer)} layers, megatron has {len(targets)} RouterReplay"
        )
    for inst, layer in zip(targets, per_layer, strict=True):
        inst.set_target_indices(layer)
        inst.set_router_replay_action(RouterReplayAction.REPLAY_FORWARD)


def load_replay(record: torch.Tensor, *, policy: FailurePolicy = "live") -> None:
    """A step of one micro-batch: `begin_replay_step` then `append_replay(record)`. A step of
    several micro-batches calls `begin_replay_step` once and `append_replay` per micro-batch."""
    begin_replay_step(policy=policy)
    append_replay(record)


def clear_replay(*, instances: Sequence[Any] | None = None) -> None:
    """End a step's replay: drop every instance's records and its action (back to live)."""
    from megatron.core.transformer.moe.router_replay import RouterReplay

    targets = RouterReplay.global_router_replay_instances if instances is None else instances
    for inst in targets:
        inst.clear_indices()
        inst.clear_router_replay_action()


__all__ = [
    "MISSING",
    "append_replay",
    "begin_replay_step",
    "clear_replay",
    "install_failure_policy",
    "load_replay",
    "megatron_to_records",
    "records_to_megatron",
]
