"""Does the campaign learn? SFT at three temperatures vs PPO (dense, binary) vs a placebo.

Families (training/task_families.py): `fileops` (the agent maps todo's announcements to
commands; names held out by word) and `fileops-locked` (the same tasks with todo locked 1-3
times; the SFT data never meets a lock, so recovering from one, sourcing todo again instead of
acting on a stale $ITEM, is something only RL can teach); both start from the same SFT
checkpoint. `countdown-busy` (run ./tick until done; in the rl and held-out tasks it fails once
or twice, "busy", and the SFT data never shows a failure, so calling it again instead of giving
up is what RL must teach; held-out lengths never occur in training) starts from its own. A
checkpoint is the `sft` split's reference trajectories, built once and cached by its recipe.

Arms, each run for every seed s (paired: arm X and arm Y of seed s share the task order, the
training rollouts' sampling seeds and the evaluation draws):
  sft-t0.5, sft-t0.7, sft-t1.0   the SFT checkpoint evaluated at that sampling temperature
                                 (a gain at T = 1 that a lower temperature also delivers is
                                 sharpening, not learning)
  ppo-dense                      run_campaign, reward = passing assertions
  ppo-binary                     reward = 1 for a resolved trial
  placebo                        ppo-dense with the rewards shuffled within each batch: the
                                 same update size and noise, no true gradient
  rejection-sft                  the cheap alternative, same budget in trajectories: sample
                                 steps x batch trajectories of the rl split with the SFT
                                 checkpoint (preset temperature), keep the resolved ones, and
                                 fine-tune the SFT checkpoint on their sampled tokens (TITO
                                 streams, loss on the sampled ids; the SFT recipe's steps,
                                 batch and learning rate); evaluated like the PPO arms
The PPO arms run the same number of steps (`--steps`, equal budget in trajectories; or the
preset's time budget) and are evaluated once at the end on the held-out split at T = 1.0,
`--heldout-tasks` x `--eval-samples` samples (default 100 x 3: the standard error of a resolved
rate is at most 2.9 points).

Each (arm, seed) result is its own JSON file under --out/results/, written when it finishes; a
rerun skips what is there (resume after a kill). The verdict (`verdict`): "gain shown" only when
PPO-dense's mean over seeds beats both the best SFT temperature and the placebo by more than the
larger of 2 standard errors of the difference and the seed spread (the larger of the two arms'
max - min over seeds); every arm compared needs every seed, and every row the same SFT
checkpoint: each row records its checkpoint's weights digest (`checkpoint`), a cached row of
another checkpoint (a rebuild with other library versions gives other weights) is run again,
and the verdict refuses rows of two checkpoints.

Run (one arm at a time, cached; `--table` only prints):
  nice -n 10 python benchmarks/ppo_learning.py --family fileops-locked --out runs/ppo-locked \\
      --steps 40
  python benchmarks/ppo_learning.py --out runs/ppo-locked --table
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.provenance import with_environment  # noqa: E402

SFT_TEMPERATURES = (0.5, 0.7, 1.0)
SFT_ARMS = tuple(f"sft-t{t}" for t in SFT_TEMPERATURES)
PPO_ARMS = ("ppo-dense", "ppo-binary", "placebo")
REJECTION_ARM = "rejection-sft"
ARMS = SFT_ARMS + PPO_ARMS + (REJECTION_ARM,)
PROTOCOL_STEPS = 20
"""PPO steps of the documented protocol: the rejection arm samples this many batches unless
--steps says otherwise (equal budget in trajectories)."""
PRESETS = {
    "fileops": "fileops-conservative-nocancel",
    "fileops-locked": "fileops-locked",
    "countdown-busy": "countdown-busy",
}
SFT_TASKS, SFT_STEPS, SFT_LR = 150, 110, 2e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "ppo-learning")
    ap.add_argument("--family", default="fileops-locked", choices=sorted(PRESETS))
    ap.add_argument("--preset", default=None, help="campaign preset (default: the family's)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    ap.add_argument("--rl-tasks", type=int, default=400)
    ap.add_argument("--heldout-tasks", type=int, default=100)
    ap.add_argument("--eval-samples", type=int, default=3)
    ap.add_argument("--steps", type=int, default=None, help="PPO steps of every PPO arm")
    ap.add_argument("--minutes", type=float, default=None, help="override the PPO time budget")
    ap.add_argument("--workers", type=int, default=6, help="trials at once (SFT evaluations)")
    ap.add_argument("--sft-only", action="store_true", help="build the SFT checkpoint and stop")
    ap.add_argument("--table", action="store_true", help="print the table of finished runs")
    ap.add_argument(
        "--reference", action="store_true",
        help="run each held-out task's reference commands in a sandbox and print the scores",
    )  # fmt: skip
    args = ap.parse_args()
    if args.sft_only:
        print(sft_checkpoint(args.family))
        return
    if args.reference:
        print(
            reference_scores(family_splits(args.family, rl=0, heldout=args.heldout_tasks).heldout)
        )
        return
    results = args.out / "results"
    if not args.table:
        current = checkpoint_id(sft_checkpoint(args.family))
        cached = load_results(results)
        other = [r for r in cached if r.get("checkpoint") != current]
        if other:
            print(f"{len(other)} cached rows are of another SFT checkpoint than {current}: "
                  "running them again", flush=True)  # fmt: skip
        for arm, seed in pending(args.arms, args.seeds, of_checkpoint(cached, current)):
            row = run_arm(args, arm, seed)
            save_result(results, row)
            print(
                f"{arm} seed {seed}: dense {row['dense']:.2f} resolved "
                f"{100 * row['resolved']:.1f}% (n {row['samples']}) in {row['minutes']:.1f} min",
                flush=True,
            )
    rows = load_results(results)
    print(table(rows))
    print()
    print(verdict(rows, seeds=args.seeds))


# ---- the checkpoint and the tasks -----------------------------------------------------------
def family_splits(family: str, *, sft: int = SFT_TASKS, rl: int = 400, heldout: int = 100):
    from training.task_families import family_splits as splits

    return splits(family, sft=sft, rl=rl, heldout=heldout)


def sft_checkpoint(family: str) -> Path:
    """The SFT checkpoint every arm starts from (cached by its recipe; the fileops families
    share it: fileops-locked's sft split is fileops's), fine-tuned from the warm start of the
    checkout's seeds: never a cached one of older seeds, so a row can be rebuilt from its
    commit (`warm_start` in each row names the recipe key)."""
    from training.task_families import FAMILY_RENDER, task_trajectory
    from training.warm_start import WarmStartConfig, fine_tuned_policy, warm_started_policy

    return fine_tuned_policy(
        warm_started_policy(log=True),
        [task_trajectory(t) for t in family_splits(family, rl=0, heldout=0).sft],
        WarmStartConfig(steps=SFT_STEPS, lr=SFT_LR, batch_size=8, seed=0),
        name="countdown" if family.startswith("countdown") else "fileops",
        log=True,
        render=FAMILY_RENDER,
    )


class _ReferenceAgent:
    """Types a task's reference commands into its session, one per turn."""

    name = "reference"

    def __init__(self, commands: list[str]):
        self.commands = commands

    def run(self, sandbox, task, deadline):
        from sandbox import AgentOutcome

        for c in self.commands:
            sandbox.session().run(c, timeout_s=10)
        return AgentOutcome(exit_code=0)


def reference_scores(tasks) -> str:
    """Mean passing assertions and resolved share of the reference commands on `tasks`."""
    from sandbox import run_trial
    from training.task_families import task_trajectory

    results = [
        run_trial(t, _ReferenceAgent([s.command for s in task_trajectory(t).steps])) for t in tasks
    ]
    dense = sum(r.passed for r in results) / len(results)
    resolved = sum(r.resolved for r in results) / len(results)
    return f"reference on {len(results)} tasks: dense {dense:.2f}, resolved {100 * resolved:.1f}%"


def checkpoint_id(path: Path) -> str:
    """Digest of a checkpoint's weights (16 hex): what makes two rows' starting points equal."""
    from training.warm_start import weights_digest

    return weights_digest(path)


# ---- one (arm, seed) ------------------------------------------------------------------------
def run_arm(args: argparse.Namespace, arm: str, seed: int) -> dict:
    """Run one arm for one seed; the result row (what `save_result` writes)."""
    from training.campaign_config import load_campaign_config
    from training.task_families import write_tasks
    from training.warm_start import warm_started_policy

    preset = args.preset or PRESETS[args.family]
    splits = family_splits(args.family, rl=args.rl_tasks, heldout=args.heldout_tasks)
    heldout_dir = write_tasks(splits.heldout, args.out / "tasks" / "heldout")
    sft = sft_checkpoint(args.family)
    checkpoint = checkpoint_id(sft)
    base = load_campaign_config(preset, seed=seed, eval_samples=args.eval_samples)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    extra: dict = {}
    if arm in SFT_ARMS:
        from training.evaluation import evaluate_policy

        temperature = SFT_TEMPERATURES[SFT_ARMS.index(arm)]
        summary, _ = evaluate_policy(
            sft, splits.heldout, samples=args.eval_samples,
            harness=base.harness.model_copy(update={"temperature": temperature}),
            workers=args.workers, seed=seed, benchmark=base.eval_benchmark,
        )  # fmt: skip
        steps, run_dir = 0, repo_relative(sft)
    elif arm == REJECTION_ARM:
        from training.evaluation import evaluate_policy

        policy, extra = rejection_sft(args, sft, splits.rl, base, seed)
        summary, _ = evaluate_policy(
            policy, splits.heldout, samples=args.eval_samples, harness=base.harness,
            workers=args.workers, seed=seed, benchmark=base.eval_benchmark,
        )  # fmt: skip
        steps, run_dir = 0, repo_relative(policy)
    else:
        from training.campaign import run_campaign

        rl_dir = write_tasks(splits.rl, args.out / "tasks" / "rl")
        cfg = load_campaign_config(
            preset,
            campaign=f"{arm}-s{seed}",
            runs_dir=args.out / "runs",
            store=args.out / "warehouse",
            policy_path=sft,
            train_dir=rl_dir,
            eval_dir=heldout_dir,
            seed=seed,
            reward="binary" if arm == "ppo-binary" else "dense",
            placebo_rewards=arm == "placebo",
            eval_at_start=False,
            eval_every=10**6,
            eval_samples=args.eval_samples,
            steps=args.steps or base.steps,
            time_budget_s=args.minutes * 60 if args.minutes else base.time_budget_s,
        )
        result = run_campaign(cfg)
        summary = result.evaluations[-1]
        steps, run_dir = len(result.metrics), repo_relative(result.run_dir)
    return {
        "arm": arm,
        "seed": seed,
        "family": args.family,
        "preset": preset,
        "dense": summary.dense_score,
        "resolved": summary.resolved_rate,
        "samples": summary.samples,
        "infrastructure_failures": summary.infrastructure_failures,
        "stop_rate": summary.stop_rate,
        "turn_limit_rate": summary.turn_limit_rate,
        "steps": steps,
        "minutes": (time.monotonic() - t0) / 60,
        "load_start": load0,
        "load_end": os.getloadavg()[0],
        "run_dir": run_dir,
        "checkpoint": checkpoint,
        "warm_start": warm_started_policy().name,  # the seeds' recipe key: rebuilt from the commit
        **extra,
    }


# ---- the rejection-sampling baseline --------------------------------------------------------
def resolved_streams(rollouts, *, im_end_id: int, layers: int, top_k: int) -> list:
    """TITO samples of the resolved, rewardable trials among `rollouts` (what rejection
    sampling keeps): their sampled ids carry the loss, exactly as the sampler produced them."""
    from training.tito import assemble_trial

    kept = []
    for r in rollouts:
        if not (r.trial.rewardable and r.trial.resolved and r.trajectory.turns):
            continue
        kept.append(
            assemble_trial(r.trajectory.turns, im_end_id=im_end_id, num_layers=layers, top_k=top_k)
        )
    return kept


def fit_streams(model, samples, *, steps: int, batch: int, lr: float, seed: int) -> list[float]:
    """`steps` AdamW steps (warm-up then cosine, as the SFT recipe) of next-token loss on the
    loss positions of TITO samples drawn `batch` at a time; returns each step's loss."""
    import math
    import random

    import torch

    from training.logprobs import batch_logprobs

    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)),
    )
    model.train()
    losses = []
    for _ in range(steps):
        group = [rng.choice(samples) for _ in range(batch)]
        logp = batch_logprobs(model, [g.token_ids for g in group], grad=True)  # (B, n_max)
        mask = torch.zeros_like(logp, dtype=torch.bool)
        for i, g in enumerate(group):
            mask[i, : len(g)] = torch.as_tensor(g.loss_mask)
        loss = -logp[mask].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses


def rejection_sft(args: argparse.Namespace, sft: Path, rl_tasks, base, seed: int):
    """The rejection-sampling baseline's checkpoint (cached under --out/runs/) and what it
    kept: steps x batch trajectories of the rl split sampled with the SFT checkpoint, the
    resolved ones fitted with the SFT recipe. Returns (checkpoint dir, row fields)."""
    from training.chat_format import IM_END
    from training.chat_tokenizer import load_chat_tokenizer, save_chat_tokenizer
    from training.evaluation import evaluate_policy
    from training.policy import load_policy, routing_shape, save_policy

    budget = (args.steps or PROTOCOL_STEPS) * base.batch_size
    out = args.out / "runs" / f"{REJECTION_ARM}-s{seed}-{checkpoint_id(sft)}"
    meta_path = out / "rejection.json"
    if meta_path.is_file():
        return out, json.loads(meta_path.read_text())
    samples_per_task = 2
    tasks = list(rl_tasks)[: math.ceil(budget / samples_per_task)]
    t0 = time.monotonic()
    summary, rollouts = evaluate_policy(
        sft, tasks, samples=samples_per_task, harness=base.harness, workers=args.workers,
        seed=seed, benchmark="rejection-sampling",
    )  # fmt: skip
    tokenizer = load_chat_tokenizer(sft)
    model = load_policy(sft)
    layers, top_k = routing_shape(model.config)
    kept = resolved_streams(
        rollouts, im_end_id=int(tokenizer.convert_tokens_to_ids(IM_END)), layers=layers,
        top_k=top_k,
    )  # fmt: skip
    meta = {
        "trajectories_sampled": len(rollouts),
        "resolved_kept": len(kept),
        "sampled_resolved_rate": summary.resolved_rate,
        "rejection_sample_minutes": (time.monotonic() - t0) / 60,
    }
    if kept:
        losses = fit_streams(model, kept, steps=SFT_STEPS, batch=8, lr=SFT_LR, seed=seed)
        meta |= {"fit_first_loss": losses[0], "fit_final_loss": losses[-1]}
    model.eval()
    save_policy(model, out)
    save_chat_tokenizer(tokenizer, out)
    meta_path.write_text(json.dumps(meta, indent=1))
    return out, meta


def repo_relative(path: Path) -> str:
    """`path` relative to the repository when it lies inside it (rows name no machine's paths)."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


# ---- the cache (pure file functions) --------------------------------------------------------
def result_path(results: Path, arm: str, seed: int) -> Path:
    return results / f"{arm}-s{seed}.json"


def save_result(results: Path, row: dict) -> Path:
    """Write one (arm, seed) row atomically (a kill mid-write leaves no half file)."""
    results.mkdir(parents=True, exist_ok=True)
    path = result_path(results, row["arm"], row["seed"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(with_environment(row), indent=1))
    tmp.rename(path)
    return path


def load_results(results: Path) -> list[dict]:
    """Every cached row, in arm then seed order."""
    if not results.is_dir():
        return []
    rows = [json.loads(p.read_text()) for p in results.glob("*.json")]
    return sorted(rows, key=lambda r: (ARMS.index(r["arm"]), r["seed"]))


def of_checkpoint(rows: Iterable[dict], checkpoint: str) -> list[dict]:
    """The rows measured from `checkpoint` (rows without a digest are of an unknown one)."""
    return [r for r in rows if r.get("checkpoint") == checkpoint]


def pending(
    arms: Sequence[str], seeds: Sequence[int], rows: Iterable[dict]
) -> list[tuple[str, int]]:
    """(arm, seed) pairs still to run, seed by seed (every arm of seed 0 first, so a partial
    run holds complete paired seeds), cheap SFT arms first within a seed."""
    done = {(r["arm"], r["seed"]) for r in rows}
    order = sorted(arms, key=ARMS.index)
    return [(a, s) for s in seeds for a in order if (a, s) not in done]


# ---- the table and the verdict (pure) -------------------------------------------------------
def standard_error(rate: float, n: int) -> float:
    """Binomial standard error of a rate measured on n samples."""
    return math.sqrt(max(rate * (1 - rate), 0.0) / n) if n else float("inf")


def arm_summary(rows: Sequence[dict], arm: str) -> dict | None:
    """Mean resolved rate and dense score over the arm's seeds, the standard error of the
    mean resolved rate (binomial per seed, combined over seeds) and the seed spread."""
    rs = [r for r in rows if r["arm"] == arm]
    if not rs:
        return None
    resolved = [r["resolved"] for r in rs]
    se = math.sqrt(sum(standard_error(r["resolved"], r["samples"]) ** 2 for r in rs)) / len(rs)
    return {
        "arm": arm,
        "seeds": sorted(r["seed"] for r in rs),
        "resolved": statistics.fmean(resolved),
        "dense": statistics.fmean(r["dense"] for r in rs),
        "se": se,
        "spread": max(resolved) - min(resolved),
        "samples": min(r["samples"] for r in rs),
    }


def verdict(rows: Sequence[dict], *, seeds: Sequence[int]) -> str:
    """'gain shown' only when PPO-dense's mean resolved rate beats the best SFT temperature and
    the placebo each by more than max(2 standard errors of the difference, the seed spread),
    every compared arm having every seed and every row the same SFT checkpoint; otherwise says
    which comparison fails or what is missing. The rejection-sampling baseline, when every
    seed has it, is compared by the same rule on a line of its own (reported, not gating: the
    protocol's claim is against SFT and the placebo)."""
    need = set(seeds)
    compared = [r for r in rows if r["arm"] in ("ppo-dense", "placebo", *SFT_ARMS)]
    checkpoints = sorted({str(r.get("checkpoint")) for r in compared})
    if len(checkpoints) > 1:
        return (
            f"incomplete: no verdict (rows of {len(checkpoints)} SFT checkpoints: "
            f"{', '.join(checkpoints)}; every arm must start from the same one)"
        )
    summaries = {a: arm_summary(rows, a) for a in ARMS}
    missing = [a for a in ("ppo-dense", "placebo", *SFT_ARMS)
               if summaries[a] is None or set(summaries[a]["seeds"]) != need]  # fmt: skip
    if missing:
        return f"incomplete: no verdict (missing seeds of {', '.join(missing)})"
    sft = [s for a in SFT_ARMS if (s := summaries[a]) is not None]
    best_sft = max(sft, key=lambda s: s["resolved"])
    ppo, placebo = summaries["ppo-dense"], summaries["placebo"]
    assert ppo is not None and placebo is not None
    lines, shown = [], True
    rejection = summaries[REJECTION_ARM]
    informative = [rejection] if rejection is not None and set(rejection["seeds"]) == need else []
    for other in (best_sft, placebo, *informative):
        diff = ppo["resolved"] - other["resolved"]
        se = math.hypot(ppo["se"], other["se"])
        margin = max(2 * se, ppo["spread"], other["spread"])
        ok = diff > margin
        if other is not rejection:
            shown &= ok
        lines.append(
            f"ppo-dense vs {other['arm']}: {100 * diff:+.1f} points resolved, margin "
            f"{100 * margin:.1f} (2 SE {200 * se:.1f}, seed spread "
            f"{100 * max(ppo['spread'], other['spread']):.1f}): "
            f"{'beats' if ok else 'does not beat'}"
        )
    head = "gain shown" if shown else "no gain shown"
    return "\n".join([f"verdict: {head}", *lines])


def table(rows: Sequence[dict]) -> str:
    """Per-run rows, then per arm: mean [min, max] over seeds and the standard error."""

    def pct(x: float | None) -> str:
        return f"{100 * x:.1f}" if x is not None else "-"

    lines = [
        "| arm | seed | held-out dense | resolved % (SE) | n | stop % | turn limit % | PPO steps "
        "| minutes | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        se = standard_error(r["resolved"], r["samples"])
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r['dense']:.2f} | {pct(r['resolved'])} ({pct(se)}) "
            f"| {r['samples']} | {pct(r.get('stop_rate'))} | {pct(r.get('turn_limit_rate'))} "
            f"| {r['steps']} | {r['minutes']:.1f} "
            f"| {r.get('load_start', float('nan')):.1f}-{r.get('load_end', float('nan')):.1f} |"
        )
    lines += ["", "| arm | seeds | dense mean | resolved % mean [min, max] | SE of the mean |",
              "|---|---|---|---|---|"]  # fmt: skip
    for arm in ARMS:
        s = arm_summary(rows, arm)
        if s is None:
            continue
        rs = [r["resolved"] for r in rows if r["arm"] == arm]
        lines.append(
            f"| {arm} | {len(s['seeds'])} | {s['dense']:.2f} | {pct(s['resolved'])} "
            f"[{pct(min(rs))}, {pct(max(rs))}] | {pct(s['se'])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
