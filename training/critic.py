"""The critic: the policy's backbone plus a scalar value head, warm-started from the policy.

The paper's critic is a separate network of the actor's size, initialized from the actor's
checkpoint and trained at the actor's learning rate; here it is a copy of the policy's decoder
(every MoE layer, live routing: R3 replays the *actor's* sampled routing, which the critic never
sampled) with a linear head initialized to zero, so its first values are 0 and its first targets
are the raw returns.

Alignment with the actor: the logprob of the token at position p comes from the hidden state at
p - 1, and so does its value: `values[p] = head(h[p - 1])`, `values[0] = 0` (never a loss
position: a stream starts with the prompt).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from training.numerics import module_device
from training.policy import load_policy


class Critic(torch.nn.Module):
    """Values of every position of a stream from a causal decoder backbone."""

    def __init__(self, backbone: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.value_head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Values from hidden states (..., H): the head runs in float32 even under autocast."""
        with torch.autocast(hidden.device.type, enabled=False):
            return self.value_head(hidden.float()).squeeze(-1)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        """token_ids: (n,) int64 -> values (n,) float32, aligned with `token_logprobs`."""
        if token_ids.dim() != 1 or token_ids.shape[0] < 1:
            raise ValueError(f"token_ids must be a non-empty (n,), got {tuple(token_ids.shape)}")
        ids = token_ids.to(module_device(self))
        out = self.backbone(input_ids=ids[None, :], use_cache=False)
        hidden = out.last_hidden_state[0]  # (n, H)
        v = self._head(hidden[:-1])  # (n-1,)
        return torch.cat([torch.zeros(1, dtype=v.dtype, device=v.device), v])  # (n,)

    def values(self, token_ids: np.ndarray, *, grad: bool = False) -> torch.Tensor:
        """`forward` on a numpy stream, without autograd unless `grad`."""
        ids = torch.as_tensor(token_ids, dtype=torch.long)  # (n,)
        with torch.enable_grad() if grad else torch.no_grad():
            return self(ids)

    def batch_values(self, streams: list[np.ndarray], *, grad: bool = False) -> torch.Tensor:
        """Values of several streams in one forward, right-padded: (B, n_max) on the critic's
        device, 0 at padding and at position 0 (padding needs no mask in a causal model, see
        batch_logprobs)."""
        from training.logprobs import padded_ids

        device = module_device(self)
        ids, lengths = padded_ids(streams, device)  # (B, n_max)
        batch, width = ids.shape
        with torch.enable_grad() if grad else torch.no_grad():
            hidden = self.backbone(input_ids=ids, use_cache=False).last_hidden_state  # (B, n, H)
            v = self._head(hidden[:, :-1])  # (B, n_max-1)
            v = torch.cat([torch.zeros(batch, 1, dtype=v.dtype, device=device), v], dim=1)
            real = (
                torch.arange(width, device=device)[None, :]
                < torch.tensor(lengths, device=device)[:, None]
            )
            return torch.where(real, v, torch.zeros_like(v))


def load_critic(policy_dir: Path, *, device: torch.device | str = "cpu") -> Critic:
    """A critic warm-started from the policy checkpoint at `policy_dir` (float32, train mode),
    on `device`.

    The language-model head is dropped (the embedding it ties to stays in the backbone)."""
    policy = load_policy(Path(policy_dir))
    critic = Critic(policy.model, policy.config.hidden_size)
    critic.to(device)
    critic.train()
    return critic
