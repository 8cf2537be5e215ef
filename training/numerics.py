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
from typing import TYPE_CHECKING, Literal

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
