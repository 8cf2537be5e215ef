"""Device and precision of the trainer: one typed setting, resolved once per campaign.

`resolve_numerics(device, precision)` turns the campaign's two settings into a `Numerics`:
- device `auto` is CUDA when torch sees one, else the CPU; `cuda` without one is an error;
- precision `auto` is `bf16` on CUDA and `fp32` on the CPU (so every CPU run keeps the float32
  numerics it always had). `bf16` means: the trained models (actor, critic) keep float32 master
  weights and optimizer state and run their forward under bf16 autocast; frozen copies
  (the reference policy, the held behaviour version) are stored in bf16. Log-probabilities,
  values, GAE and the losses are always computed in float32.

The policy's sampling engine has its own numerics (bf16 weights, eager attention) on purpose:
the train-inference gap it measures is real (docs/training.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

DeviceSetting = Literal["auto", "cpu", "cuda"]
PrecisionSetting = Literal["auto", "fp32", "bf16"]


@dataclass(frozen=True)
class Numerics:
    """Where the trainer's tensors live and in which dtypes it computes."""

    device: torch.device
    precision: Literal["fp32", "bf16"]

    @property
    def frozen_dtype(self) -> torch.dtype:
        """Weights of frozen copies (reference, behaviour version): bf16 under `bf16`."""
        import torch

        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @contextmanager
    def autocast(self) -> Iterator[None]:
        """bf16 autocast of the forward passes under `bf16`, nothing under `fp32`."""
        import torch

        ctx = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if self.precision == "bf16"
            else nullcontext()
        )
        with ctx:
            yield


def resolve_numerics(
    device: DeviceSetting = "auto", precision: PrecisionSetting = "auto"
) -> Numerics:
    """The `Numerics` of the two settings; ValueError for `cuda` where torch has no CUDA device
    and for an unknown setting."""
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    if precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision must be auto, fp32 or bf16, got {precision!r}")
    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise ValueError("device = 'cuda' but torch sees no CUDA device")
    kind = "cuda" if device == "cuda" or (device == "auto" and has_cuda) else "cpu"
    resolved = precision if precision != "auto" else ("bf16" if kind == "cuda" else "fp32")
    return Numerics(device=torch.device(kind), precision=resolved)


def module_device(model: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter (the CPU for a module without any)."""
    import torch

    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class MasterWeightAdamW:
    """AdamW over float32 master copies of bf16 parameters (megatron's bf16 route: the model
    runs in bf16 through its Float16Module, the optimizer keeps float32 masters and moments).

    `step()` copies each bf16 parameter's gradient into its master, steps AdamW on the masters
    and writes them back, rounded to bf16; float32 parameters (a value head) are stepped
    directly. The interface the campaign uses: `param_groups`, `zero_grad`, `step`,
    `state_dict` (masters included, so a resume keeps full precision), `load_state_dict`.
    """

    def __init__(self, params: Any, *, lr: float, weight_decay: float = 0.0):
        import torch

        self.params = [p for p in params if p.requires_grad]
        self.masters = [
            p if p.dtype == torch.float32 else p.detach().float().clone().requires_grad_(True)
            for p in self.params
        ]
        self.inner = torch.optim.AdamW(self.masters, lr=lr, weight_decay=weight_decay)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.inner.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p, m in zip(self.params, self.masters, strict=True):
            p.grad = None
            if m is not p:
                m.grad = None

    def step(self) -> None:
        for p, m in zip(self.params, self.masters, strict=True):
            if m is not p:
                m.grad = None if p.grad is None else p.grad.detach().float()
        self.inner.step()
        with _no_grad():
            for p, m in zip(self.params, self.masters, strict=True):
                if m is not p:
                    p.copy_(m)

    def state_dict(self) -> dict[str, Any]:
        return {"inner": self.inner.state_dict(), "masters": [m.detach() for m in self.masters]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.inner.load_state_dict(state["inner"])
        with _no_grad():
            for p, m, saved in zip(self.params, self.masters, state["masters"], strict=True):
                m.copy_(saved)
                if m is not p:
                    p.copy_(saved)


def _no_grad() -> Any:
    import torch

    return torch.no_grad()


def optimizer_for(params: Any, *, lr: float, weight_decay: float) -> Any:
    """AdamW for float32 parameters; `MasterWeightAdamW` when any trained parameter is bf16."""
    import torch

    params = [p for p in params if p.requires_grad]
    if any(p.dtype == torch.bfloat16 for p in params):
        return MasterWeightAdamW(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
