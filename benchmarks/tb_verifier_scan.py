"""What the Terminal-Bench v1 conversion makes of a corpus's verifiers, per dataset.

    python benchmarks/tb_verifier_scan.py DIR

DIR holds dataset directories of Terminal-Bench v1 tasks (DIR/<dataset>/<task>/task.yaml, as
Terminal-Bench's adapted datasets are laid out). For every task: whether it needs the internet
at verify time and why (`tasks.terminal_bench.verifier_network_need`, counted by kind), and
whether the conversion installs a verifier venv. A task that does not load is counted with its error
class. Prints one table; asserts nothing.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tasks.terminal_bench import load_terminal_bench, verifier_network_need


def scan(root: Path) -> dict[str, Counter[str]]:
    rows: dict[str, Counter[str]] = {}
    for dataset in sorted(p for p in root.iterdir() if p.is_dir()):
        counts: Counter[str] = Counter()
        for task_dir in sorted(p for p in dataset.iterdir() if (p / "task.yaml").is_file()):
            try:
                task = load_terminal_bench(task_dir)
            except Exception as e:  # noqa: BLE001 - a bad task is a count, not a crash
                counts[f"load error: {type(e).__name__}"] += 1
                continue
            counts["tasks"] += 1
            body = (task_dir / "run-tests.sh").read_text(errors="replace")
            body = body.split("\n", 1)[1] if body.startswith("#!") else body
            need = verifier_network_need(body, {**task.environment.files, **task.verifier})
            counts[f"internet {need.kind.value if need else 'no'}"] += 1
            counts[f"venv {'yes' if task.environment.verifier_packages else 'no'}"] += 1
        rows[dataset.name] = counts
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="directory of Terminal-Bench v1 datasets")
    args = parser.parse_args()
    for dataset, counts in scan(args.root).items():
        print(f"{dataset}: {counts.pop('tasks', 0)} tasks")
        for key, n in sorted(counts.items()):
            print(f"  {key:<40} {n:>5}")


if __name__ == "__main__":
    main()
