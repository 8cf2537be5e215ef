"""The GPU check: one prepared run that measures the trainer's GPU path and writes JSON.

Sections (each in its own try/except, each skipped with a reason once the time budget is
spent; the JSON file is rewritten after every section, so a killed run keeps what finished):
  env         versions, the device, what the sandbox and the campaign need here
  parity      HF vs megatron on the same weights: logits (float32), logprobs under each
              backend's bf16 route, R3 replayed in megatron, a megatron backward
  r3_w1024    R3 at width: engine = the model in bf16 + eager attention with routing captured,
  r3_w2048    trainer = float32 + SDPA; mean |dlogp| without and with replay (earlier GPU
              measurement: 0.0108 -> 0.0052 at width 1024 / 8 layers / 64 experts top-8;
              0.0331 -> 0.0119 at width 2048 / 16 / 128 top-8, 4096 tokens)
  throughput  tokens/s of the trainer's fwd+bwd+AdamW step (chunked logprobs, R3, bf16) for
              the HF and the megatron backend at width 1024 / 8 layers / 64 experts top-8
  memory      per-token activation memory and time of a Qwen3-30B-A3B-shaped layer (width
              2048, 32 heads / 4 kv x 128, 128 experts top-8, expert width 768, vocabulary
              151936), with and without gradient checkpointing: the inputs of docs/training.md's
              budget
  ppo         the countdown-busy PPO arm at a wider policy (time per step, batch resolved
              rate, held-out resolved vs its SFT), when the local sandbox can run here
Peak GPU memory (torch.cuda.max_memory_allocated) is recorded per section.

  python benchmarks/gpu_check.py                      # on the GPU machine, budget 420 s
  python benchmarks/gpu_check.py --smoke              # tiny sizes on a CPU, < 2 min
  python benchmarks/gpu_check.py --sections parity r3_w1024 --budget 120

Output: --out (default $OUT/gpu_check.json when OUT is set, else
benchmarks/results/gpu_check_<date>.json), also printed at the end.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SECTIONS = ("env", "parity", "r3_w1024", "throughput", "memory", "r3_w2048", "ppo")
REFERENCE = {
    "r3_w1024": {"no_r3": 0.0108, "r3": 0.0052, "routing_differs": 0.177},
    "r3_w2048": {"no_r3": 0.0331, "r3": 0.0119, "routing_differs": 0.417},
}


@dataclass(frozen=True)
class Shape:
    """A Qwen3-MoE shape (random weights, std 0.02 as the HF init)."""

    vocab: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    experts: int
    top_k: int
    expert_width: int
    tied: bool = True

    def hf_config(self) -> Any:
        from transformers import Qwen3MoeConfig

        return Qwen3MoeConfig(
            vocab_size=self.vocab, hidden_size=self.width, intermediate_size=2 * self.expert_width,
            num_hidden_layers=self.layers, num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads, head_dim=self.head_dim,
            moe_intermediate_size=self.expert_width, num_experts=self.experts,
            num_experts_per_tok=self.top_k, max_position_embeddings=32768, decoder_sparse_step=1,
            mlp_only_layers=[], norm_topk_prob=True, tie_word_embeddings=self.tied,
            output_router_logits=False,
        )  # fmt: skip


FULL = {
    "parity": (Shape(8192, 1024, 4, 8, 4, 128, 16, 4, 512), 2, 1024),
    "r3_w1024": (Shape(1024, 1024, 8, 8, 4, 128, 64, 8, 512), 1, 4096),
    "r3_w2048": (Shape(1024, 2048, 16, 16, 4, 128, 128, 8, 512), 1, 4096),
    "throughput": (Shape(1024, 1024, 8, 8, 4, 128, 64, 8, 512), 2, 4096),
    "memory": (Shape(151936, 2048, 2, 32, 4, 128, 128, 8, 768, tied=False), 1, 4096),
}
SMOKE = {
    "parity": (Shape(512, 64, 2, 4, 2, 16, 8, 2, 32), 2, 48),
    "r3_w1024": (Shape(512, 64, 2, 4, 2, 16, 8, 2, 32), 1, 64),
    "r3_w2048": (Shape(512, 96, 2, 4, 2, 24, 8, 2, 32), 1, 64),
    "throughput": (Shape(512, 64, 2, 4, 2, 16, 8, 2, 32), 2, 64),
    "memory": (Shape(2048, 64, 2, 4, 2, 16, 8, 2, 32, tied=False), 1, 64),
}
MIN_SECONDS = {  # a section starts only with this much of the budget left (full / smoke)
    "env": (1, 1),
    "parity": (40, 5),
    "r3_w1024": (30, 3),
    "throughput": (60, 5),
    "memory": (40, 3),
    "r3_w2048": (60, 3),
    "ppo": (150, 5),
}


# ---- the report -------------------------------------------------------------------------------
class Report:
    """Sections run in order under one time budget; the JSON file is rewritten after each."""

    def __init__(self, path: Path, budget_s: float, smoke: bool, meta: dict[str, Any]):
        self.path, self.budget_s, self.smoke = path, budget_s, smoke
        self.t0 = time.monotonic()
        self.data: dict[str, Any] = {"meta": meta, "sections": {}}
        self.write()

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def run(self, name: str, fn: Callable[..., dict[str, Any]], *args: Any) -> None:
        need = MIN_SECONDS[name][1 if self.smoke else 0]
        if self.left() < need:
            row = {"status": "skipped", "reason": f"budget: {self.left():.0f} s left, needs {need}"}
        else:
            import torch

            cuda = torch.cuda.is_available()
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.monotonic()
            try:
                row = {"status": "ok", **fn(*args)}
            except Skip as e:
                row = {"status": "skipped", "reason": str(e)}
            except Exception as e:  # noqa: BLE001 - one section's failure never loses the others
                row = {
                    "status": "error",
                    "error": f"{type(e).__name__}: {e}"[:2000],
                    "traceback": traceback.format_exc()[-4000:],
                }
            row["seconds"] = round(time.monotonic() - t0, 2)
            if cuda:
                row["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
        self.data["sections"][name] = row
        why = row.get("reason") or row.get("error") or ""
        print(f"[gpu_check] {name}: {row['status']} ({row.get('seconds', 0)} s) {why}",
              file=sys.stderr, flush=True)  # fmt: skip
        self.write()

    def write(self) -> None:
        self.data["meta"]["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.path)


class Skip(Exception):
    """A section that cannot run here (its reason is the message)."""


def _device() -> Any:
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _build(shape: Shape, device: Any, *, seed: int = 0, attn: str = "sdpa") -> Any:
    """A random Qwen3-MoE of `shape`, float32, built directly on `device`."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    cfg = shape.hf_config()
    cfg._attn_implementation = attn
    with torch.device(device):
        model = Qwen3MoeForCausalLM(cfg)
    return model.float().eval()


def _facts(model: Any) -> dict[str, Any]:
    """What was actually built: parameter count, head dim, the HF experts implementation."""
    attn = model.model.layers[0].self_attn
    return {
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
        "head_dim": int(attn.head_dim),
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
    }


def _mean_gap(a: Any, b: Any) -> float:
    import torch

    ok = torch.isfinite(a) & torch.isfinite(b)
    return float((a[ok] - b[ok]).abs().mean())


# ---- sections --------------------------------------------------------------------------------
def section_env() -> dict[str, Any]:
    from importlib import metadata

    import torch

    out: dict[str, Any] = {"python": platform.python_version(), "cuda": torch.cuda.is_available()}
    for name in ("torch", "transformers", "tokenizers", "megatron-core", "pydantic", "duckdb"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out["gpu"] = {
            "name": p.name,
            "memory_gib": round(p.total_memory / 2**30, 1),
            "capability": f"{p.major}.{p.minor}",
        }
    from training.megatron_policy import megatron_available

    out["megatron"] = megatron_available() or "ok"
    out["ppo_prerequisites"] = ppo_problem() or "ok"
    out["cpus"] = os.cpu_count()
    return out


def section_parity(shape: Shape, batch: int, tokens: int) -> dict[str, Any]:
    """HF vs megatron on the same weights."""
    import torch

    from training.logprobs import batch_logprobs
    from training.megatron_policy import megatron_available, megatron_policy_from_hf
    from training.numerics import resolve_numerics
    from training.r3 import capture_routing

    if (why := megatron_available()) is not None:
        raise Skip(why)
    dev = _device()
    hf = _build(shape, dev)
    g = torch.Generator().manual_seed(1)
    streams = [torch.randint(0, shape.vocab, (tokens,), generator=g).numpy() for _ in range(batch)]
    out: dict[str, Any] = {"shape": asdict(shape), **_facts(hf), "batch": batch, "tokens": tokens}
    t0 = time.monotonic()
    mega = megatron_policy_from_hf(hf, device=dev)
    mega.eval()
    out["megatron_build_s"] = round(time.monotonic() - t0, 1)
    ids = torch.as_tensor(streams[0])[None].to(dev)
    with torch.no_grad():
        a = hf(input_ids=ids, use_cache=False).logits.float()
        b = mega(input_ids=ids).logits.float()
    out["fp32_max_abs_logit_diff"] = float((a - b).abs().max())
    out["fp32_logit_scale"] = float(a.abs().max())
    lp_hf = batch_logprobs(hf, streams)
    lp_mg = batch_logprobs(mega, streams)
    out["fp32_mean_abs_dlogp"] = _mean_gap(lp_hf, lp_mg)
    # each backend's bf16 route against float32 HF
    with resolve_numerics(str(dev.type), "bf16").autocast():  # type: ignore[arg-type]
        lp_hf16 = batch_logprobs(hf, streams)
    out["hf_bf16_autocast_vs_fp32_mean_abs_dlogp"] = _mean_gap(lp_hf16, lp_hf)
    try:
        m16 = megatron_policy_from_hf(hf, device=dev, bf16=True)
        m16.eval()
        out["megatron_bf16_float16module_vs_hf_fp32_mean_abs_dlogp"] = _mean_gap(
            batch_logprobs(m16, streams), lp_hf
        )
        del m16
    except Exception as e:  # noqa: BLE001 - reported, the other checks go on
        out["megatron_bf16_float16module_error"] = f"{type(e).__name__}: {e}"[:1000]
    # R3: the HF model's routing replayed in megatron
    with torch.no_grad(), capture_routing(hf) as cap:
        hf(input_ids=ids, use_cache=False)
    record = cap.rows().numpy()
    replayed = batch_logprobs(mega, [streams[0]], routings=[record])
    out["r3_replayed_vs_hf_mean_abs_dlogp"] = _mean_gap(replayed[0], lp_hf[0])
    moved = record.copy()
    moved[:, :, 0] = (moved[:, :, 1] + 1) % shape.experts
    out["r3_perturbed_record_mean_abs_dlogp"] = _mean_gap(
        batch_logprobs(mega, [streams[0]], routings=[moved])[0], lp_hf[0]
    )
    mega.train()
    lp = batch_logprobs(mega, [streams[0]], routings=[record], grad=True)
    torch.nansum(lp).backward()
    norms = [p.grad.float().norm() for p in mega.parameters() if p.grad is not None]
    out["megatron_backward_grad_norm"] = float(torch.stack(norms).norm())
    return out


def section_r3(shape: Shape, tokens: int, name: str) -> dict[str, Any]:
    """Engine (bf16 weights, eager attention, routing captured) vs trainer (float32, SDPA)."""
    import torch

    from training.logprobs import stream_logprobs, token_logprobs
    from training.r3 import capture_routing

    dev = _device()
    t0 = time.monotonic()
    trainer = _build(shape, dev)
    facts = _facts(trainer)
    engine = copy.deepcopy(trainer).to(torch.bfloat16)
    engine.config._attn_implementation = "eager"
    build_s = time.monotonic() - t0
    ids = torch.randint(0, shape.vocab, (tokens,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), capture_routing(engine) as cap:
        logits = engine(input_ids=ids[None].to(dev), use_cache=False).logits[0].float()
    sampler = token_logprobs(logits, ids.to(dev)).cpu()
    record = cap.rows()  # (n, L, k)
    del engine, logits
    with torch.no_grad(), capture_routing(trainer) as own:
        trainer(input_ids=ids[None].to(dev), use_cache=False)
    live_rows = own.rows()
    differs = (record.sort(-1).values != live_rows.sort(-1).values).any(-1)  # (n, L)
    live, _ = stream_logprobs(trainer, ids.numpy())
    replayed, stats = stream_logprobs(trainer, ids.numpy(), routing=record.numpy())
    out = {
        "shape": asdict(shape),
        **facts,
        "tokens": tokens,
        "build_s": round(build_s, 1),
        "routing_differs_positions": float(differs.any(-1).float().mean()),
        "routing_differs_layer_rows": float(differs.float().mean()),
        "mean_abs_dlogp_no_r3": _mean_gap(live.cpu(), sampler),
        "mean_abs_dlogp_r3": _mean_gap(replayed.cpu(), sampler),
        "replayed_positions": stats.replayed if stats else None,
        "earlier_measurement": REFERENCE.get(name),
    }
    return out


def _fwd_bwd(model: Any, streams: list, records: list, *, autocast: bool) -> None:
    """The trainer's forward and backward: chunked logprobs with R3 replayed, the replay kept
    on through the backward (a gradient-checkpointed layer replays when it is recomputed)."""
    import contextlib

    import torch

    from training.logprobs import batch_logprobs, padded_record, routing_replay

    dev = next(model.parameters()).device
    record = padded_record(records, [len(s) for s in streams])
    ctx = torch.autocast(dev.type, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    with routing_replay(model, record):
        with ctx:
            lp = batch_logprobs(model, streams, grad=True)
        (-torch.nanmean(lp)).backward()


def _train_steps(model: Any, streams: list, records: list, steps: int, *, autocast: bool) -> float:
    """Seconds per step of the trainer's path: chunked logprobs (R3) -> loss -> backward ->
    optimizer step (AdamW, or float32 masters for bf16 weights)."""
    from training.numerics import optimizer_for

    opt = optimizer_for(model.parameters(), lr=1e-6, weight_decay=0.0)
    model.train()
    times = []
    for i in range(steps + 1):
        _sync()
        t0 = time.monotonic()
        _fwd_bwd(model, streams, records, autocast=autocast)
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync()
        if i:  # the first step warms up (allocator, kernels)
            times.append(time.monotonic() - t0)
    return sum(times) / len(times)


def section_throughput(shape: Shape, batch: int, tokens: int, steps: int) -> dict[str, Any]:
    """tokens/s of fwd+bwd+AdamW through the trainer's path, HF then megatron, bf16."""
    import torch

    from training.megatron_policy import megatron_available, megatron_policy_from_hf
    from training.r3 import capture_routing

    dev = _device()
    hf = _build(shape, dev)
    g = torch.Generator().manual_seed(3)
    streams = [torch.randint(0, shape.vocab, (tokens,), generator=g).numpy() for _ in range(batch)]
    records = []
    with torch.no_grad():
        for s in streams:
            with capture_routing(hf) as cap:
                hf(input_ids=torch.as_tensor(s)[None].to(dev), use_cache=False)
            records.append(cap.rows().numpy())
    n = batch * tokens
    out: dict[str, Any] = {
        "shape": asdict(shape),
        **_facts(hf),
        "tokens_per_step": n,
        "steps_timed": steps,
    }
    bf16 = dev.type == "cuda"
    hf_cpu_state = {k: v.detach().float().cpu() for k, v in hf.state_dict().items()}
    reset = torch.cuda.reset_peak_memory_stats if torch.cuda.is_available() else (lambda: None)
    peak = (lambda: torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available() else (
        lambda: float("nan")
    )  # fmt: skip
    reset()
    s = _train_steps(hf, streams, records, steps, autocast=bf16)
    out["hf"] = {
        "seconds_per_step": s,
        "tokens_per_s": n / s,
        "peak_memory_mib": peak(),
        "precision": "bf16 autocast, fp32 masters" if bf16 else "fp32",
    }
    hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    reset()
    s = _train_steps(hf, streams, records, steps, autocast=bf16)
    out["hf_gradient_checkpointing"] = {
        "seconds_per_step": s,
        "tokens_per_s": n / s,
        "peak_memory_mib": peak(),
    }
    hf.gradient_checkpointing_disable()
    try:  # transformers' batched experts kernel instead of the per-expert loop
        hf.config._experts_implementation = "grouped_mm"
        reset()
        s = _train_steps(hf, streams, records, steps, autocast=bf16)
        out["hf_grouped_mm"] = {"seconds_per_step": s, "tokens_per_s": n / s,
                                "peak_memory_mib": peak()}  # fmt: skip
    except Exception as e:  # noqa: BLE001 - reported beside the other figures
        out["hf_grouped_mm"] = {"error": f"{type(e).__name__}: {e}"[:1000]}
    del hf
    if (why := megatron_available()) is not None:
        out["megatron"] = {"skipped": why}
        return out
    from types import SimpleNamespace

    weights = SimpleNamespace(config=shape.hf_config(), state_dict=lambda: hf_cpu_state)
    try:
        mega = megatron_policy_from_hf(weights, device=dev, bf16=bf16)
        hf_cpu_state.clear()
        reset()
        s = _train_steps(mega, streams, records, steps, autocast=False)
        out["megatron"] = {
            "seconds_per_step": s,
            "tokens_per_s": n / s,
            "peak_memory_mib": peak(),
            "precision": "bf16 Float16Module, fp32 masters" if bf16 else "fp32",
        }
    except Exception as e:  # noqa: BLE001 - reported beside the HF figures
        out["megatron"] = {
            "error": f"{type(e).__name__}: {e}"[:1500],
            "traceback": traceback.format_exc()[-3000:],
        }
    return out


def section_memory(shape: Shape, lengths: tuple[int, int], smoke: bool) -> dict[str, Any]:
    """Per-token activation memory and time of the trainer's fwd+bwd for a 30B-A3B-shaped
    model (2 of its 48 layers), from the peak at two stream lengths (the slope is per token)."""
    import torch

    from training.r3 import capture_routing

    dev = _device()
    if dev.type != "cuda" and not smoke:
        raise Skip("needs CUDA (memory is measured with torch.cuda.max_memory_allocated)")
    model = _build(shape, dev)
    model.train()
    out: dict[str, Any] = {
        "shape": asdict(shape),
        **_facts(model),
        "lengths": list(lengths),
    }
    for ckpt in (False, True):
        if ckpt:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        rows = {}
        for n in lengths:
            ids = torch.randint(0, shape.vocab, (n,), generator=torch.Generator().manual_seed(n))
            with torch.no_grad(), capture_routing(model) as cap:
                model(input_ids=ids[None].to(dev), use_cache=False)
            record = cap.rows().numpy()
            model.zero_grad(set_to_none=False)
            for p in model.parameters():  # grads allocated before the peak is taken
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            _sync()
            base = torch.cuda.memory_allocated() if dev.type == "cuda" else 0
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            t0 = time.monotonic()
            _fwd_bwd(model, [ids.numpy()], [record], autocast=dev.type == "cuda")
            _sync()
            secs = time.monotonic() - t0
            peak = (torch.cuda.max_memory_allocated() - base) if dev.type == "cuda" else 0
            rows[n] = {"activation_peak_mib": peak / 2**20, "fwd_bwd_s": secs}
        a, b = lengths
        slope = (rows[b]["activation_peak_mib"] - rows[a]["activation_peak_mib"]) / (b - a)
        out["checkpointing" if ckpt else "no_checkpointing"] = {
            "by_length": rows,
            "activation_kib_per_token": slope * 1024,
            "activation_kib_per_token_per_layer": slope * 1024 / shape.layers,
            "fwd_bwd_ms_per_1k_tokens": 1000 * rows[b]["fwd_bwd_s"] / (b / 1000),
        }
    return out


# ---- the PPO arm ------------------------------------------------------------------------------
def ppo_problem() -> str | None:
    """Why the countdown-busy PPO arm cannot run here (None: it can)."""
    try:
        import duckdb  # noqa: F401
    except Exception:  # noqa: BLE001
        return "duckdb not importable (the campaign records its rows in the warehouse)"
    try:
        from sandbox.local import local_backend_problem
    except Exception as e:  # noqa: BLE001
        return f"sandbox not importable: {type(e).__name__}: {e}"
    problem = local_backend_problem()
    if problem is not None:
        return f"local sandbox: {problem}"
    from sandbox.launcher import helper_path
    from sandbox.local import private_state_dir

    try:
        if helper_path(str(private_state_dir())) is None:
            return "local sandbox: no C compiler to build sandbox/helper.c (cc / gcc)"
    except OSError as e:
        return f"local sandbox state dir: {e}"
    return None


def section_ppo(args: argparse.Namespace) -> dict[str, Any]:
    """Warm start and countdown SFT of a wider policy on the device, its held-out evaluation,
    then the countdown-busy PPO arm for as many steps as the budget allows, evaluated the same
    way. Smoke: tiny sizes, 1 step."""
    if (why := ppo_problem()) is not None:
        raise Skip(why)
    if args.smoke and not args.ppo_smoke_run:
        raise Skip("smoke: prerequisites checked (all present); the arm runs with --ppo-smoke-run")
    from benchmarks.ppo_learning import SFT_LR, SFT_STEPS, family_splits
    from training.campaign import run_campaign
    from training.campaign_config import load_campaign_config
    from training.evaluation import evaluate_policy
    from training.policy import PolicyConfig
    from training.task_families import FAMILY_RENDER, task_trajectory, write_tasks
    from training.warm_start import WarmStartConfig, fine_tuned_policy, warm_started_policy

    t_start = time.monotonic()
    deadline = t_start + args.ppo_seconds
    dev = "cuda" if _device().type == "cuda" else "cpu"
    policy = PolicyConfig() if args.smoke else PolicyConfig(
        hidden_size=args.ppo_width, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=4, moe_intermediate_size=args.ppo_width, num_experts=16,
        num_experts_per_tok=4,
    )  # fmt: skip
    warm = WarmStartConfig() if args.smoke else WarmStartConfig(batch_size=8)
    out: dict[str, Any] = {"policy": policy.model_dump(), "device": dev}
    t0 = time.monotonic()
    base = warm_started_policy(policy, warm, reuse_stale=args.smoke, device=dev)
    out["warm_start_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    splits = family_splits("countdown-busy", rl=64, heldout=args.ppo_heldout)
    sft = fine_tuned_policy(
        base, [task_trajectory(t) for t in splits.sft],
        WarmStartConfig(steps=SFT_STEPS, lr=SFT_LR, batch_size=8, seed=0),
        name="countdown", render=FAMILY_RENDER, device=dev,
    )  # fmt: skip
    out["sft_s"] = round(time.monotonic() - t0, 1)
    work = Path(args.ppo_dir)
    heldout_dir = write_tasks(splits.heldout, work / "tasks" / "heldout")
    rl_dir = write_tasks(splits.rl, work / "tasks" / "rl")
    cfg0 = load_campaign_config("countdown-busy")
    t0 = time.monotonic()
    summary, _ = evaluate_policy(
        sft, splits.heldout, samples=1, harness=cfg0.harness, workers=args.ppo_workers,
        seed=0, benchmark=cfg0.eval_benchmark, device=dev,
    )  # fmt: skip
    out["sft_heldout"] = {
        "resolved": summary.resolved_rate,
        "dense": summary.dense_score,
        "samples": summary.samples,
        "seconds": round(time.monotonic() - t0, 1),
    }
    left = deadline - time.monotonic()
    if left < 30:
        out["ppo"] = {"skipped": f"budget: {left:.0f} s left after SFT and its evaluation"}
        return out
    cfg = load_campaign_config(
        "countdown-busy", campaign="gpu-check", runs_dir=work / "runs", store=work / "warehouse",
        policy_path=sft, train_dir=rl_dir, eval_dir=heldout_dir, seed=0, eval_at_start=False,
        eval_every=10**6, eval_samples=1, steps=args.ppo_steps,
        time_budget_s=max(10.0, left - 60), device=dev, rollout_workers=args.ppo_workers,
        tasks_per_step=args.ppo_batch, critic_warmup_steps=1 if not args.smoke else 0,
    )  # fmt: skip
    t0 = time.monotonic()
    result = run_campaign(cfg)
    steps = result.metrics
    out["ppo"] = {
        "steps": len(steps),
        "trajectories_per_step": cfg.batch_size,
        "seconds": round(time.monotonic() - t0, 1),
        "step_seconds": [round(m["perf/step_seconds"], 2) for m in steps],
        "rollout_seconds": [round(m["rollout/seconds"], 2) for m in steps],
        "batch_resolved_rate": [m["rollout/resolved_rate"] for m in steps],
        "actor_updated": [m["train/actor_updated"] for m in steps],
        "heldout_resolved": result.evaluations[-1].resolved_rate if result.evaluations else None,
        "heldout_dense": result.evaluations[-1].dense_score if result.evaluations else None,
        "note": "a time-boxed arm, not the learning protocol (20 steps x 32, 3 seeds)",
    }
    return out


# ---- main ----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (runs on a CPU, < 2 min)")
    ap.add_argument("--budget", type=float, default=420.0, help="total seconds for all sections")
    ap.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per throughput figure")
    ap.add_argument("--ppo-seconds", type=float, default=None, help="PPO arm's own deadline")
    ap.add_argument("--ppo-width", type=int, default=256)
    ap.add_argument("--ppo-steps", type=int, default=20)
    ap.add_argument("--ppo-batch", type=int, default=32)
    ap.add_argument("--ppo-workers", type=int, default=12)
    ap.add_argument("--ppo-heldout", type=int, default=40)
    ap.add_argument("--ppo-dir", default=None)
    ap.add_argument("--ppo-smoke-run", action="store_true", help="run the PPO arm under --smoke")
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps = 1
        args.ppo_steps, args.ppo_batch, args.ppo_workers, args.ppo_heldout = 1, 2, 2, 2
    if args.out is None:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        args.out = (
            Path(os.environ["OUT"]) / "gpu_check.json"
            if os.environ.get("OUT")
            else REPO / "benchmarks" / "results" / f"gpu_check_{stamp}.json"
        )
    if args.ppo_dir is None:
        args.ppo_dir = "/tmp/gpu-check-ppo"
    sizes = SMOKE if args.smoke else FULL
    meta = {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "smoke": args.smoke,
        "budget_s": args.budget,
        "argv": sys.argv[1:],
        "host": platform.node(),
    }
    report = Report(args.out, args.budget, args.smoke, meta)
    for name in SECTIONS:
        if name not in args.sections:
            continue
        if name == "env":
            report.run(name, section_env)
        elif name == "parity":
            report.run(name, section_parity, *sizes["parity"])
        elif name in ("r3_w1024", "r3_w2048"):
            shape, _, tokens = sizes[name]
            report.run(name, section_r3, shape, tokens, name)
        elif name == "throughput":
            shape, batch, tokens = sizes["throughput"]
            report.run(name, section_throughput, shape, batch, tokens, args.steps)
        elif name == "memory":
            shape, _, tokens = sizes["memory"]
            report.run(name, section_memory, shape, (tokens, 2 * tokens), args.smoke)
        elif name == "ppo":
            if args.ppo_seconds is None:
                args.ppo_seconds = max(0.0, report.left() - 5)
            report.run(name, section_ppo, args)
    print(json.dumps(report.data, indent=1, default=str))
    return report.data


if __name__ == "__main__":
    main()
