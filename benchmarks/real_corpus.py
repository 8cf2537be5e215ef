"""Run a real Harbor or Terminal-Bench corpus as written: import, build, nop (and oracle).

    python benchmarks/real_corpus.py DIR --sample 50 --seed 0 [--backend local|docker]
                                     [--build-only] [--json-out rows.jsonl]

Imports every task under DIR (rejects counted), draws a random sample, builds each sampled
environment (local: sandbox.build with the runtime's step runner; docker: the backend builds
in run_trial), runs the nop agent (and the oracle where a solution exists) and prints:
environments built %, verifier ran and produced per-assertion records under nop %, oracle
pass %, nop fail %, the top failure reasons, and the layer-cache figures (a second build of
the first sampled task: time and layers reused). Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.provenance import with_environment  # noqa: E402
from sandbox.build import BuildRow, BuildStats, build_image, build_row, default_runner
from tasks.corpus import import_dir
from tasks.results import FailureMode, TrialResult


def pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}% ({n}/{d})" if d else "   n/a"


def verifier_recorded(r: TrialResult) -> bool:
    """The verifier ran and its output gave per-assertion records (not a bare reward)."""
    report = r.report
    return (
        report is not None
        and report.parse_error is None
        and not report.binary
        and report.total > 0
        and r.failure_mode not in (FailureMode.ENVIRONMENT_ERROR, FailureMode.SANDBOX_ERROR)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--sample", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--build-only", action="store_true", help="build, run no trials")
    ap.add_argument("--json-out", type=Path, help="write one JSON row per sampled task")
    args = ap.parse_args()

    t0 = time.monotonic()
    tasks, rejects = import_dir(args.dir)
    print(
        f"imported {len(tasks)} task(s), {len(rejects)} reject(s) in {time.monotonic() - t0:.1f}s"
    )
    sample = random.Random(args.seed).sample(tasks, min(args.sample, len(tasks)))

    rows: list[dict] = []
    reasons: Counter[str] = Counter()
    built = recorded = nop_fail = oracle_pass = with_solution = 0
    runner = default_runner() if args.backend == "local" else None
    for i, task in enumerate(sample, 1):
        row: dict = {"task": task.id}
        if runner is not None:
            b: BuildRow = build_row(task, runner)
            row["build"] = dataclasses.asdict(b)
            if not b.built:
                reasons[f"build/{b.failure}: {b.reason[:90]}"] += 1
                print(f"[{i}/{len(sample)}] {task.id}: NOT BUILT {b.failure} {b.reason[:100]}")
                rows.append(row)
                continue
        built += 1
        if not args.build_only:
            from sandbox.trial import run_trial

            nop = run_trial(task, "nop", args.backend)
            row["nop"] = {"failure_mode": nop.failure_mode.value, "passed": nop.passed,
                          "total": nop.total, "detail": nop.failure_detail[:300]}  # fmt: skip
            recorded += verifier_recorded(nop)
            nop_fail += nop.passed < nop.total or nop.total == 0
            if not verifier_recorded(nop):
                reasons[f"nop/{nop.failure_mode}: {nop.failure_detail[:90]}"] += 1
            if task.solution is not None:
                with_solution += 1
                orc = run_trial(task, "oracle", args.backend)
                row["oracle"] = {"failure_mode": orc.failure_mode.value, "passed": orc.passed,
                                 "total": orc.total}  # fmt: skip
                ok = orc.failure_mode == FailureMode.NONE and orc.total and orc.passed == orc.total
                oracle_pass += bool(ok)
        print(f"[{i}/{len(sample)}] {task.id}: {json.dumps(row)[:200]}", flush=True)
        rows.append(row)

    if args.json_out:
        args.json_out.write_text("".join(json.dumps(with_environment(r)) + "\n" for r in rows))
    n = len(sample)
    print(f"\n{'sampled':<44}{n}")
    print(f"{'environments built':<44}{pct(built, n)}")
    if not args.build_only:
        print(f"{'verifier ran with per-assertion records (nop)':<44}{pct(recorded, built)}")
        print(f"{'nop fails':<44}{pct(nop_fail, built)}")
        print(f"{'oracle passes':<44}{pct(oracle_pass, with_solution)}")
    print("top failure reasons:")
    for reason, count in reasons.most_common(8):
        print(f"  {count:3d}  {reason}")
    if runner is not None and rows and rows[0].get("build", {}).get("built"):
        again = BuildStats()
        build_image(sample[0], runner, stats=again)
        first_s = rows[0]["build"]["seconds"]
        print(f"cache: {sample[0].id} built in {first_s:.1f}s, rebuilt in {again.seconds:.2f}s "
              f"({100 * again.seconds / max(first_s, 1e-9):.1f}%), {again.reused} layer(s) reused, "
              f"{again.built} built")  # fmt: skip
    print(f"total {time.monotonic() - t0:.0f}s")


if __name__ == "__main__":
    main()
