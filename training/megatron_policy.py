"""The policy as a megatron-core `GPTModel`: built from a Qwen3-MoE config, weights converted from
and to the HF layout, R3 through megatron's own `RouterReplay`.

What it is for: `trainer_backend = "megatron"` (training/campaign_config.py) trains the actor and
the critic as megatron models through the same `ppo_math`, `logprobs` and R3 records as the HF
backend; the engine keeps serving HF-layout checkpoints (`save_pretrained` converts back).

The model (megatron-core 0.16.1, local spec, no Transformer Engine):
- GQA attention with qk-norm (RMSNorm over the head dim, before rope), rope (non-interleaved,
  the checkpoint's theta), SwiGLU experts (`linear_fc1` = [gate; up], the HF fused layout),
  softmax top-k routing renormalized over the k (`norm_topk_prob`), tied embeddings;
- core attention is `SDPAAttention` (torch's scaled_dot_product_attention, causal): megatron's
  local `DotProductAttention` materializes (b, heads, s, s) and its default causal mask is built
  on CUDA; SDPA uses the flash / memory-efficient kernels on a GPU and also runs on the CPU;
- `moe_utils.te_general_gemm = None` before the first forward: 0.16.1's router gating references
  it without Transformer Engine (a NameError on the GPU);
- on the CPU (tests, the smoke run) three CUDA assumptions of 0.16.1 are bridged while a
  megatron model runs: `torch.cuda.current_device()` answers the CPU (rope frequencies and the
  router weights are moved to "the current device" at the first forward), the RNG tracker is
  megatron's no-op inference tracker (its dropout fork reads CUDA RNG state; dropout is 0), and
  the token dispatcher is `allgather` (`alltoall` creates a CUDA stream at construction).

Parallelism seams (single GPU here; named where they go):
- TP: `initialize_model_parallel(tensor_model_parallel_size=...)` in `ensure_runtime`; the
  conversion then shards `linear_qkv` / `linear_fc1` by output rows and `linear_proj` /
  `linear_fc2` by input columns per rank, and the chunked log-softmax needs a vocab-parallel
  logsumexp over the column-parallel output layer (`tensor_parallel.vocab_parallel_cross_entropy`
  computes exactly -logp of the targets).
- EP: `expert_model_parallel_size`; each rank converts only its `local_experts` (global expert
  id = rank * E/EP + local id); the dispatcher becomes `alltoall`; R3 records are global ids,
  unchanged.
- PP: `pipeline_model_parallel_size`; each stage owns its layers, its `RouterReplay` instances
  take the record's slice along L, and a micro-batch's replay scope spans the schedule's step
  (r3_megatron.begin_replay_step once, append_replay per micro-batch).
- Distributed optimizer / checkpoint: megatron's `DistributedOptimizer` and dist_checkpointing
  instead of torch AdamW and `optimizers.pt`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from training.r3 import FailurePolicy

if TYPE_CHECKING:
    from transformers import PretrainedConfig

_RUNTIME: dict[str, Any] = {}


# ---- the runtime ---------------------------------------------------------------------------
def megatron_available() -> str | None:
    """None when megatron-core imports, else why not (one line)."""
    try:
        import megatron.core  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure is a reason to skip
        return f"megatron-core not importable: {type(e).__name__}: {e}"
    return None


@contextlib.contextmanager
def _cuda_free() -> Iterator[None]:
    """While a megatron model is built or run on a machine without CUDA:
    `torch.cuda.current_device()` answers the CPU (megatron 0.16.1 moves rope frequencies and
    router weights to "the current device")."""
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: torch.device("cpu")  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        torch.cuda.current_device = saved  # type: ignore[method-assign]


def ensure_runtime(device: torch.device, *, seed: int = 0) -> None:
    """One-process megatron runtime, once: torch.distributed (world of 1: nccl on CUDA, gloo on
    the CPU), model-parallel groups of size 1 (the TP/PP/EP seam), the RNG tracker, and the
    Transformer-Engine-less router shim."""
    import megatron.core.transformer.moe.moe_utils as moe_utils
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import random as mrandom

    moe_utils.te_general_gemm = None  # 0.16.1 without TE: NameError in the router otherwise
    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1
        )
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=1,
            pipeline_model_parallel_size=1,
            expert_model_parallel_size=1,
        )
    kind = device.type
    if _RUNTIME.get("rng") != kind:
        if kind == "cuda":
            torch.cuda.set_device(device.index or 0)
            mrandom.initialize_rng_tracker(force_reset=True)
            mrandom.model_parallel_cuda_manual_seed(seed, force_reset_rng=True)
        else:
            mrandom.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)
        _RUNTIME["rng"] = kind


# ---- the model -------------------------------------------------------------------------------
def _rope_theta(hf: PretrainedConfig) -> float:
    params = getattr(hf, "rope_parameters", None) or {}
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return float(theta if theta is not None else getattr(hf, "rope_theta", 10000.0))


def transformer_config(
    hf: PretrainedConfig,
    *,
    bf16: bool = False,
    recompute: bool = False,
    replay: bool = True,
) -> Any:
    """megatron's `TransformerConfig` of a Qwen3-MoE HF config (float32 parameters; `bf16`
    marks a config for megatron's `Float16Module`)."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    if getattr(hf, "model_type", None) != "qwen3_moe":
        raise ValueError(
            f"the megatron backend builds Qwen3-MoE models, got model_type {hf.model_type!r}"
        )
    if list(getattr(hf, "mlp_only_layers", []) or []) or getattr(hf, "decoder_sparse_step", 1) != 1:
        raise ValueError("the megatron backend needs every layer sparse (no mlp_only_layers)")
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    norm_topk = bool(getattr(hf, "norm_topk_prob", True))
    extra: dict[str, Any] = {}
    if recompute:
        extra = {
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
        }
    return TransformerConfig(
        num_layers=hf.num_hidden_layers,
        hidden_size=hf.hidden_size,
        num_attention_heads=hf.num_attention_heads,
        num_query_groups=hf.num_key_value_heads,
        kv_channels=head_dim,
        ffn_hidden_size=hf.intermediate_size,
        moe_ffn_hidden_size=hf.moe_intermediate_size,
        num_moe_experts=hf.num_experts,
        moe_router_topk=hf.num_experts_per_tok,
        moe_router_pre_softmax=not norm_topk,
        moe_router_score_function="softmax",
        moe_router_load_balancing_type="none",
        moe_aux_loss_coeff=0.0,
        moe_token_dispatcher_type="allgather",
        moe_enable_routing_replay=replay,
        moe_grouped_gemm=False,
        moe_permute_fusion=False,
        normalization="RMSNorm",
        layernorm_epsilon=hf.rms_norm_eps,
        qk_layernorm=True,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=bool(getattr(hf, "attention_bias", False)),
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bias_activation_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
        use_cpu_initialization=True,
        perform_initialization=False,
        params_dtype=torch.float32,
        bf16=bf16,
        **extra,
    )


def _sdpa_attention_class() -> type:
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    class SDPAAttention(DotProductAttention):
        """Causal attention through torch's scaled_dot_product_attention (GQA by expanding the
        key/value groups). query [sq, b, np, hn], key/value [sk, b, ng, hn] -> [sq, b, np*hn].
        The attention mask argument is ignored: every stream is causal, right padding needs no
        mask (training/logprobs.py)."""

        def forward(  # type: ignore[override]
            self, query, key, value, attention_mask=None, attn_mask_type=None,
            attention_bias=None, packed_seq_params=None,
        ):  # fmt: skip
            if packed_seq_params is not None or attention_bias is not None:
                raise ValueError("SDPAAttention supports neither packed sequences nor a bias")
            rep = self.num_attention_heads_per_partition // self.num_query_groups_per_partition
            q = query.permute(1, 2, 0, 3)  # (b, np, sq, hn)
            k = key.permute(1, 2, 0, 3)  # (b, ng, sk, hn)
            v = value.permute(1, 2, 0, 3)
            if rep > 1:
                k = k.repeat_interleave(rep, dim=1)  # (b, np, sk, hn)
                v = v.repeat_interleave(rep, dim=1)
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.softmax_scale
            )  # (b, np, sq, hn)
            sq, b = out.shape[2], out.shape[0]
            return out.permute(2, 0, 1, 3).reshape(sq, b, -1)  # (sq, b, np*hn)

    return SDPAAttention


def build_gpt_model(hf: PretrainedConfig, *, bf16: bool = False, recompute: bool = False) -> Any:
    """An uninitialized megatron `GPTModel` (float32, on the CPU) of the Qwen3-MoE config `hf`;
    `ensure_runtime` must have run."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel

    cfg = transformer_config(hf, bf16=bf16, recompute=recompute)
    spec = get_gpt_layer_local_spec(
        num_experts=hf.num_experts, moe_grouped_gemm=False, qk_layernorm=True,
        normalization="RMSNorm",
    )  # fmt: skip
    spec.submodules.self_attention.submodules.core_attention = _sdpa_attention_class()
    with _cuda_free():
        return GPTModel(
            config=cfg,
            transformer_layer_spec=spec,
            vocab_size=hf.vocab_size,
            max_sequence_length=hf.max_position_embeddings,
            share_embeddings_and_output_weights=bool(getattr(hf, "tie_word_embeddings", True)),
            position_embedding_type="rope",
            rotary_base=_rope_theta(hf),
            pre_process=True,
            post_process=True,
        )


# ---- weight conversion (pure over state dicts) ------------------------------------------------
@dataclass(frozen=True)
class _Shape:
    layers: int
    heads: int
    groups: int
    head_dim: int
    experts: int
    tied: bool


def _shape(hf: PretrainedConfig) -> _Shape:
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    return _Shape(
        hf.num_hidden_layers, hf.num_attention_heads, hf.num_key_value_heads, head_dim,
        hf.num_experts, bool(getattr(hf, "tie_word_embeddings", True)),
    )  # fmt: skip


def hf_to_megatron(state: dict[str, torch.Tensor], hf: PretrainedConfig) -> dict[str, torch.Tensor]:
    """The megatron `GPTModel` state dict of an HF Qwen3-MoE state dict (in-memory layout:
    fused `experts.gate_up_proj` (E, 2I, H) and `experts.down_proj` (E, H, I)).

    QKV: megatron's `linear_qkv` rows are grouped per query group g: the q rows of its
    heads/groups heads, then its k rows, then its v rows (head_dim rows each)."""
    d = _shape(hf)
    per = d.heads // d.groups
    out: dict[str, torch.Tensor] = {
        "embedding.word_embeddings.weight": state["model.embed_tokens.weight"]
    }
    for i in range(d.layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        q = state[h + "self_attn.q_proj.weight"].view(d.groups, per * d.head_dim, -1)
        k = state[h + "self_attn.k_proj.weight"].view(d.groups, d.head_dim, -1)
        v = state[h + "self_attn.v_proj.weight"].view(d.groups, d.head_dim, -1)
        out[m + "self_attention.linear_qkv.weight"] = torch.cat([q, k, v], dim=1).reshape(
            -1, q.shape[-1]
        )
        out[m + "self_attention.linear_proj.weight"] = state[h + "self_attn.o_proj.weight"]
        out[m + "self_attention.q_layernorm.weight"] = state[h + "self_attn.q_norm.weight"]
        out[m + "self_attention.k_layernorm.weight"] = state[h + "self_attn.k_norm.weight"]
        out[m + "input_layernorm.weight"] = state[h + "input_layernorm.weight"]
        out[m + "pre_mlp_layernorm.weight"] = state[h + "post_attention_layernorm.weight"]
        out[m + "mlp.router.weight"] = state[h + "mlp.gate.weight"]
        gate_up = state[h + "mlp.experts.gate_up_proj"]  # (E, 2I, H): [gate; up]
        down = state[h + "mlp.experts.down_proj"]  # (E, H, I)
        for e in range(d.experts):
            out[m + f"mlp.experts.local_experts.{e}.linear_fc1.weight"] = gate_up[e]
            out[m + f"mlp.experts.local_experts.{e}.linear_fc2.weight"] = down[e]
    out["decoder.final_layernorm.weight"] = state["model.norm.weight"]
    if not d.tied:
        out["output_layer.weight"] = state["lm_head.weight"]
    return {k: v.clone() for k, v in out.items()}


def megatron_to_hf(state: dict[str, torch.Tensor], hf: PretrainedConfig) -> dict[str, torch.Tensor]:
    """Inverse of `hf_to_megatron` (for publishing megatron weights to an HF-layout engine)."""
    d = _shape(hf)
    per = d.heads // d.groups
    emb = state["embedding.word_embeddings.weight"]
    out: dict[str, torch.Tensor] = {"model.embed_tokens.weight": emb}
    for i in range(d.layers):
        h, m = f"model.layers.{i}.", f"decoder.layers.{i}."
        qkv = state[m + "self_attention.linear_qkv.weight"]
        grouped = qkv.view(d.groups, (per + 2) * d.head_dim, -1)
        q, k, v = grouped.split([per * d.head_dim, d.head_dim, d.head_dim], dim=1)
        out[h + "self_attn.q_proj.weight"] = q.reshape(-1, qkv.shape[-1])
        out[h + "self_attn.k_proj.weight"] = k.reshape(-1, qkv.shape[-1])
        out[h + "self_attn.v_proj.weight"] = v.reshape(-1, qkv.shape[-1])
        out[h + "self_attn.o_proj.weight"] = state[m + "self_attention.linear_proj.weight"]
        out[h + "self_attn.q_norm.weight"] = state[m + "self_attention.q_layernorm.weight"]
        out[h + "self_attn.k_norm.weight"] = state[m + "self_attention.k_layernorm.weight"]
        out[h + "input_layernorm.weight"] = state[m + "input_layernorm.weight"]
        out[h + "post_attention_layernorm.weight"] = state[m + "pre_mlp_layernorm.weight"]
        out[h + "mlp.gate.weight"] = state[m + "mlp.router.weight"]
        experts = f"{m}mlp.experts.local_experts."
        out[h + "mlp.experts.gate_up_proj"] = torch.stack(
            [state[f"{experts}{e}.linear_fc1.weight"] for e in range(d.experts)]
        )
        out[h + "mlp.experts.down_proj"] = torch.stack(
            [state[f"{experts}{e}.linear_fc2.weight"] for e in range(d.experts)]
        )
    out["model.norm.weight"] = state["decoder.final_layernorm.weight"]
    out["lm_head.weight"] = emb if d.tied else state["output_layer.weight"]
    return {k: v.clone() for k, v in out.items()}


def _weights_only(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A megatron state dict without its `_extra_state` entries (TE/fp8 bookkeeping)."""
    return {k: v for k, v in state.items() if not k.endswith("_extra_state")}


# ---- the policy -------------------------------------------------------------------------------
class MegatronBackbone(torch.nn.Module):
    """The GPT model up to its final norm: `(input_ids=(B, n)) -> .last_hidden_state (B, n, H)`,
    the interface of an HF decoder (what `logprobs` and the critic call)."""

    def __init__(self, gpt: Any):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids: torch.Tensor, use_cache: bool = False, **_: Any) -> Any:
        del use_cache
        batch, n = input_ids.shape
        positions = torch.arange(n, device=input_ids.device)[None, :].expand(batch, n)
        gpt = self.gpt.module if hasattr(self.gpt, "module") else self.gpt  # Float16Module
        saved = gpt.post_process
        gpt.post_process = False  # GPTModel then returns the final-normed hidden states
        try:
            with _cuda_free():
                hidden = self.gpt(input_ids=input_ids, position_ids=positions, attention_mask=None)
        finally:
            gpt.post_process = saved
        return SimpleNamespace(last_hidden_state=hidden.transpose(0, 1))  # [s, b, h] -> (b, s, h)


class MegatronHead(torch.nn.Module):
    """Hidden states (..., H) -> logits (..., V) through the GPT model's output layer (the tied
    embedding when shared)."""

    def __init__(self, gpt: Any):
        super().__init__()
        self.gpt = gpt

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        gpt = self.gpt.module if hasattr(self.gpt, "module") else self.gpt
        weight = (
            gpt.shared_embedding_or_output_weight()
            if gpt.share_embeddings_and_output_weights
            else gpt.output_layer.weight
        )
        logits, _ = gpt.output_layer(hidden.to(weight.dtype), weight=weight)
        return logits


class MegatronPolicy(torch.nn.Module):
    """A Qwen3-MoE policy as a megatron `GPTModel`, with the surface the trainer uses: `config`
    (the HF config), `get_decoder`, `get_output_embeddings`, `routing_replay`, `forward` (logits),
    `save_pretrained` (HF layout), `gradient_checkpointing_enable`; `copy.deepcopy` rebuilds it
    (megatron modules hold process groups, which do not copy)."""

    def __init__(self, hf_config: PretrainedConfig, *, device: torch.device, bf16: bool = False):
        super().__init__()
        ensure_runtime(device)
        self.config = hf_config
        self.bf16 = bf16
        gpt = build_gpt_model(hf_config, bf16=bf16)
        if bf16:
            from megatron.core.transformer.module import Float16Module

            gpt = Float16Module(gpt.config, gpt)
        self.gpt = gpt.to(device)

    @property
    def _core(self) -> Any:
        return self.gpt.module if self.bf16 else self.gpt

    # -- weights
    def load_hf_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        converted = hf_to_megatron(state, self.config)
        missing, unexpected = self._core.load_state_dict(converted, strict=False)
        missing = [k for k in missing if not k.endswith("_extra_state")]
        if missing or unexpected:
            raise ValueError(
                f"megatron weights: missing {missing[:4]}, unexpected {unexpected[:4]}"
            )

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The HF-layout state dict (float32, CPU) of the current weights."""
        state = {
            k: v.detach().float().cpu() for k, v in _weights_only(self._core.state_dict()).items()
        }
        return megatron_to_hf(state, self.config)

    def save_pretrained(self, directory: str) -> None:
        """An HF checkpoint of the current weights (what the engine loads)."""
        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_config(self.config)
        hf.load_state_dict(self.hf_state_dict(), strict=True)
        hf.save_pretrained(directory)

    def __deepcopy__(self, memo: dict[int, Any]) -> MegatronPolicy:
        twin = MegatronPolicy(self.config, device=next(self.parameters()).device, bf16=self.bf16)
        twin.gpt.load_state_dict(self.gpt.state_dict(), strict=False)
        twin.train(self.training)
        return twin

    def frozen_copy(self, *, bf16: bool) -> MegatronPolicy:
        """A copy for frozen use (reference, behaviour version): bf16 weights through megatron's
        Float16Module when `bf16`, else float32."""
        twin = MegatronPolicy(self.config, device=next(self.parameters()).device, bf16=bf16)
        twin.copy_weights_from(self)
        twin.eval()
        for p in twin.parameters():
            p.requires_grad_(False)
        return twin

    def copy_weights_from(self, src: MegatronPolicy) -> None:
        """Load `src`'s current weights (any precision, Float16Module or not) into this model."""
        self._core.load_state_dict(src._core.state_dict(), strict=False)

    def gradient_checkpointing_enable(self, **_: Any) -> None:
        """Full activation recompute per layer (megatron's own; CUDA only in 0.16.1)."""
        if next(self.parameters()).device.type != "cuda":
            raise ValueError("megatron activation recompute needs CUDA (its RNG tracker)")
        cfg = self._core.config
        cfg.recompute_granularity, cfg.recompute_method, cfg.recompute_num_layers = (
            "full", "uniform", 1,
        )  # fmt: skip
        self._core.decoder.config = cfg

    # -- the trainer's surface
    def get_decoder(self) -> MegatronBackbone:
        return MegatronBackbone(self.gpt)

    def get_output_embeddings(self) -> MegatronHead:
        return MegatronHead(self.gpt)

    def forward(self, input_ids: torch.Tensor, use_cache: bool = False, **_: Any) -> Any:
        hidden = self.get_decoder()(input_ids=input_ids).last_hidden_state  # (B, n, H)
        return SimpleNamespace(logits=self.get_output_embeddings()(hidden))  # (B, n, V)

    def replay_instances(self) -> list[Any]:
        """This model's `RouterReplay` instances in layer order (megatron keeps one global list
        of every model's instances; actor, critic and frozen copies each replay their own)."""
        from megatron.core.transformer.moe.router import TopKRouter

        return [
            m.router_replay
            for m in self.gpt.modules()
            if isinstance(m, TopKRouter) and m.router_replay is not None
        ]

    @contextlib.contextmanager
    def routing_replay(
        self, record: torch.Tensor, *, policy: FailurePolicy = "live"
    ) -> Iterator[None]:
        """Replay `record` ((n, L, k) or (B, n, L, k)) in this model's forwards inside the block:
        one micro-batch's scope, open across its backward (a recompute replays the same rows)."""
        from training.r3_megatron import append_replay, begin_replay_step, clear_replay

        instances = self.replay_instances()
        device = next(self.parameters()).device
        begin_replay_step(policy=policy, instances=instances)
        append_replay(record.to(device), instances=instances)
        try:
            yield
        finally:
            clear_replay(instances=instances)


def megatron_policy_from_hf(
    model: Any, *, device: torch.device, bf16: bool = False
) -> MegatronPolicy:
    """A `MegatronPolicy` holding an HF Qwen3-MoE model's weights."""
    policy = MegatronPolicy(model.config, device=device, bf16=bf16)
    policy.load_hf_state_dict({k: v.detach().float().cpu() for k, v in model.state_dict().items()})
    return policy


def load_megatron_policy(
    directory: Path, *, device: torch.device, bf16: bool = False
) -> MegatronPolicy:
    """A local Qwen3-MoE checkpoint as a `MegatronPolicy` (float32 parameters unless `bf16`)."""
    from training.policy import load_policy

    return megatron_policy_from_hf(load_policy(Path(directory)), device=device, bf16=bf16)
