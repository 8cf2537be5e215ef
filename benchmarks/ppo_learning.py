"""Does the campaign learn? SFT warm start vs PPO (dense and binary reward) on held-out tasks.

The `fileops` family (training/task_families.py) is generated with varied parameters: every
name an agent must type comes from a word list split in two, and the held-out tasks use only
words that never occur in a training task, so memorizing training commands scores nothing there.
Each task has several assertions (dense reward 0..4).

Stages:
  1. SFT, once: the warm-started tiny policy fine-tuned on the reference trajectories of the
     `sft` split (training/warm_start.fine_tuned_policy): the checkpoint both arms start from.
  2. Per seed s (3 by default), PPO dense: `run_campaign` with the `fileops-learning` preset
     from that checkpoint on the `rl` split (a task directory), reward = passing assertions,
     for at most the preset's time budget. It evaluates the SFT weights first (step -1, the
     SFT row of seed s: same checkpoint, that seed's evaluation draws) and then every
     `eval_every` steps on the `heldout` directory, k samples per task.
  3. Per seed s, PPO binary: the same with reward = 1 for a resolved trial (the paper's
     ablation).
The table compares the final held-out dense score and resolved rate with the SFT checkpoint's,
and says whether PPO's worst seed beats SFT's best (a margin outside the spread of the seeds).

Run (about 1.5 h on two idle cores; each PPO run stops after its time budget):
  nice -n 10 .venv/bin/python benchmarks/ppo_learning.py --out runs/ppo-learning
  .venv/bin/python benchmarks/ppo_learning.py --out runs/ppo-learning --table   # print only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ARMS = ("sft", "ppo-dense", "ppo-binary")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "ppo-learning")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--preset", default="fileops-learning", help="campaign preset of both arms")
    ap.add_argument("--sft-tasks", type=int, default=150)
    ap.add_argument("--rl-tasks", type=int, default=400)
    ap.add_argument("--heldout-tasks", type=int, default=40)
    ap.add_argument("--sft-steps", type=int, default=110)
    ap.add_argument("--sft-lr", type=float, default=2e-3)
    ap.add_argument("--sft-only", action="store_true", help="build the SFT checkpoint and stop")
    ap.add_argument("--minutes", type=float, default=None, help="override the PPO time budget")
    ap.add_argument("--arms", nargs="+", default=["ppo-dense", "ppo-binary"])
    ap.add_argument("--table", action="store_true", help="print the table of finished runs")
    args = ap.parse_args()
    results = args.out / "results.json"
    if args.sft_only:
        print(sft_checkpoint(args))
        return
    if not args.table:
        run(args, results)
    rows = json.loads(results.read_text())
    print(table(rows))
    curves(rows, args.out / "ppo_learning.png")
    print(f"curves: {args.out / 'ppo_learning.png'}")


def splits_of(args: argparse.Namespace):
    from training.task_families import fileops_splits

    return fileops_splits(sft=args.sft_tasks, rl=args.rl_tasks, heldout=args.heldout_tasks)


def sft_checkpoint(args: argparse.Namespace) -> Path:
    """The SFT checkpoint both PPO arms start from (cached by its recipe)."""
    from training.task_families import FAMILY_RENDER, task_trajectory
    from training.warm_start import WarmStartConfig, fine_tuned_policy, warm_started_policy

    return fine_tuned_policy(
        warm_started_policy(reuse_stale=True),
        [task_trajectory(t) for t in splits_of(args).sft],
        WarmStartConfig(steps=args.sft_steps, lr=args.sft_lr, batch_size=8, seed=0),
        name="fileops",
        log=True,
        render=FAMILY_RENDER,
    )


def run(args: argparse.Namespace, results: Path) -> None:
    from training.campaign import run_campaign
    from training.campaign_config import load_campaign_config
    from training.task_families import write_tasks

    args.out.mkdir(parents=True, exist_ok=True)
    rows = json.loads(results.read_text()) if results.is_file() else []
    done = {(r["arm"], r["seed"]) for r in rows}
    splits = splits_of(args)
    rl_dir = write_tasks(splits.rl, args.out / "tasks" / "rl")
    heldout_dir = write_tasks(splits.heldout, args.out / "tasks" / "heldout")
    t0 = time.monotonic()
    sft = sft_checkpoint(args)
    sft_s = json.loads((sft / "warm_start.json").read_text())["seconds"]
    for seed in args.seeds:
        for arm in args.arms:
            if (arm, seed) in done:
                continue
            cfg = load_campaign_config(
                args.preset,
                campaign=f"{arm}-s{seed}",
                runs_dir=args.out / "runs",
                store=args.out / "warehouse",
                policy_path=sft,
                train_dir=rl_dir,
                eval_dir=heldout_dir,
                seed=seed,
                reward="binary" if arm == "ppo-binary" else "dense",
                eval_at_start=arm == "ppo-dense",
                time_budget_s=args.minutes * 60 if args.minutes else None,
            )
            t0 = time.monotonic()
            result = run_campaign(cfg)
            wall = time.monotonic() - t0
            evals = [
                {
                    "step": e.step,
                    "dense": e.dense_score,
                    "resolved": e.resolved_rate,
                    "samples": e.samples,
                    "stop_rate": e.stop_rate,
                    "turn_limit_rate": e.turn_limit_rate,
                    "per_category": {k: vars(v) for k, v in e.per_category.items()},
                }
                for e in result.evaluations
            ]
            if arm == "ppo-dense":
                first = evals[0]
                rows.append({"arm": "sft", "seed": seed, "dense": first["dense"],
                             "resolved": first["resolved"], "stop_rate": first["stop_rate"],
                             "turn_limit_rate": first["turn_limit_rate"], "steps": 0,
                             "minutes": sft_s / 60, "run_dir": str(sft),
                             "evals": [first]})  # fmt: skip
            rows.append(
                {"arm": arm, "seed": seed, "dense": evals[-1]["dense"],
                 "resolved": evals[-1]["resolved"], "stop_rate": evals[-1]["stop_rate"],
                 "turn_limit_rate": evals[-1]["turn_limit_rate"], "steps": len(result.metrics),
                 "minutes": wall / 60, "run_dir": str(result.run_dir), "evals": evals}
            )  # fmt: skip
            results.write_text(json.dumps(rows, indent=1))
            last = evals[-1]
            print(
                f"{arm} seed {seed}: dense {last['dense']:.2f} resolved {last['resolved']:.3f} "
                f"in {wall / 60:.1f} min",
                flush=True,
            )


def table(rows: list[dict]) -> str:
    """Per-run rows, then mean and [min, max] over seeds per arm, then the margin verdict.

    Beside the score: the stop rate (held-out trials the policy ended by answering) and the
    turn-limit rate, so a gain bought by running out the clock is visible ('-' for results
    cached before they were recorded)."""
    lines = [
        "| arm | seed | held-out dense score | resolved % | stop % | turn limit % | PPO steps "
        "| minutes |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def pct(r: dict, key: str) -> str:
        return f"{100 * r[key]:.1f}" if r.get(key) is not None else "-"

    for r in sorted(rows, key=lambda r: (ARMS.index(r["arm"]), r["seed"])):
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r['dense']:.2f} | {100 * r['resolved']:.1f} | "
            f"{pct(r, 'stop_rate')} | {pct(r, 'turn_limit_rate')} | "
            f"{r['steps']} | {r['minutes']:.1f} |"
        )
    lines += ["", "| arm | seeds | dense mean [min, max] | resolved % mean [min, max] |",
              "|---|---|---|---|"]  # fmt: skip
    span: dict[str, dict[str, tuple[float, float, float]]] = {}
    for arm in ARMS:
        rs = [r for r in rows if r["arm"] == arm]
        if not rs:
            continue
        d = [r["dense"] for r in rs]
        v = [100 * r["resolved"] for r in rs]
        span[arm] = {
            "dense": (sum(d) / len(d), min(d), max(d)),
            "resolved": (sum(v) / len(v), min(v), max(v)),
        }
        lines.append(
            f"| {arm} | {len(rs)} | {span[arm]['dense'][0]:.2f} [{min(d):.2f}, {max(d):.2f}] | "
            f"{span[arm]['resolved'][0]:.1f} [{min(v):.1f}, {max(v):.1f}] |"
        )
    if "sft" in span:
        lines.append("")
        for arm in ("ppo-dense", "ppo-binary"):
            if arm not in span:
                continue
            for metric in ("dense", "resolved"):
                worst, best_sft = span[arm][metric][1], span["sft"][metric][2]
                verdict = "above" if worst > best_sft else "NOT above"
                lines.append(
                    f"{arm} {metric}: worst seed {worst:.2f} is {verdict} the best SFT seed "
                    f"{best_sft:.2f} (margin {worst - best_sft:+.2f})"
                )
    return "\n".join(lines)


def curves(rows: list[dict], path: Path) -> None:
    """Held-out dense score and resolved rate against PPO step, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"ppo-dense": "tab:blue", "ppo-binary": "tab:orange"}
    for r in rows:
        if r["arm"] not in colors:
            continue
        steps = [max(0, e["step"] + 1) for e in r["evals"]]
        for ax, key, scale in ((axes[0], "dense", 1.0), (axes[1], "resolved", 100.0)):
            label = f"{r['arm']} seed {r['seed']}"
            ax.plot(steps, [scale * e[key] for e in r["evals"]], color=colors[r["arm"]],
                    marker="o", markersize=3, alpha=0.8, label=label)  # fmt: skip
    for ax, title in ((axes[0], "held-out dense score"), (axes[1], "held-out resolved %")):
        ax.set_xlabel("PPO step (0 = SFT checkpoint)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
