"""Wall time of the main job (`make demo` without the seed check), per step.

    python benchmarks/main_job.py [--rounds N] [--per-round N]   (default: the forge config's)

Runs against a fresh temporary store and Dagster instance; the target is under 15 minutes
on the 2-core machine. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--per-round", type=int, default=None)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="t1-main-job-")
    os.environ["DAGSTER_HOME"] = os.path.join(tmp, "dagster")
    os.makedirs(os.environ["DAGSTER_HOME"])
    import dagster as dg

    from pipelines.defs.resources import ForgeConfig
    from pipelines.main_job import run_main_job

    budget = {k: v for k, v in (("rounds", args.rounds), ("per_round", args.per_round)) if v}
    forge = ForgeConfig(
        store=os.path.join(tmp, "wh"), reports_dir=os.path.join(tmp, "reports"), **budget
    )
    t0 = time.monotonic()
    with dg.instance_for_test() as instance:
        steps = run_main_job(forge, instance)
    total = time.monotonic() - t0
    print(f"{'step':70} {'ok':>4} {'seconds':>8}")
    for s in steps:
        print(f"{s.step[:70]:70} {'yes' if s.success else 'NO':>4} {s.seconds:8.1f}")
    print(
        f"main job total: {total:.0f} s ({forge.rounds} rounds x {forge.per_round}); "
        f"target < 900 s: {'met' if total < 900 else 'missed'}"
    )


if __name__ == "__main__":
    main()
