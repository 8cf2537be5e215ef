"""Planted bad candidates: what validation catches, with which reason, and what it misses.

    python benchmarks/planted_candidates.py [--repeat 1] [--seed 0] [--workers 4]

For every defect class of `synthesis.planted`, every form (those validation claims to catch,
and the known misses in UNCLAIMED) is planted `--repeat` times with fresh random surface forms
on three real parents (a tiny task and two seeds), plus one defect-free control per parent
and repeat. Each candidate is validated in the sandbox. Prints, per class and form, how many
were rejected with the planted class's reason, rejected for another reason (which), or
accepted. Asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

from synthesis.operators import Parent, build_child
from synthesis.operators.extension import child_stage
from synthesis.planted import CLAIMED, UNCLAIMED, Defect, Planted, base, plant
from synthesis.profile import profile_task
from synthesis.validate import ValidationConfig, validate
from tasks.corpus import load_seeds
from tests.synthesis.tiny import tiny_parent

REAL = ("ds-multiple-regression", "sa-access-log-csv-report")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    parents: list[Parent] = [tiny_parent("tiny-planted")]
    for seed in (t for t in load_seeds() if t.id in REAL):
        profile, _ = profile_task(seed)
        parents.append(Parent(seed, profile))
    rng = random.Random(args.seed)
    items: list[tuple[Planted, Parent, bool]] = []
    for r in range(args.repeat):
        for defect in Defect:
            for i, form in enumerate((*CLAIMED[defect], *UNCLAIMED[defect])):
                parent = parents[(i + r) % len(parents)]
                claimed = form in CLAIMED[defect]
                items.append((plant(defect, parent, rng, form), parent, claimed))
        items += [(base(p, rng), p, True) for p in parents]
    cfg = ValidationConfig(reruns=2, max_repairs=0)

    def one(item: tuple[Planted, Parent, bool]) -> tuple[Planted, bool, str, bool]:
        planted, parent, claimed = item
        ext = planted.extension
        child = build_child(parent, "planted", "test", 1, ext)
        v = validate(child, parent, cfg, child_stage(parent, "planted", "test", 1, ext))
        named = planted.subject is None or planted.subject in v.offending
        return planted, claimed, v.verdict.value, named

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(one, items))
    table: dict[tuple[str, str, bool], Counter[str]] = defaultdict(Counter)
    for planted, claimed, verdict, named in results:
        cls = planted.defect.value if planted.defect else "control"
        right = verdict == planted.expect and named
        key = "right" if right else ("accepted" if verdict == "accepted" else f"as {verdict}")
        table[(cls, planted.form, claimed)][key] += 1
    print(f"{len(results)} planted candidates validated in {time.monotonic() - t0:.0f}s\n")
    print(f"{'class':20} {'form':22} {'claimed':8} outcome")
    for (cls, form, claimed), counts in sorted(table.items()):
        outcome = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
        print(f"{cls:20} {form:22} {'yes' if claimed else 'no':8} {outcome}")
    per_class: dict[str, Counter[str]] = defaultdict(Counter)
    for planted, claimed, verdict, named in results:
        if planted.defect and claimed:
            ok = verdict == planted.expect and named
            per_class[planted.defect.value]["right" if ok else "wrong"] += 1
    print("\nclaimed forms, right reason:")
    for cls, c in sorted(per_class.items()):
        print(f"  {cls:20} {c['right']}/{c['right'] + c['wrong']}")


if __name__ == "__main__":
    main()
