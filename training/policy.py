"""The policy: a Qwen3-MoE causal LM built from a typed config, saved to and loaded from disk.

Real checkpoints load through `load_policy` from a local path: any Qwen3-MoE (e.g. a
Qwen3-30B-A3B directory) or dense Qwen3 checkpoint, with its own tokenizer and chat template
(training/chat_tokenizer.py). R3 applies to MoE checkpoints only: a dense model has no router,
its routing shape is (0, 0) and nothing is recorded or replayed. The tiny CPU config below is
for tests and the measurement. Nothing here reaches the network: every `from_pretrained` call
passes `local_files_only=True`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, Qwen3MoeConfig

AttentionImpl = Literal["eager", "sdpa"]
POLICY_MODEL_TYPES = ("qwen3_moe", "qwen3")
"""Checkpoint families the harness, TITO and the trainer support (`config.json`'s model_type)."""


class PolicyConfig(BaseModel):
    """Shape of a Qwen3-MoE policy. Every layer is sparse (8 experts, top-2 by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vocab_size: int = Field(1024, description="BPE vocabulary size, tokenizer included")
    hidden_size: int = Field(64, description="residual width")
    num_hidden_layers: int = Field(2, description="decoder layers, all MoE")
    num_attention_heads: int = Field(4, description="query heads")
    num_key_value_heads: int = Field(2, description="grouped key/value heads")
    moe_intermediate_size: int = Field(96, description="hidden width of one expert")
    num_experts: int = Field(8, description="routed experts per layer")
    num_experts_per_tok: int = Field(2, description="top-k experts per token")
    max_position_embeddings: int = Field(16384, description="longest stream the rope supports")
    seed: int = Field(0, description="torch seed for the random initialization")

    def to_hf(self) -> Qwen3MoeConfig:
        """The equivalent `transformers.Qwen3MoeConfig`."""
        from transformers import Qwen3MoeConfig

        return Qwen3MoeConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.moe_intermediate_size * 2,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            moe_intermediate_size=self.moe_intermediate_size,
            num_experts=self.num_experts,
            num_experts_per_tok=self.num_experts_per_tok,
            max_position_embeddings=self.max_position_embeddings,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            norm_topk_prob=True,
            tie_word_embeddings=True,
            output_router_logits=False,
        )

    def digest(self) -> str:
        """Stable short hash of the config, used as a cache key."""
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def build_policy(config: PolicyConfig, *, attn: AttentionImpl = "sdpa") -> PreTrainedModel:
    """A randomly initialized Qwen3MoeForCausalLM in float32 for `config`."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    torch.manual_seed(config.seed)
    hf = config.to_hf()
    hf._attn_implementation = attn  # type: ignore[attr-defined]
    model = Qwen3MoeForCausalLM(hf)
    return model.float()


def save_policy(model: PreTrainedModel, directory: Path) -> None:
    """Write config.json and safetensors weights under `directory`."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a campaign saves every step; no progress bars
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))


def load_policy(
    directory: Path,
    *,
    dtype: torch.dtype | None = None,
    attn: AttentionImpl = "sdpa",
    device: torch.device | str | None = None,
) -> PreTrainedModel:
    """Load a Qwen3-MoE or Qwen3 checkpoint from a local directory (never the Hub), in eval mode.

    `dtype` defaults to float32 (the trainer's master weights); the local engine asks for
    bfloat16. `device` defaults to the CPU. Raises FileNotFoundError when `directory` holds no
    config.json, ValueError when the checkpoint is not of a supported family.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(f"no config.json under {directory}")
    hf = AutoConfig.from_pretrained(str(directory), local_files_only=True)
    if getattr(hf, "model_type", None) not in POLICY_MODEL_TYPES:
        raise ValueError(
            f"{directory}/config.json: model_type {hf.model_type!r} is not one of "
            f"{', '.join(POLICY_MODEL_TYPES)}"
        )
    model = AutoModelForCausalLM.from_pretrained(
        str(directory),
        local_files_only=True,
        dtype=dtype or torch.float32,
        attn_implementation=attn,
    )
    if device is not None:
        model = model.to(device)  # type: ignore[arg-type]
    model.eval()
    return model


def routing_shape(config: Any) -> tuple[int, int]:
    """(L, k) of a routing record for a model config: MoE layers and top-k; (0, 0) for a dense
    model (nothing to record or replay)."""
    experts = getattr(config, "num_experts", None) or 0
    if experts <= 0:
        return 0, 0
    layers = int(config.num_hidden_layers)
    sparse_step = int(getattr(config, "decoder_sparse_step", 1) or 1)
    dense_only = set(getattr(config, "mlp_only_layers", None) or [])
    moe = sum(1 for i in range(layers) if i not in dense_only and (i + 1) % sparse_step == 0)
    return moe, int(config.num_experts_per_tok)


def moe_layer_count(model: PreTrainedModel) -> int:
    """Number of sparse MoE blocks, i.e. the L of a routing record (n, L, k)."""
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    return sum(isinstance(m, Qwen3MoeSparseMoeBlock) for m in model.modules())
