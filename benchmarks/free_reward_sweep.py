"""Where one probe of the executable judge flags a task, with only that probe on (every
other probe off, as tests/audit/forms.py does): the seeds, the three fixture sets (labelled
defects and clean controls) and the public tasks with honest solutions
(benchmarks/public_solutions).

    python benchmarks/free_reward_sweep.py [--probe free_reward|other_inputs|chance] \
        [--seeds] [--sets] [--public DIR]

DIR is a checkout's `environments_harbor/` of github:zjysteven/terminal-bench-env. Prints one
row per task: seconds, its label, its id, the probe's count, `.` where it did not run
(`free_reward`: how many build steps the image was built without, run only where a nop run
passes something; `other_inputs`: 1 where the solution ran through on other records and lost
an assertion that checks work, run where the instruction declares text inputs and the
solution writes a new checked output; `chance`: 1 where the verdict changed when every process
of the verifier drew the same entropy, run everywhere, without the plain reruns that follow),
the probe's evidence or `-`. A flag on a clean control or a public task is read by hand
(docs/audit.md). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from audit.judge_exec import ExecConfig, run_exec_judge  # noqa: E402
from audit.verdict import Code  # noqa: E402
from tasks.corpus import import_dir, load_seeds  # noqa: E402
from tasks.model import Task  # noqa: E402
from tests.audit.forms import OFF  # noqa: E402

SETS = ("audit-blind", "audit-independent", "audit-forms")


def tasks(seeds: bool, sets: bool, public: Path | None) -> list[tuple[str, Task]]:
    out: list[tuple[str, Task]] = []
    if seeds:
        out += [("seed", t) for t in load_seeds()]
    for name in SETS if sets else ():
        base = ROOT / "tests" / "fixtures" / name
        labels_path = base / "labels.json"
        labels = json.loads(labels_path.read_text()) if labels_path.exists() else {}
        out += [(f"{name}:{labels.get(t.id, '?')}", t) for t in import_dir(base)[0]]
    if public is not None:
        from public_false_rejects import SOLUTIONS, with_solution

        for d in sorted(p for p in SOLUTIONS.iterdir() if (p / "solve.sh").is_file()):
            out.append(("public", with_solution(public / d.name, d / "solve.sh", 1800)))
    return out


# probe -> (what it turns on, the code it finds, its measure, a phrase only its findings say)
PROBES = {
    "free_reward": (dict(free_reward=True), Code.FREE_REWARD, "dropped_build_steps", ""),
    "other_inputs": (dict(perturb=True), Code.SOLUTION_SHORTCUT, "other_inputs_lost", "runs to"),
    "chance": (
        dict(chance=True, chance_reruns=0),
        Code.STOCHASTIC_VERDICT,
        "stochastic_verdict",
        "",
    ),
}


def row(item: tuple[str, Task], probe: str) -> str:
    label, task = item
    on, code, measure, phrase = PROBES[probe]
    t0 = time.monotonic()
    try:
        ev = run_exec_judge(task, ExecConfig(**{**OFF, **on}, workers=1))
        found = [f.evidence[:170] for f in ev.findings if f.code == code and phrase in f.evidence]
        said = " | ".join(found) or "-"
        count = f"{ev.measures[measure]:.0f}" if measure in ev.measures else "."
    except Exception as e:  # noqa: BLE001 - a row, the sweep goes on
        said, count = f"error: {e!r:.150}", "?"
    return f"{time.monotonic() - t0:6.1f}s {label:34s} {task.id:50s} {count:>2s} {said}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", choices=sorted(PROBES), default="free_reward")
    ap.add_argument("--seeds", action="store_true")
    ap.add_argument("--sets", action="store_true")
    ap.add_argument("--public", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    with ThreadPoolExecutor(a.workers) as pool:
        for line in pool.map(lambda t: row(t, a.probe), tasks(a.seeds, a.sets, a.public)):
            print(line, flush=True)


if __name__ == "__main__":
    main()
