"""Recall and false rejects of the audit on planted defects it was not written against.

    python benchmarks/audit_recall.py [--draws 2] [--seed 0] [--no-seeds] [--static]
                                      [--workers 2] [--json out.json] [--defect CLASS]
                                      [--variants V1,V2,...] [--real-pytest]
    python benchmarks/audit_recall.py --forms DIR [--forms DIR ...] [--no-seeds] ...

`--real-pytest`: every draw whose variant allows it gets a stock Harbor verifier (test.sh
runs pytest itself, the image installs it) instead of the generator's own three styles.

`--forms DIR`: instead of the generator, every Harbor task under DIR, labelled by DIR's
`labels.json` ({task id: hard-reject class, or "clean"}): defect sets written apart from the
generator (tests/fixtures/audit-forms, tests/fixtures/audit-independent), reported on their
own, per class, with their clean controls.

Every variant of every hard-reject class (`audit.planted.VARIANTS`) is drawn `--draws` times
with randomized surface forms, each with its clean twin (the same draw without the defect);
the bundled seeds are clean controls too. Each task is measured by the executable judge and
decided by the t1 rubric (no LLM). A defect counts as caught when the task is rejected with
its class among the hard-reject codes; a clean control counts as a false reject when it is
rejected at all (and as a false alarm of a class when that class is among its hard codes).
Prints markdown tables (per class, per variant) and the misses with their evidence.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.judge_exec import ExecConfig, run_exec_judge, score_dimensions  # noqa: E402
from audit.planted import VARIANTS, Defect, suite  # noqa: E402
from audit.rubric import decide, load_rubric  # noqa: E402
from audit.verdict import Verdict  # noqa: E402
from benchmarks.provenance import with_environment  # noqa: E402
from tasks.corpus import import_dir, load_seeds  # noqa: E402


def judge(task, cfg, rubric):
    t0 = time.monotonic()
    ev = run_exec_judge(task, cfg)
    d = decide(score_dimensions(ev), ev.codes(), rubric)
    hard = ",".join(c.value for c in d.hard) or "-"
    print(f"{time.monotonic() - t0:6.1f}s {d.verdict.value:9} {hard:30} {task.id}", file=sys.stderr)
    return ev, d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-seeds", action="store_true", help="leave the bundled seeds out")
    ap.add_argument("--static", action="store_true", help="static evidence only (no trials)")
    ap.add_argument("--workers", type=int, default=2, help="tasks measured at once")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--defect", choices=[d.value for d in Defect], help="one class (with its twins) only"
    )
    ap.add_argument(
        "--variants",
        default="",
        help="comma-separated variants (of any class, with their twins) only, e.g. "
        "archive-member,git-history,file-mode,answer-cache",
    )
    ap.add_argument("--real-pytest", action="store_true", help="stock Harbor pytest verifiers")
    ap.add_argument(
        "--forms", type=Path, action="append", default=[],
        help="a labelled directory of Harbor tasks (labels.json), instead of draws",
    )  # fmt: skip
    args = ap.parse_args()

    rubric = load_rubric("t1")
    cfg = ExecConfig(static_only=args.static, workers=2)
    if args.forms:
        return forms_recall(args, cfg, rubric)
    planted = suite(args.draws, args.seed, args.real_pytest)
    if args.defect:  # a twin has the id of its defective draw with the class left out
        ids = {p.task.id.rsplit("-", 1)[1] for p in planted if p.defect == Defect(args.defect)}
        planted = [p for p in planted if p.task.id.rsplit("-", 1)[1] in ids]
    if args.variants:
        wanted = set(args.variants.split(","))
        known = {v for vs in VARIANTS.values() for v in vs}
        if wanted - known:
            ap.error(f"unknown variants {sorted(wanted - known)}")
        ids = {p.task.id.rsplit("-", 1)[1] for p in planted if p.variant in wanted}
        planted = [p for p in planted if p.task.id.rsplit("-", 1)[1] in ids]
    items = [("planted", p.defect, p.variant, p.task, p) for p in planted]
    if not args.no_seeds:
        items += [("seed", None, "seed", t, None) for t in load_seeds()]
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(lambda it: judge(it[3], cfg, rubric), items))
    wall = time.monotonic() - t0

    caught: dict[Defect, Counter] = defaultdict(Counter)
    by_variant: dict[tuple[str, str], Counter] = defaultdict(Counter)
    clean: Counter = Counter()
    alarms: Counter = Counter()
    misses, false_rejects, rows = [], [], []
    for (kind, defect, variant, task, p), (ev, d) in zip(items, results, strict=True):
        hard = {c.value for c in d.hard}
        rejected = d.verdict == Verdict.REJECTED
        undecided = not ev.decided
        rows.append(
            {
                "task": task.id,
                "kind": kind,
                "defect": defect.value if defect else None,
                "variant": variant,
                "verdict": d.verdict.value,
                "hard": sorted(hard),
                "undecided": undecided,
                "style": p.style if p else None,
                "form": p.solution_form if p else None,
                "fmt": p.fmt if p else None,
            }
        )
        if defect is not None:
            hit = defect.value in hard and rejected
            caught[defect]["n"] += 1
            caught[defect]["caught"] += hit
            caught[defect]["rejected"] += rejected
            by_variant[(defect.value, variant)]["n"] += 1
            by_variant[(defect.value, variant)]["caught"] += hit
            if not hit:
                why = [f.text()[:160] for f in ev.findings if f.defect][:4]
                misses.append(
                    (task.id, p.style, p.solution_form, d.verdict.value, sorted(hard), why)
                )
        else:
            key = "twin" if kind == "planted" else "seed"
            clean[f"{key}_n"] += 1
            clean[f"{key}_rejected"] += rejected
            for c in hard:
                alarms[c] += 1
            if rejected:
                false_rejects.append(
                    (task.id, d.reasons[:3], [f.text()[:200] for f in ev.defects()][:4])
                )

    n_clean = clean["twin_n"] + clean["seed_n"]
    print(
        f"## Audit recall on planted defects (draws={args.draws}, seed={args.seed}, "
        f"{'static only' if args.static else 'static + trials'}; "
        f"{len(items)} tasks, {wall:.0f} s)\n"
    )
    print(
        "| class | planted | caught (class named) | recall | rejected at all "
        "| false alarms on clean |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for defect in Defect:
        c = caught[defect]
        rate = c["caught"] / c["n"] if c["n"] else 0.0
        far = alarms[defect.value] / n_clean if n_clean else 0.0
        print(
            f"| {defect.value} | {c['n']} | {c['caught']} | {100 * rate:.0f}% | "
            f"{c['rejected']} | {alarms[defect.value]}/{n_clean} ({100 * far:.1f}%) |"
        )
    fr_twin = clean["twin_rejected"] / clean["twin_n"] if clean["twin_n"] else 0.0
    fr_seed = clean["seed_rejected"] / clean["seed_n"] if clean["seed_n"] else 0.0
    fr_all = (clean["twin_rejected"] + clean["seed_rejected"]) / n_clean if n_clean else 0.0
    print(
        f"\nFalse rejects: clean twins {clean['twin_rejected']}/{clean['twin_n']} "
        f"({100 * fr_twin:.1f}%), seeds {clean['seed_rejected']}/{clean['seed_n']} "
        f"({100 * fr_seed:.1f}%), all clean controls {100 * fr_all:.1f}%.\n"
    )
    print("| class | variant | caught |")
    print("|---|---|---:|")
    for defect, variants in VARIANTS.items():
        for v in variants:
            c = by_variant[(defect.value, v)]
            if c["n"]:
                print(f"| {defect.value} | {v} | {c['caught']}/{c['n']} |")
    if misses:
        print("\n### Missed\n")
        for tid, style, form, verdict, hard, why in misses:
            print(f"- `{tid}` ({style}, {form}): {verdict}, hard {hard}; {why}")
    if false_rejects:
        print("\n### False rejects\n")
        for tid, reasons, why in false_rejects:
            print(f"- `{tid}`: {reasons}; {why}")
    if args.json:
        args.json.write_text(json.dumps([with_environment(r) for r in rows], indent=1))
    return 0


def forms_recall(args, cfg, rubric) -> int:
    """Recall per class and false rejects on labelled task directories (`--forms`)."""
    items = []
    for d in args.forms:
        labels = json.loads((d / "labels.json").read_text())
        tasks = {t.id: t for t in import_dir(d)[0]}
        missing = sorted(set(labels) - set(tasks))
        if missing:
            raise SystemExit(f"{d}/labels.json: no task for {missing}")
        items += [(labels[i], tasks[i]) for i in sorted(labels)]
    if not args.no_seeds:
        items += [("clean", t) for t in load_seeds()]
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(lambda it: judge(it[1], cfg, rubric), items))
    wall = time.monotonic() - t0
    per: dict[str, Counter] = defaultdict(Counter)
    rows, notes = [], []
    for (label, task), (ev, d) in zip(items, results, strict=True):
        hard = sorted(c.value for c in d.hard)
        rejected = d.verdict == Verdict.REJECTED
        hit = label != "clean" and rejected and label in hard
        per[label]["n"] += 1
        per[label]["hit" if label != "clean" else "rejected"] += hit or (
            label == "clean" and rejected
        )
        per[label]["rejected_any"] += rejected
        rows.append({"task": task.id, "label": label, "verdict": d.verdict.value, "hard": hard,
                     "defects": [f.text()[:300] for f in ev.defects()]})  # fmt: skip
        if (label == "clean") == rejected or (label != "clean" and not hit):
            notes.append(
                (task.id, label, d.verdict.value, hard, [f.text()[:200] for f in ev.defects()][:4])
            )
    print(f"## Audit recall on labelled task sets {[str(d) for d in args.forms]} "
          f"({len(items)} tasks, {wall:.0f} s)\n")  # fmt: skip
    print("| class | tasks | caught (class named) | recall | rejected at all |")
    print("|---|---:|---:|---:|---:|")
    for label in sorted(k for k in per if k != "clean"):
        c = per[label]
        rate = 100 * c["hit"] / c["n"]
        print(f"| {label} | {c['n']} | {c['hit']} | {rate:.0f}% | {c['rejected_any']} |")
    c = per["clean"]
    if c["n"]:
        print(f"\nFalse rejects on clean controls: {c['rejected']}/{c['n']} "
              f"({100 * c['rejected'] / c['n']:.1f}%)\n")  # fmt: skip
    if notes:
        print("### Missed, and clean controls rejected\n")
        for tid, label, verdict, hard, why in notes:
            print(f"- `{tid}` ({label}): {verdict}, hard {hard}; {why}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
