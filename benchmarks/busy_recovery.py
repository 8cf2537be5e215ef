"""What a policy does right after a busy failure on held-out `countdown-busy` tasks.

Evaluates a checkpoint (an SFT checkpoint, or a PPO run's `checkpoints/step-N/actor`) on the
family's held-out split, one sample per task, and counts the turn that follows each
`BUSY_LINE` observation: `./tick` called again, an answer (giving up), or anything else.

  python benchmarks/busy_recovery.py POLICY_DIR --temperature 1.0 --tasks 80 --seed 7
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def after_failure(messages: list[dict], marker: str) -> Counter:
    """Per observation containing `marker`: 'again' (the next turn calls ./tick), 'gave_up'
    (the next turn answers without a tool call) or 'other'."""
    counts: Counter = Counter()
    for m, nxt in zip(messages, messages[1:], strict=False):
        if m["role"] != "tool" or marker not in (m.get("content") or ""):
            continue
        calls = nxt.get("tool_calls") or []
        if not calls:
            counts["gave_up"] += 1
        elif "./tick" in json.dumps(calls):
            counts["again"] += 1
        else:
            counts["other"] += 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("policy", type=Path)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--tasks", type=int, default=80)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    from training.campaign_config import load_campaign_config
    from training.evaluation import evaluate_policy
    from training.task_families import BUSY_LINE, family_splits

    tasks = family_splits("countdown-busy", sft=0, rl=0, heldout=args.tasks).heldout
    harness = load_campaign_config("countdown-busy", seed=args.seed).harness
    summary, rollouts = evaluate_policy(
        args.policy, tasks, samples=1, workers=4, seed=args.seed,
        harness=harness.model_copy(update={"temperature": args.temperature}),
    )  # fmt: skip
    counts: Counter = Counter()
    for r in rollouts:
        counts += after_failure([m.as_dict() for m in r.trajectory.messages], BUSY_LINE)
    n = sum(counts.values())
    print(
        f"{args.policy} T={args.temperature}: resolved {100 * summary.resolved_rate:.1f}% "
        f"dense {summary.dense_score:.2f}; after {n} busy failures: ./tick again "
        f"{counts['again']} ({100 * counts['again'] / max(n, 1):.0f}%), gave up "
        f"{counts['gave_up']}, other {counts['other']}"
    )


if __name__ == "__main__":
    main()
