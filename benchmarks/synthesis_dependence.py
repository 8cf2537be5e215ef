"""Do extensions need the parent's work? Dependent share, parent-solution share and instruction
variety of synthesized tasks (docs/synthesis.md, "Extensions that need the parent's output").

    python benchmarks/synthesis_dependence.py [--rounds 3] [--per-round 8] [--seed 0]
        [--seed-ids ID,ID] [--extensions 100] [--workers 2] [--store DIR] [--no-run]
        [--code DIR] [--json out.json]

1. Variety (no validation): the seeds are profiled (oracle + nop, in the sandbox), then
   `--extensions` extensions are drawn, each a (parent, operator) pair taken at random from
   the feasible ones, for the default operators and for the chores (`CHORES`) on the same
   seeds; printed: distinct instruction shapes (the stage's text with every backticked span,
   quoted string, path and number masked: `synthesis.variety.shape`).
2. A synthesis run (`--rounds` x `--per-round` over the seeds, every validation check):
   per accepted task, the share of its new assertions that need the parent's output
   (dependent by data flow, earned by no scripted hack after the parent's solution), the
   share of its whole reward the parent's solution alone earns, and what was discarded why.
`--code DIR` runs part 2 with another checkout's packages (e.g. an older commit exported
with `git archive`); `--no-run` skips it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mean(xs: list[float]) -> str:
    return f"{statistics.fmean(xs):.1%}" if xs else "-"


def variety(args: argparse.Namespace, store: Path) -> dict:
    from synthesis.operators import CHORES, PROGRAMMATIC, RewriteContext
    from synthesis.rounds import SynthConfig, seed_parents
    from synthesis.variety import shape
    from warehouse.store import Store

    cfg = SynthConfig(seed_ids=tuple(args.seed_ids), workers=args.workers)
    t0 = time.monotonic()
    parents = seed_parents(Store.open(store, create=True), cfg)
    print(f"seeds profiled: {len(parents)} usable in {time.monotonic() - t0:.0f}s")
    out = {}
    for label, ops in (("derived (default)", PROGRAMMATIC), ("chores", CHORES)):
        pairs = [(p, op) for p in parents for op in ops if op.feasible(p) is None]
        rng = random.Random(f"{args.seed}:variety")
        texts, seeds_used = [], set()
        for i in range(args.extensions):
            p, op = pairs[rng.randrange(len(pairs))]
            ext = op.extend(p, RewriteContext(1, random.Random(f"{args.seed}:{i}")))
            texts.append(ext.text)
            seeds_used.add(p.task.id)
        shapes = Counter(shape(t) for t in texts)
        out[label] = {
            "extensions": len(texts),
            "distinct_shapes": len(shapes),
            "feasible_pairs": len(pairs),
            "seeds": len(seeds_used),
            "most_common_shape_count": shapes.most_common(1)[0][1] if shapes else 0,
        }
    print()
    print(
        "| operators | extensions | distinct shapes (literals masked) | largest shape class "
        "| feasible (seed, operator) pairs | seeds drawn |"
    )
    print("|---|---|---|---|---|---|")
    for label, r in out.items():
        print(
            f"| {label} | {r['extensions']} | {r['distinct_shapes']} | "
            f"{r['most_common_shape_count']} | {r['feasible_pairs']} | {r['seeds']} |"
        )
    return out


def run(args: argparse.Namespace, store: Path) -> dict:
    from synthesis.rounds import SynthConfig, run_synthesis
    from warehouse.snapshot import Snapshot
    from warehouse.store import Store

    cfg = SynthConfig(rounds=args.rounds, per_round=args.per_round, seed=args.seed,
                      seed_ids=tuple(args.seed_ids), workers=args.workers,
                      campaign=args.campaign)  # fmt: skip
    t0 = time.monotonic()
    stats = run_synthesis(cfg, Store.open(store, create=True))
    wall = time.monotonic() - t0
    with Snapshot.open(Store.open(store), with_lineage=False) as snap:
        rows = snap.rows(
            "SELECT * FROM synth_candidates WHERE campaign = $c ORDER BY round, slot",
            {"c": args.campaign},
        )
    acc = [r for r in rows if r["status"] == "accepted"]
    reasons = Counter(r["reason"] for r in rows if r["status"] != "accepted")
    per_task = []
    for r in acc:
        new = list(r["new_assertions"] or [])
        dep = list(r["flow_dependent"] or [])
        per_task.append({
            "round": r["round"], "operator": r["operator"], "root_seed": r["root_seed"][:12],
            "new": len(new), "dependent": len(dep),
            "dependent_share": len(dep) / len(new) if new else 0.0,
            "hacked_after_parent": len(r.get("flow_hacked") or []),
            "parent_solution_share": r["parent_solution_share"],
            "chain_depth": r["chain_depth"],
        })  # fmt: skip
    shares = [t["dependent_share"] for t in per_task]
    parent = [
        t["parent_solution_share"] for t in per_task if t["parent_solution_share"] is not None
    ]
    new_total = sum(t["new"] for t in per_task)
    dep_total = sum(t["dependent"] for t in per_task)
    print()
    print(
        f"synthesis run: {len(stats)} rounds x {args.per_round}, {len(rows)} candidates, "
        f"{len(acc)} accepted, wall {wall:.0f}s"
    )
    print(f"discarded: {dict(reasons)}")
    print()
    print(
        "| round | operator | new assertions | dependent | hacked after parent | dependent "
        "share | parent solution alone | depth |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for t in per_task:
        ps = t["parent_solution_share"]
        print(
            f"| {t['round']} | {t['operator']} | {t['new']} | {t['dependent']} | "
            f"{t['hacked_after_parent']} | {t['dependent_share']:.0%} | "
            f"{'-' if ps is None else f'{ps:.0%}'} | {t['chain_depth']} |"
        )
    print()
    print(
        f"dependent share per task: mean {_mean(shares)}, min "
        f"{min(shares, default=0):.0%}, max {max(shares, default=0):.0%}; "
        f"new assertions dependent {dep_total} of {new_total}"
    )
    print(
        f"parent's solution alone: mean {_mean(parent)}, min {min(parent, default=0):.0%}, "
        f"max {max(parent, default=0):.0%}"
    )
    return {"candidates": len(rows), "accepted": len(acc), "discarded": dict(reasons),
            "per_task": per_task, "wall_s": wall}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-round", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seed-ids", default="", help="comma-separated seed ids (default: all)")
    ap.add_argument("--extensions", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--store", type=Path, help="warehouse to use (default: a temporary one)")
    ap.add_argument("--campaign", default="dependence", help="synthesis campaign name")
    ap.add_argument("--no-run", action="store_true", help="variety only")
    ap.add_argument("--no-variety", action="store_true", help="the synthesis run only")
    ap.add_argument("--code", type=Path, help="run part 2 with this checkout's packages")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.seed_ids = [s for s in args.seed_ids.split(",") if s]
    sys.path.insert(0, str(ROOT))
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    store = args.store or Path(tempfile.mkdtemp(prefix="t1-dependence-"))
    print(f"store: {store}")
    doc: dict = {"args": {k: str(v) for k, v in vars(args).items()}}
    if not args.no_variety and args.code is None:
        doc["variety"] = variety(args, store)
    if not args.no_run:
        doc["run"] = run(args, store)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
