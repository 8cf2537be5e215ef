"""Long horizon: a PPO campaign whose every trajectory has 100+ tool-call turns.

Tasks: the `countdown` family (training/task_families.py): run ./tick, one command per turn,
until it prints done (`--ticks`, 100 by default); assertions at each quarter and for stopping.
The warm-started tiny policy is first fine-tuned on reference countdown trajectories (real
./tick outputs as observations, whole 100-turn streams), then trained with one-step async PPO
over concurrent sandboxes. Per step the table shows what must hold over hundreds of turns:

- turns per trajectory (>= 100) and tokens per stream;
- TITO drift in the loss region (`tito/drift_rate_max`, must be 0) and text fallbacks;
- finite losses and KL;
- memory: trainer RSS, engine RSS and the engine's prefix-cache size (bounded, not growing
  with steps).

Run:  nice -n 10 .venv/bin/python benchmarks/long_horizon.py --out runs/long-horizon
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.provenance import with_environment  # noqa: E402

COLUMNS = (
    ("rollout/turns", "turns", "{:.0f}"),
    ("rollout/tokens", "tokens", "{:.0f}"),
    ("rollout/reward", "reward", "{:.2f}"),
    ("tito/drift_rate_max", "drift", "{:.3g}"),
    ("tito/text_fallbacks", "fallbacks", "{:.0f}"),
    ("losses/policy", "policy loss", "{:.4f}"),
    ("losses/value", "value loss", "{:.4f}"),
    ("train/kl", "kl", "{:.2e}"),
    ("train/logprob_gap", "gap", "{:.4f}"),
    ("perf/trainer_rss_mb", "trainer MiB", "{:.0f}"),
    ("perf/engine_rss_mb", "engine MiB", "{:.0f}"),
    ("perf/engine_cache_tokens", "cache tok", "{:.0f}"),
    ("perf/step_seconds", "s", "{:.0f}"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "long-horizon")
    ap.add_argument("--ticks", type=int, default=100)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--per-step", type=int, default=4)
    ap.add_argument("--sft-steps", type=int, default=40)
    ap.add_argument("--temperature", type=float, default=1.0, help="the rollouts' sampling")
    ap.add_argument("--table", action="store_true", help="print the table of a finished run")
    args = ap.parse_args()
    if not args.table:
        run(args)
    metrics = json.loads((args.out / "result.json").read_text())
    print(table(metrics))


def run(args: argparse.Namespace) -> None:
    from training.campaign import run_campaign
    from training.campaign_config import CampaignConfig
    from training.harness import HarnessConfig
    from training.task_families import FAMILY_RENDER, countdown_task, task_trajectory, write_tasks
    from training.warm_start import WarmStartConfig, fine_tuned_policy, warm_started_policy

    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [countdown_task(i, args.ticks + i % 3) for i in range(args.tasks)]
    train_dir = write_tasks(tasks, args.out / "tasks")
    t0 = time.monotonic()
    sft = fine_tuned_policy(
        warm_started_policy(log=True),  # the checkout's seeds: rebuildable
        [task_trajectory(countdown_task(100 + i, args.ticks + i)) for i in range(4)],
        WarmStartConfig(steps=args.sft_steps, lr=2e-3, batch_size=1, max_tokens=16384),
        name="countdown",
        log=True,
        render=FAMILY_RENDER,
    )
    sft_s = time.monotonic() - t0
    cfg = CampaignConfig(
        campaign="long-horizon",
        runs_dir=args.out / "runs",
        store=args.out / "warehouse",
        policy_path=sft,
        train_dir=train_dir,
        steps=args.steps,
        tasks_per_step=args.per_step,
        rollout_workers=args.per_step,
        async_rollouts=True,
        eval_every=10_000,
        lr=2e-5,
        critic_lr=1e-4,
        ppo_epochs=1,
        harness=HarnessConfig(
            max_turns=args.ticks + 20,
            max_new_tokens=48,
            max_context_tokens=16384,
            temperature=args.temperature,
            command_timeout_s=30,
            seed=0,
        ),
    )
    t0 = time.monotonic()
    result = run_campaign(cfg)
    out = {
        "sft_minutes": sft_s / 60,
        "campaign_minutes": (time.monotonic() - t0) / 60,
        "run_dir": str(result.run_dir),
        "metrics": result.metrics,
    }
    (args.out / "result.json").write_text(json.dumps(with_environment(out), indent=1))


def table(out: dict) -> str:
    lines = [
        "| step | " + " | ".join(name for _, name, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for step, m in enumerate(out["metrics"]):
        cells = []
        for key, _, fmt in COLUMNS:
            v = m.get(key)
            cells.append("-" if v is None else fmt.format(v))
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    finite = all(
        math.isfinite(m[k]) for m in out["metrics"] for k in ("losses/policy", "losses/value")
        if k in m
    )  # fmt: skip
    drift = max(m.get("tito/drift_rate_max", 0.0) for m in out["metrics"])
    turns = min(m.get("rollout/turns", 0.0) for m in out["metrics"])
    lines.append("")
    lines.append(
        f"min mean turns per trajectory {turns:.0f}; max TITO drift {drift}; losses finite: "
        f"{finite}; SFT {out['sft_minutes']:.1f} min, campaign {out['campaign_minutes']:.1f} min"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
