"""Synthesis throughput: candidates validated per minute, and where the time goes.

    python benchmarks/synthesis_throughput.py [--rounds 2] [--per-round 6] [--workers 2]
                                              [--seeds a,b,c] [--store DIR]

Runs a small campaign in a fresh temporary warehouse (seeds profiled first, timed apart), then
prints throughput and a breakdown: synthesis (operators + child build), decontamination,
sandbox (validation trials: environment start, agent, verifier, the rest = sandbox overhead),
and store (warehouse commits). Sandbox time is summed over workers, so with 2 workers it can
exceed wall time. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from synthesis.rounds import SynthConfig, run_synthesis, seed_parents
from synthesis.validate import ValidationConfig
from warehouse.snapshot import Snapshot
from warehouse.store import Store

FAST_SEEDS = (
    "ds-multiple-regression,sa-access-log-csv-report,ds-sensor-summary-stats,vc-reflog-recover,"
    "ds-ab-test-analysis,sa-dedupe-hardlinks,dbg-python-off-by-one,vc-gitignore-untrack"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--per-round", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reruns", type=int, default=2)
    ap.add_argument("--seeds", default=FAST_SEEDS, help="comma-separated seed ids ('' = all)")
    ap.add_argument("--store", default=None, help="warehouse dir (default: a fresh temp dir)")
    args = ap.parse_args()
    store_dir = args.store or tempfile.mkdtemp(prefix="t1-synth-bench-")
    cfg = SynthConfig(
        rounds=args.rounds,
        per_round=args.per_round,
        workers=args.workers,
        seed_ids=tuple(s for s in args.seeds.split(",") if s),
        validation=ValidationConfig(reruns=args.reruns),
        campaign="bench",
    )
    store = Store.open(store_dir, create=True)
    t0 = time.monotonic()
    parents = seed_parents(store, cfg)
    profile_s = time.monotonic() - t0
    t1 = time.monotonic()
    stats = run_synthesis(cfg, store)
    wall = time.monotonic() - t1
    with Snapshot.open(store, with_lineage=False) as snap:
        trial = snap.rows(
            """
            SELECT count(*) AS n, sum(environment_s) AS env, sum(agent_s) AS agent,
                   sum(verifier_s) AS verifier, sum(total_s) AS total
            FROM trials WHERE trial_id IN (
                SELECT unnest(trial_ids) FROM synth_candidates WHERE campaign = 'bench')
            """
        )[0]
    candidates = sum(s.candidates for s in stats)
    validated = candidates - sum(s.discard_reasons.get("rewrite_error", 0) for s in stats)
    synth_s = sum(s.synthesis_s for s in stats)
    sandbox_s = sum(s.sandbox_s for s in stats)
    store_s = sum(s.store_s for s in stats)
    other = max(0.0, wall - store_s - synth_s - sandbox_s / max(1, args.workers))
    cores = os.cpu_count()
    print(f"seeds profiled: {len(parents)} in {profile_s:.1f}s (not counted below)")
    print(
        f"{candidates} candidates ({validated} validated, "
        f"{sum(s.accepted for s in stats)} accepted) in {wall:.1f}s wall, "
        f"{args.workers} workers on {cores} cores"
    )
    print(f"throughput: {validated / wall * 60:.1f} candidates validated per minute\n")
    rows = [
        ("synthesis (operators, build)", synth_s),
        ("sandbox (validation, worker-s)", sandbox_s),
        ("  environment start", trial["env"] or 0.0),
        ("  agent (oracle/nop/parent)", trial["agent"] or 0.0),
        ("  verifier", trial["verifier"] or 0.0),
        (
            "  sandbox overhead (rest)",
            (trial["total"] or 0.0)
            - (trial["env"] or 0.0)
            - (trial["agent"] or 0.0)
            - (trial["verifier"] or 0.0),
        ),
        ("  outside trials (profiling, repair)", sandbox_s - (trial["total"] or 0.0)),
        ("store (warehouse commits)", store_s),
        ("main thread waiting / other", other),
    ]
    print(f"{'where the time goes':40} {'seconds':>9} {'per cand.':>10}")
    for name, secs in rows:
        print(f"{name:40} {secs:9.2f} {secs / max(1, candidates):10.3f}")
    print(
        f"\n{trial['n']} trials, {(trial['total'] or 0) / max(1, trial['n']):.2f}s each on average"
    )
    print(f"store: {store_dir}")


if __name__ == "__main__":
    main()
