"""False rejects of the full (trial) audit on public tasks whose oracle passes.

    python benchmarks/public_false_rejects.py DIR [--solutions benchmarks/public_solutions]
                                              [--tasks a,b] [--workers 1] [--json out.json]
                                              [--oracle-only]

DIR is a checkout's `environments_harbor/` of github:zjysteven/terminal-bench-env (stock
Harbor tasks, pytest run by test.sh, no reference solutions). `--solutions` holds honest
solutions written for a seeded sample of it (one `<task>/solve.sh` each, computing the answer
from the task's inputs; benchmarks/public_solutions/README.md says how the sample was drawn
and which sampled tasks have none, and why). Each task gets its solution, then:

1. the oracle runs once: a task whose oracle fails is left out of the measurement (its row
   says why);
2. the executable judge runs in full trial mode (every rerun condition, perturbations, answer
   swaps, the traced verifier, mutants, hacks) and the t1 rubric decides (no LLM).

`--oracle-only` stops after step 1 (verdict `oracle_passes`): whether the judge still passes
honest work it was not written for, in a few minutes (a check of what each of its rules
costs). It also runs the oracle again and a nop agent, both paid against the first run's
reference verdict (`tasks.results.pay`): `vouched` is the share of the oracle's outcomes the
judge vouches for (below 1 where the runner ran the agent's code and no rerun vouched for
what followed), `rerun_paid` the share of the reference a second
honest run is paid (below 1: the pay costs honest work), `nop_counted` and `nop_paid` nop's
share as Terminal-Bench counts it and as the trainer pays it.

Prints one row per task (verdict, hard-reject codes, the defect findings) and the
false-reject rate is read from them by hand: a rejection is false when the defect it names is
not in the task (docs/audit.md explains each). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.judge_exec import ExecConfig, run_exec_judge, score_dimensions  # noqa: E402
from audit.rubric import decide, load_rubric  # noqa: E402
from sandbox.trial import run_trial  # noqa: E402
from tasks.harbor import load_harbor  # noqa: E402
from tasks.model import Task  # noqa: E402
from tasks.results import ReferenceVerdict  # noqa: E402

SOLUTIONS = Path(__file__).resolve().parent / "public_solutions"


def with_solution(task_dir: Path, solve: Path, build_timeout_s: float | None = None) -> Task:
    """The corpus task with the solution written for it; `build_timeout_s` overrides the
    task's build limit (the first build of the corpus's shared pip layer, pandas and scipy,
    takes longer than the tasks' 600 s on a loaded machine; the layer is cached after)."""
    task = load_harbor(task_dir)
    update: dict = {"solution": {"solve.sh": solve.read_bytes()}}
    if build_timeout_s is not None:
        update["limits"] = task.limits.model_copy(update={"build_timeout_s": build_timeout_s})
    return task.model_copy(update=update)


def measure(task: Task, rubric, oracle_only: bool = False) -> dict:
    t0 = time.monotonic()
    oracle = run_trial(task, "oracle")
    total = oracle.report.total
    row: dict = {"task": task.id, "oracle": oracle.failure_mode.value,
                 "agent_code": [c.path for c in oracle.report.agent_code],
                 "vouched": round(len(oracle.report.vouched) / total, 3) if total else None,
                 }  # fmt: skip
    if not oracle.resolved:
        failing = [a.name for a in oracle.assertions if not a.ok][:4]
        detail = (oracle.failure_detail or oracle.verifier_output[-300:])[:300]
        row |= {"verdict": "oracle_fails", "failing": failing, "detail": detail}
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    if oracle_only:
        ref = ReferenceVerdict.of(oracle)
        rerun, nop = run_trial(task, "oracle"), run_trial(task, "nop")
        paid = rerun.pay(ref)
        row |= {
            "reference": ref.total if ref is not None else None,
            "rerun_paid": round(len(paid.passed) / paid.total, 3) if paid.total else None,
            "nop_counted": round(nop.independent_passed / nop.total, 3) if nop.total else None,
            "nop_paid": round(len(nop.pay(ref).passed) / ref.total, 3) if ref else None,
        }
        return row | {"verdict": "oracle_passes", "seconds": round(time.monotonic() - t0, 1)}
    ev = run_exec_judge(task, ExecConfig(workers=2))
    d = decide(score_dimensions(ev), ev.codes(), rubric)
    row |= {
        "verdict": d.verdict.value,
        "hard": sorted(d.hard),
        "below": [str(x) for x in d.below_min],
        "composite": round(d.composite, 3),
        "defects": [f.text()[:400] for f in ev.defects()],
        "seconds": round(time.monotonic() - t0, 1),
    }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--solutions", type=Path, default=SOLUTIONS)
    ap.add_argument("--tasks", default="", help="comma-separated ids (default: all solved)")
    ap.add_argument("--workers", type=int, default=1, help="tasks measured at once")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--build-timeout", type=float, default=None, help="override build_timeout_s")
    ap.add_argument("--oracle-only", action="store_true", help="step 1 only")
    args = ap.parse_args()

    names = sorted(p.name for p in args.solutions.iterdir() if (p / "solve.sh").is_file())
    if args.tasks:
        wanted = set(args.tasks.split(","))
        names = [n for n in names if n in wanted]
    tasks = [
        with_solution(args.dir / n, args.solutions / n / "solve.sh", args.build_timeout)
        for n in names
    ]
    rubric = load_rubric("t1")
    rows = []
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for row in pool.map(lambda t: measure(t, rubric, args.oracle_only), tasks):
            rows.append(row)
            hard = ",".join(row.get("hard", [])) or "-"
            marks = (f" ran the agent's {','.join(row['agent_code'])}, vouched {row['vouched']}"
                     if row["agent_code"] else "")  # fmt: skip
            pay = (f" rerun paid {row['rerun_paid']} nop counted {row['nop_counted']} paid "
                   f"{row['nop_paid']}" if "rerun_paid" in row else "")  # fmt: skip
            print(f"{row['seconds']:7.1f}s {row['verdict']:12} {hard:40} {row['task']}{marks}{pay}",
                  flush=True)  # fmt: skip
            for d in row.get("defects", []):
                print(f"          {d[:300]}", flush=True)
            if args.json:  # after every task: a long run that stops keeps what it measured
                args.json.write_text(json.dumps(rows, indent=1) + "\n")
    audited = [r for r in rows if r["verdict"] != "oracle_fails"]
    rejected = [r for r in audited if r["verdict"] == "rejected"]
    marked = [r for r in rows if r["agent_code"]]
    print(f"\n{len(rows)} tasks, oracle passes on {len(audited)}, rejected {len(rejected)}; "
          f"the runner ran the agent's code in {len(marked)}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
