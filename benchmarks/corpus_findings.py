"""The static evidence of the audit on a sample of a real corpus, finding by finding.

    python benchmarks/corpus_findings.py DIR [--sample 50] [--seed 0] [--all] [--code CODE]

Draws the same sample as `t1 audit DIR --sample N --seed S` (`audit.intake.read_corpus`),
measures each task with the executable judge in static mode (no sandbox) and prints every
finding other than a stated or derived literal (with `--all`, those too), then the count of
findings and of tasks per code. `t1 audit DIR` stores the stage verdicts; this prints the
per-literal evidence behind them, for reading the flags by hand (`--code broken_input`: only
that code's findings are printed). Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.intake import read_corpus  # noqa: E402
from audit.judge_exec import ExecConfig, run_exec_judge  # noqa: E402
from audit.verdict import Code  # noqa: E402

QUIET = {Code.LITERAL_STATED, Code.LITERAL_DERIVED}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--sample", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--all", action="store_true", help="print stated literals too")
    ap.add_argument("--code", default=None, help="print only this code's findings")
    args = ap.parse_args()

    intake = read_corpus(args.dir, args.sample, args.seed)
    print(
        f"{intake.found} directories, {len(intake.tasks)} loaded, {len(intake.rejects)} malformed"
    )
    findings: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    for task in intake.tasks:
        ev = run_exec_judge(task, ExecConfig(static_only=True))
        for f in ev.findings:
            if args.code is not None and f.code.value != args.code:
                continue
            if args.all or f.code not in QUIET:
                print(f"{task.id}  {f.code.value}  {f.item[:60]!r}  {f.evidence[:140]}")
        findings.update(f.code.value for f in ev.findings)
        tasks.update({f.code.value for f in ev.findings})
    print(f"\n| code | findings | tasks (of {len(intake.tasks)}) |\n|---|---:|---:|")
    for code, n in findings.most_common():
        print(f"| {code} | {n} | {tasks[code]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
