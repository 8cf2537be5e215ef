"""Synthesis throughput: candidates validated per minute, and where the time goes.

    python benchmarks/synthesis_throughput.py [--rounds 2] [--per-round 6] [--workers 2]
                                              [--reruns 2] [--seeds a,b,c] [--store DIR]

Runs a small campaign in a fresh temporary warehouse (seeds profiled first, timed apart), then
prints throughput and a breakdown: synthesis (operators, child build, static checks and the
coverage pre-pass run inside validation are timed with it below), sandbox time by validation
trial (oracle runs, nop, the extension-only probe, the parent-solution probe, wipe probes),
each split into environment start, agent and verifier, and store (warehouse commits). Sandbox
time is summed over workers, so with 2 workers it can exceed wall time. The machine's load
average is printed before and after: on a shared machine it moves the figures more than any
code change. Asserts nothing.
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
    ap.add_argument("--reruns", type=int, default=ValidationConfig().reruns)
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
    load_before = os.getloadavg()
    t0 = time.monotonic()
    parents = seed_parents(store, cfg)
    profile_s = time.monotonic() - t0
    t1 = time.monotonic()
    stats = run_synthesis(cfg, store)
    wall = time.monotonic() - t1
    load_after = os.getloadavg()
    with Snapshot.open(store, with_lineage=False) as snap:
        by_agent = snap.rows(
            """
            SELECT agent, count(*) AS n, sum(environment_s) AS env, sum(agent_s) AS act,
                   sum(verifier_s) AS verifier, sum(total_s) AS total
            FROM trials WHERE trial_id IN (
                SELECT unnest(trial_ids) FROM synth_candidates WHERE campaign = 'bench')
            GROUP BY agent ORDER BY total DESC
            """
        )
        reasons = snap.rows(
            "SELECT reason, count(*) AS n FROM synth_candidates WHERE campaign = 'bench' "
            "GROUP BY reason ORDER BY n DESC"
        )
    candidates = sum(s.candidates for s in stats)
    validated = candidates - sum(s.discard_reasons.get("rewrite_error", 0) for s in stats)
    synth_s = sum(s.synthesis_s for s in stats)
    sandbox_s = sum(s.sandbox_s for s in stats)
    store_s = sum(s.store_s for s in stats)
    trials_total = sum(r["total"] or 0.0 for r in by_agent)
    n_trials = sum(r["n"] for r in by_agent)
    other = max(0.0, wall - store_s - synth_s - sandbox_s / max(1, args.workers))
    print(
        f"load average (1/5/15 min): before {'/'.join(f'{x:.1f}' for x in load_before)}, "
        f"after {'/'.join(f'{x:.1f}' for x in load_after)}"
    )
    print(f"seeds profiled (oracle + nop): {len(parents)} in {profile_s:.1f}s (not counted below)")
    print(
        f"{candidates} candidates ({validated} validated, "
        f"{sum(s.accepted for s in stats)} accepted; "
        + ", ".join(f"{r['reason']}={r['n']}" for r in reasons)
        + f") in {wall:.1f}s wall, {args.workers} workers on {os.cpu_count()} cores, "
        f"{args.reruns} oracle run(s) per candidate"
    )
    print(f"throughput: {validated / wall * 60:.1f} candidates validated per minute\n")
    head = f"{'where the time goes':40} {'seconds':>8} {'per cand.':>9} {'trials':>6}"
    print(head + f" {'env':>6} {'agent':>7} {'verifier':>8}")

    def line(name: str, secs: float, n: object = "", split: str = "") -> None:
        print(f"{name:40} {secs:8.2f} {secs / max(1, candidates):9.3f} {n!s:>6}{split}")

    line("synthesis (operators, child build)", synth_s)
    line("sandbox (validation, worker-s)", sandbox_s, n_trials)
    for r in by_agent:
        env, act, ver, tot = (r[k] or 0.0 for k in ("env", "act", "verifier", "total"))
        line(f"  {r['agent']} trials", tot, r["n"], f" {env:6.1f} {act:7.1f} {ver:8.1f}")
    line("  outside trials (static checks, probes)", sandbox_s - trials_total)
    line("store (warehouse commits)", store_s)
    line("main thread waiting / other", other)
    print(f"\n{n_trials} trials, {trials_total / max(1, n_trials):.2f}s each on average")
    print(f"store: {store_dir}")


if __name__ == "__main__":
    main()
