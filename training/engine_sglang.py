"""The command line of a real SGLang server (GPU only, the `sglang` optional extra) for rollouts.

This module only builds the argv (start it with `subprocess.Popen(sglang_command(launch))` and
wait for `/health`); the same `EngineClient` (training/engine_protocol.py) then talks to it
exactly as it talks to the local engine. R3 needs
`--enable-return-routed-experts`; TITO needs `--skip-tokenizer-init` so the server takes and
returns ids and never detokenizes on the hot path; weight versions start at `--weight-version`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class SGLangLaunch(BaseModel):
    """How to launch one SGLang server for rollouts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_path: Path = Field(description="local HF checkpoint directory (never a Hub id)")
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    dtype: str = "bfloat16"
    mem_fraction_static: float = 0.8
    weight_version: str = "0"
    return_routed_experts: bool = Field(True, description="R3: --enable-return-routed-experts")
    skip_tokenizer_init: bool = Field(True, description="TITO: ids in, ids out")
    disable_radix_cache: bool = False
    extra_args: tuple[str, ...] = ()


def sglang_command(launch: SGLangLaunch, *, python: str = sys.executable) -> list[str]:
    """The argv that starts `python -m sglang.launch_server` for `launch`.

    Raises ValueError for a model path that is not a local directory, so a typo never turns into
    a Hub download on the GPU box.
    """
    if not launch.model_path.is_absolute():
        raise ValueError(f"model_path must be absolute, got {launch.model_path}")
    cmd = [
        python,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(launch.model_path),
        "--host",
        launch.host,
        "--port",
        str(launch.port),
        "--tp-size",
        str(launch.tp_size),
        "--dtype",
        launch.dtype,
        "--mem-fraction-static",
        str(launch.mem_fraction_static),
        "--weight-version",
        launch.weight_version,
    ]
    if launch.return_routed_experts:
        cmd.append("--enable-return-routed-experts")
    if launch.skip_tokenizer_init:
        cmd.append("--skip-tokenizer-init")
    if launch.disable_radix_cache:
        cmd.append("--disable-radix-cache")
    cmd.extend(launch.extra_args)
    return cmd
