"""What R3 costs: bytes stored per token and layer, and the throughput overhead of record/replay.

Storage is exact arithmetic (k expert ids per token per MoE layer; SGLang ships int32 on the wire,
a record can keep uint8 while experts < 256). Throughput is measured on this machine's CPU with
the tiny Qwen3-MoE policy: a forward pass with and without the recording hooks (the inference
side), and a training forward+backward with and without replay (the trainer side). The tiny model
makes hook overhead look large relative to compute; on a real model the same fixed per-layer cost
is amortized over far more FLOPs.

Run:  .venv/bin/python benchmarks/r3_cost.py [--tokens 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# (name, MoE layers, experts, top-k) of public Qwen3-MoE configs, for the storage arithmetic
REFERENCE_MODELS = (
    ("Qwen3-30B-A3B", 48, 128, 8),
    ("Qwen3-235B-A22B", 94, 128, 8),
)


def _paired(base, treated, repeats: int) -> tuple[float, float]:
    """Fastest seconds of `base` and `treated`, run alternately so machine load hits both.

    The minimum, not the median: on a shared machine every slower sample is someone else's load.
    """
    base()
    treated()  # warm-up
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeats):
        for fn, out in ((base, a), (treated, b)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return min(a), min(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    import torch

    from training.policy import PolicyConfig, build_policy
    from training.r3 import capture_routing, record_bytes_per_token_per_layer, replay_routing

    cfg = PolicyConfig()
    k, layers = cfg.num_experts_per_tok, cfg.num_hidden_layers
    print("## Storage")
    print()
    print("| model | MoE layers | top-k | int32 (wire) B/token | uint8 (record) B/token |")
    print("|---|---|---|---|---|")
    for name, n_layers, experts, top in (
        ("tiny (this repo)", layers, cfg.num_experts, k),
        *REFERENCE_MODELS,
    ):
        wire = record_bytes_per_token_per_layer(top, torch.int32) * n_layers
        small = (
            record_bytes_per_token_per_layer(top, torch.uint8) * n_layers
            if experts <= 256
            else float("nan")
        )
        print(f"| {name} | {n_layers} | {top} | {wire} | {small} |")
    print()
    print(
        f"per token per layer: {record_bytes_per_token_per_layer(k, torch.int32)} B as int32, "
        f"{record_bytes_per_token_per_layer(k, torch.uint8)} B as uint8 (top-{k}); "
        "a 32k-token trajectory on Qwen3-235B-A22B keeps "
        f"{32768 * 94 * 8 / 2**20:.1f} MiB as uint8"
    )
    print()

    torch.manual_seed(0)
    model = build_policy(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens))

    def plain_forward():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    captured = {}

    def recording_forward():
        with torch.no_grad(), capture_routing(model) as cap:
            model(input_ids=ids, use_cache=False)
        captured["rows"] = cap.rows()

    t_plain, t_record = _paired(plain_forward, recording_forward, args.repeats)
    record = captured["rows"]

    def train_step(replay: bool):
        model.zero_grad(set_to_none=True)
        if replay:
            with replay_routing(model, record, policy="live"):
                out = model(input_ids=ids, use_cache=False).logits
        else:
            out = model(input_ids=ids, use_cache=False).logits
        out.float().logsumexp(-1).mean().backward()

    t_train, t_replay = _paired(lambda: train_step(False), lambda: train_step(True), args.repeats)
    print(
        f"## Throughput ({args.tokens} tokens, best of {args.repeats}, "
        f"{torch.get_num_threads()} CPU threads)"
    )
    print()
    print("| pass | without R3 | with R3 | overhead |")
    print("|---|---|---|---|")
    print(
        f"| inference forward (record) | {args.tokens / t_plain:,.0f} tok/s | "
        f"{args.tokens / t_record:,.0f} tok/s | {100 * (t_record / t_plain - 1):+.1f}% |"
    )
    print(
        f"| training forward+backward (replay) | {args.tokens / t_train:,.0f} tok/s | "
        f"{args.tokens / t_replay:,.0f} tok/s | {100 * (t_replay / t_train - 1):+.1f}% |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
