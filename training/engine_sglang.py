"""Launching a real SGLang server (GPU only, the `sglang` optional extra) for rollouts.

The launcher only builds the command line and starts the process; the same `EngineClient`
(training/engine_protocol.py) then talks to it exactly as it talks to the local engine. R3 needs
`--enable-return-routed-experts`; TITO needs `--skip-tokenizer-init` so the server takes and
returns ids and never detokenizes on the hot path; weight versions start at `--weight-version`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
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


class SGLangUnavailable(RuntimeError):
    """sglang is not installed or there is no GPU to run it on."""


def launch_sglang(launch: SGLangLaunch, *, ready_timeout_s: float = 900.0) -> subprocess.Popen:
    """Start the server and wait until `/health` answers; the caller owns the process.

    Raises SGLangUnavailable without sglang or CUDA, TimeoutError when the server never becomes
    healthy (the process is terminated first).
    """
    import importlib.util

    if importlib.util.find_spec("sglang") is None:
        raise SGLangUnavailable("sglang is not installed (pip install 't1-forge[sglang]')")
    if shutil.which("nvidia-smi") is None:
        raise SGLangUnavailable("no NVIDIA GPU visible; use training.engine_local.LocalEngine")
    if not launch.model_path.is_dir():
        raise FileNotFoundError(f"model_path {launch.model_path} is not a directory")
    import httpx

    proc = subprocess.Popen(sglang_command(launch))
    url = f"http://{launch.host}:{launch.port}/health"
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SGLangUnavailable(f"sglang exited with {proc.returncode} during startup")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(2)
    proc.terminate()
    raise TimeoutError(f"sglang not healthy after {ready_timeout_s}s")
