"""A reproducible sample of public Harbor tasks for the false-reject measurement.

    python benchmarks/public_sample.py DIR [--seed 1] [--n 40]

DIR is a checkout's `environments_harbor/` of github:zjysteven/terminal-bench-env. The
filter keeps tasks an honest solution can be written for in minutes and that build from
this machine's archives: the Ubuntu 24.04 base, instruction <= 2,300 characters,
`tests/test_outputs.py` <= 4,500, environment files <= 60 kB, and no service, JVM, GPU
framework or compiler toolchain installed by the Dockerfile (`EXCLUDED`). Prints the
sample in draw order, one id a line; benchmarks/public_solutions/README.md says which
drawn tasks got a solution and why the others did not.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

EXCLUDED = re.compile(
    r"torch|tensorflow|spark|java|jdk|maven|gradle|postgres|mysql|mariadb|mongo|redis|"
    r"nginx|apache|kafka|elasticsearch|gcc|g\+\+|clang|\bmake\b|build-essential|cargo|rustc|golang",
    re.I,
)
LIMITS = {"instruction.md": 2_300, "tests/test_outputs.py": 4_500}
ENV_BYTES = 60_000


def eligible(task: Path) -> bool:
    try:
        texts = {name: (task / name).read_text() for name in LIMITS}
        dockerfile = (task / "environment" / "Dockerfile").read_text()
    except (OSError, UnicodeDecodeError):
        return False
    if any(len(texts[name]) > cap for name, cap in LIMITS.items()):
        return False
    env = sum(f.stat().st_size for f in (task / "environment").rglob("*") if f.is_file())
    if env > ENV_BYTES or "ubuntu-24-04" not in dockerfile:
        return False
    commands = [ln for ln in dockerfile.splitlines() if not ln.lstrip().startswith("#")]
    commands = [ln for ln in commands if not ln.lstrip().upper().startswith(("FROM", "COPY"))]
    return not EXCLUDED.search("\n".join(commands))


def draw(root: Path, seed: int, n: int) -> list[str]:
    ids = sorted(p.name for p in root.iterdir() if p.is_dir() and eligible(p))
    return random.Random(seed).sample(ids, min(n, len(ids)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    ids = sorted(p.name for p in args.dir.iterdir() if p.is_dir() and eligible(p))
    print(f"# {len(ids)} eligible; seed {args.seed}", flush=True)
    for task in draw(args.dir, args.seed, args.n):
        print(task)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
