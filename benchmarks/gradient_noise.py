"""How many trajectories does one PPO update need? The gradient noise scale on fresh rollouts.

Samples `--tasks` x `--samples` fresh trajectories of a task family's `rl` split with the SFT
checkpoint (benchmarks/ppo_learning.py's recipe) at the preset's sampling temperature, computes
each trajectory's score h_i = grad sum_t log pi(a_t) (trainer forward with R3, as the update
does), and from the Gram matrix of the scores the McCandlish two-batch estimate of |G|^2,
tr(Sigma) and B_simple = tr(Sigma) / |G|^2 (training/gradient_noise.py) for each reward (dense:
passing fraction, binary: resolved; a trial cut by a limit earns 0, `truncation = zero`) and
baseline (batch mean, leave-one-out over a task's samples). Beside it: a jackknife interval
(tasks left out in turn), placebos (rewards shuffled within the batch: no true gradient) and
the noise share of an update at the preset's batch size. Each estimate twice: with the score
over every sampled token (what the update uses) and over the 'uncertain' ones only (sampled
where the policy's entropy was >= --entropy nats), to see whether the outcome's signal sits in
the few tokens where the policy was undecided.

Run (the rollouts and the scores are cached in --out; a second run only re-analyses):
  nice -n 10 python benchmarks/gradient_noise.py --out runs/gradient-noise
  nice -n 10 python benchmarks/gradient_noise.py --family fileops-locked --out runs/gn-locked
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.provenance import with_environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "gradient-noise")
    ap.add_argument("--family", default="fileops", help="task family (training/task_families)")
    ap.add_argument("--preset", default="fileops-conservative-nocancel")
    ap.add_argument("--tasks", type=int, default=96, help="rl tasks sampled")
    ap.add_argument("--samples", type=int, default=2, help="trajectories per task (rloo: >= 2)")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0, help="sampling seed of the rollouts")
    ap.add_argument("--b-small", type=int, default=1)
    ap.add_argument(
        "--entropy", type=float, default=0.5,
        help="'uncertain' tokens: sampled where the policy's entropy was at least this (nats)",
    )  # fmt: skip
    ap.add_argument("--placebos", type=int, default=200)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "scores.npz"
    if not cache.is_file():
        collect(args, cache)
    data = np.load(cache)
    meta = json.loads((args.out / "rollouts.json").read_text())
    from training.campaign_config import load_campaign_config

    batch = load_campaign_config(args.preset).batch_size
    rows = analyse(data, args, batch)
    (args.out / "noise.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(table(rows, meta, batch, args.preset))


def collect(args: argparse.Namespace, cache: Path) -> None:
    """Roll out the SFT policy on the rl split and store per-trajectory rewards and the score
    Gram matrix (N x N) in `cache`."""
    import torch

    from benchmarks.ppo_learning import family_splits, sft_checkpoint
    from training.campaign_config import load_campaign_config
    from training.chat_format import IM_END
    from training.chat_tokenizer import load_chat_tokenizer
    from training.evaluation import evaluate_policy
    from training.harness import TRUNCATED_STOPS
    from training.policy import load_policy
    from training.tito import assemble_trial
    from training.warm_start import warm_started_policy

    cfg = load_campaign_config(args.preset)
    splits = family_splits(args.family, sft=150, rl=max(400, args.tasks), heldout=40)
    sft = sft_checkpoint(args.family)
    tasks = splits.rl[: args.tasks]
    t0 = time.monotonic()
    summary, rollouts = evaluate_policy(
        sft, tasks, samples=args.samples, harness=cfg.harness, workers=args.workers,
        seed=args.seed, benchmark="gradient-noise",
    )  # fmt: skip
    rollout_s = time.monotonic() - t0
    print(f"{len(rollouts)} rollouts in {rollout_s / 60:.1f} min: dense {summary.dense_score:.2f}")
    tokenizer = load_chat_tokenizer(sft)
    model = load_policy(sft)
    model.train()
    torch.set_num_threads(1)
    params = [p for p in model.parameters() if p.requires_grad]
    im_end = int(tokenizer.convert_tokens_to_ids(IM_END))
    mc = model.config
    scores: list = []
    scores_uncertain: list = []
    dense, binary, groups, tokens, shares = [], [], [], [], []
    for i, r in enumerate(rollouts):
        turns = r.trajectory.turns
        if not r.trial.rewardable or not turns:
            continue
        sample = assemble_trial(
            turns, im_end_id=im_end, num_layers=mc.num_hidden_layers, top_k=mc.num_experts_per_tok
        )
        mask = torch.as_tensor(sample.loss_mask, dtype=torch.bool)
        if not bool(mask.any()):
            continue
        logp, entropy = _logprobs_and_entropy(model, sample, cfg.harness.temperature)
        uncertain = mask & (entropy >= args.entropy)
        for chosen, out in ((mask, scores), (uncertain, scores_uncertain)):
            model.zero_grad(set_to_none=True)
            if bool(chosen.any()):
                logp[chosen].sum().backward(retain_graph=chosen is mask)
                out.append(torch.cat([p.grad.flatten() for p in params if p.grad is not None]))
            else:
                out.append(torch.zeros(sum(p.numel() for p in params)))
        shares.append(float(uncertain.sum()) / float(mask.sum()))
        cut = r.trajectory.stop in TRUNCATED_STOPS
        total = max(1, r.trial.total)
        dense.append(0.0 if cut else r.trial.passed / total)
        binary.append(0.0 if cut else float(r.trial.resolved))
        groups.append(i // args.samples)
        tokens.append(int(mask.sum()))
    s = torch.stack(scores).double()  # (N, P)
    u = torch.stack(scores_uncertain).double()  # (N, P)
    np.savez(
        cache, gram=(s @ s.T).numpy(), gram_uncertain=(u @ u.T).numpy(), dense=np.array(dense),
        binary=np.array(binary), groups=np.array(groups), tokens=np.array(tokens),
    )  # fmt: skip
    meta = {
        "family": args.family,
        "preset": args.preset,
        "sft": sft.name,
        "warm_start": warm_started_policy().name,  # the recipe key of the seeds' warm start
        "tasks": len(tasks),
        "samples_per_task": args.samples,
        "trajectories": len(dense),
        "temperature": cfg.harness.temperature,
        "rollout_minutes": rollout_s / 60,
        "score_minutes": (time.monotonic() - t0 - rollout_s) / 60,
        "dense_score": summary.dense_score,
        "resolved_rate": summary.resolved_rate,
        "parameters": int(s.shape[1]),
        "mean_loss_tokens": float(np.mean(tokens)),
        "entropy_threshold": args.entropy,
        "uncertain_token_share": float(np.mean(shares)),
    }
    (args.out / "rollouts.json").write_text(json.dumps(with_environment(meta), indent=1))


def _logprobs_and_entropy(model, sample, temperature: float):
    """(n,) trainer logprobs of the sampled ids (with grad, R3 replayed) and (n,) entropy of
    the sampling distribution each was drawn from (no grad; 0 at position 0)."""
    import torch

    from training.r3 import fit_record, replay_routing

    ids = torch.as_tensor(sample.token_ids, dtype=torch.long)[None, :]  # (1, n)
    record = fit_record(torch.as_tensor(sample.routed_experts, dtype=torch.long), ids.shape[1])
    with replay_routing(model, record, policy="live"):
        logits = model(input_ids=ids, use_cache=False).logits[0]  # (n, V)
    logp_all = torch.log_softmax(logits[:-1].float() / temperature, dim=-1)  # (n-1, V)
    picked = logp_all.gather(-1, ids[0, 1:, None]).squeeze(-1)  # (n-1,)
    entropy = -(logp_all.exp() * logp_all).sum(-1).detach()  # (n-1,)
    zero = torch.zeros(1)
    return torch.cat([zero, picked]), torch.cat([zero, entropy])


def analyse(data, args: argparse.Namespace, batch: int) -> list[dict]:
    """One row per (reward, baseline): the estimate, its jackknife interval, the placebos."""
    from training.gradient_noise import noise_report

    groups = data["groups"]
    counts = np.bincount(groups)
    rows = []
    grams = [("all", data["gram"])]
    if "gram_uncertain" in data:
        grams.append(("uncertain", data["gram_uncertain"]))
    for token_set, h in grams:
        for reward in ("dense", "binary"):
            for baseline in ("batch_mean", "rloo"):
                keep = counts[groups] >= 2 if baseline == "rloo" else np.ones(len(groups), bool)
                idx = np.flatnonzero(keep)
                rep = noise_report(
                    h[np.ix_(idx, idx)], data[reward][idx], groups[idx], baseline=baseline,
                    b_small=args.b_small, placebos=args.placebos,
                )  # fmt: skip
                e = rep.estimate
                rows.append(
                    {
                        "tokens": token_set,
                        "reward": reward,
                        "baseline": baseline,
                        "n": e.n,
                        "signal": e.signal,
                        "signal_interval": rep.signal_interval,
                        "trace": e.trace,
                        "b_simple": e.b_simple,
                        "b_simple_interval": rep.b_simple_interval,
                        "placebo_p": rep.placebo_rank,
                        "placebo_signal_p90": float(np.percentile(rep.placebo_signals, 90)),
                        "noise_share_at_preset": e.noise_share(batch),
                        "reward_mean": float(np.mean(data[reward][idx])),
                        "reward_std": float(np.std(data[reward][idx])),
                    }
                )
    return rows


def table(rows: list[dict], meta: dict, batch: int, preset: str) -> str:
    lines = [
        f"{meta['trajectories']} trajectories ({meta['tasks']} tasks x {meta['samples_per_task']}) "
        f"of {meta['family']} at T = {meta['temperature']}: dense {meta['dense_score']:.2f}, "
        f"resolved {100 * meta['resolved_rate']:.1f}%, {meta['mean_loss_tokens']:.0f} sampled "
        f"tokens per trajectory; rollouts {meta['rollout_minutes']:.1f} min",
        "",
        "| tokens | reward | baseline | mean (std) | \\|G\\|^2 [90% CI] | tr(Σ) "
        "| B_simple [90% CI] "
        f"| placebo p | noise share at B = {batch} ({preset}) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["b_simple_interval"]
        slo, shi = r["signal_interval"]
        lines.append(
            f"| {r.get('tokens', 'all')} | {r['reward']} | {r['baseline']} "
            f"| {r['reward_mean']:.2f} ({r['reward_std']:.2f}) "
            f"| {r['signal']:.3g} [{slo:.3g}, {shi:.3g}] | {r['trace']:.3g} "
            f"| {r['b_simple']:.0f} [{lo:.0f}, {hi:.0f}] | {r['placebo_p']:.3f} "
            f"| {100 * r['noise_share_at_preset']:.0f}% |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
