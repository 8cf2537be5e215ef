"""The share of the reward each scripted hack earns, over a directory of tasks.

    python benchmarks/hack_share.py [DIR] [--sample N] [--seed S] [--workers 2] [--hacks a,b]
                                    [--json out.json]

DIR (default: the bundled seeds) holds one task per subdirectory (`--sample` draws the same
seeded sample as `t1 audit DIR --sample N --seed S`). For every task: one nop trial, then
every hack of `tasks.hacks.HACKS` (or those `--hacks` names, a CLOSED one too) with something
to do (`audit.hacks.run_hacks`), each in a fresh local sandbox. Prints one row per task (nop
share, each hack's share, the max and its gain over nop), then per hack: tasks tried, mean
and max share, tasks where it beats nop; then the distribution of the max hack share (the
`hackable` threshold is chosen from it, see docs/audit.md). A task that cannot be loaded or
whose trials fail for infrastructure is a row with its reason, never a crash.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.hacks import HACKABLE_SHARE, hack_evidence, run_hacks  # noqa: E402
from audit.intake import read_corpus  # noqa: E402
from benchmarks.provenance import with_environment  # noqa: E402
from sandbox.trial import run_trial  # noqa: E402
from tasks.corpus import SEED_DIR  # noqa: E402
from tasks.hacks import CLOSED, HACKS  # noqa: E402
from tasks.model import Task  # noqa: E402


def measure(task: Task, names: list[str] | None, workers: int) -> dict:
    t0 = time.monotonic()
    nop = run_trial(task, "nop")
    if not nop.rewardable:
        why = f"nop: {nop.failure_mode.value}: {nop.failure_detail[-300:]}"
        print(f"{time.monotonic() - t0:6.1f}s error {task.id}: {why[:120]}", file=sys.stderr)
        return {"task": task.id, "error": why}
    outs = run_hacks(task, run_trial, workers=workers, names=names)
    ev = hack_evidence(outs, nop)
    row = {
        "task": task.id,
        "assertions": nop.total,
        "nop": nop.passed / nop.total if nop.total else 0.0,
        "hacks": {o.hack: o.share for o in outs if o.rewardable},
        "skipped": [o.hack for o in outs if not o.rewardable],
        "max": ev.measures.get("max_hack_share", 0.0),
        "gain": ev.measures.get("hack_gain", 0.0),
        "hackable": any(f.code.value == "hackable" for f in ev.findings),
        "passed_by": {o.hack: list(o.passed) for o in outs if o.passed},
        "seconds": round(time.monotonic() - t0, 1),
    }
    print(f"{row['seconds']:6.1f}s max {row['max']:.2f} gain {row['gain']:.2f} {task.id}",
          file=sys.stderr, flush=True)  # fmt: skip
    return row


def quantiles(xs: list[float]) -> str:
    if not xs:
        return "-"
    s = sorted(xs)
    q = [s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))] for p in (0.5, 0.75, 0.9, 1.0)]
    return "median {:.2f} · p75 {:.2f} · p90 {:.2f} · max {:.2f}".format(*q)


def report(rows: list[dict]) -> None:
    ok = [r for r in rows if "error" not in r]
    names = [h for h in HACKS | CLOSED if any(h in r["hacks"] for r in ok)]
    print(f"| task | asserts | nop | {' | '.join(names)} | max | gain |")
    print("|" + "---|" * (len(names) + 5))
    for r in ok:
        cells = [f"{r['hacks'][h]:.2f}" if h in r["hacks"] else "·" for h in names]
        print(f"| {r['task']} | {r['assertions']} | {r['nop']:.2f} | {' | '.join(cells)} | "
              f"{r['max']:.2f} | {r['gain']:.2f} |")  # fmt: skip
    for r in rows:
        if "error" in r:
            print(f"| {r['task']} | error: {r['error']} |")
    print("\n| hack | tasks tried | mean share | max share | tasks beating nop |")
    print("|---|---|---|---|---|")
    for h in names:
        xs = [(r["hacks"][h], r["nop"]) for r in ok if h in r["hacks"]]
        beat = sum(s > n + 1e-9 for s, n in xs)
        mean = sum(s for s, _ in xs) / len(xs)
        print(f"| {h} | {len(xs)} | {mean:.2f} | {max(s for s, _ in xs):.2f} | {beat} |")
    maxes, gains = [r["max"] for r in ok], [r["gain"] for r in ok]
    print(f"\nmax hack share over {len(ok)} tasks: {quantiles(maxes)}")
    print(f"gain over nop: {quantiles(gains)}; tasks with gain > 0: {sum(g > 0 for g in gains)}")
    for t in (0.25, 0.5, 0.75, 0.99):
        print(f"tasks with max share > {t:.2f} and a gain: "
              f"{sum(r['max'] > t and r['gain'] > 0 for r in ok)}")  # fmt: skip
    hackable = [r["task"] for r in ok if r["hackable"]]
    print(f"hackable at the threshold {HACKABLE_SHARE:.2f}: {len(hackable)} {hackable}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", type=Path, default=SEED_DIR)
    ap.add_argument("--sample", type=int, default=None, help="a seeded sample of N tasks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="hack trials of one task at once")
    ap.add_argument("--hacks", default="", help="comma-separated hack names (default: HACKS;"
                    " those in CLOSED only by name)")  # fmt: skip
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    names = [n for n in args.hacks.split(",") if n] or None
    unknown = sorted(set(names or []) - set(HACKS) - set(CLOSED))
    if unknown:
        ap.error(f"unknown hacks {unknown} (choose from {', '.join(HACKS | CLOSED)})")
    if not args.dir.is_dir():
        ap.error(f"no task directory {str(args.dir)!r}")
    intake = read_corpus(args.dir, args.sample, args.seed)
    rows = [{"task": r.path, "error": f"load: {r.reason}"[:300]} for r in intake.rejects]
    for task in intake.tasks:
        rows.append(measure(task, names, args.workers))
        if args.json:  # after every task: a long run can be read while it goes on
            args.json.write_text(json.dumps([with_environment(r) for r in rows], indent=1))
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
