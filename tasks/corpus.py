"""Reading many tasks at once: the bundled seed corpus and bulk imports.

Bulk work never stops at a bad task: each one becomes a `Reject` row with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError

from tasks.errors import TaskFormatError
from tasks.harbor import load_harbor
from tasks.model import Task
from tasks.terminal_bench import load_terminal_bench

SEED_DIR = Path(__file__).resolve().parent / "seeds"


class TaskFormat(StrEnum):
    HARBOR = "harbor"
    TERMINAL_BENCH = "terminal-bench"


@dataclass(frozen=True)
class Reject:
    path: str
    reason: str


def detect_format(task_dir: Path) -> TaskFormat | None:
    if (task_dir / "task.toml").is_file():
        return TaskFormat.HARBOR
    if (task_dir / "task.yaml").is_file():
        return TaskFormat.TERMINAL_BENCH
    return None


def load_task(task_dir: Path | str, fmt: TaskFormat | str | None = None) -> Task:
    """Load one task directory in the given (or detected) layout."""
    task_dir = Path(task_dir)
    fmt = TaskFormat(fmt) if fmt else detect_format(task_dir)
    if fmt is None:
        raise TaskFormatError(task_dir, None, "neither task.toml (Harbor) nor task.yaml found")
    if fmt == TaskFormat.HARBOR:
        return load_harbor(task_dir)
    return load_terminal_bench(task_dir)


def task_dirs(root: Path) -> Iterator[Path]:
    """Immediate subdirectories of `root` (a directory of tasks), sorted."""
    for p in sorted(root.iterdir()):
        if p.is_dir() and not p.name.startswith((".", "_")):
            yield p


def import_dir(
    root: Path | str, fmt: TaskFormat | str | None = None
) -> tuple[list[Task], list[Reject]]:
    """Load every task under `root`; malformed ones become rejects with reasons."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(root, None, "not a directory")
    tasks: list[Task] = []
    rejects: list[Reject] = []
    for d in task_dirs(root):
        try:
            tasks.append(load_task(d, fmt))
        except (TaskFormatError, ValidationError, UnicodeDecodeError, OSError) as e:
            rejects.append(Reject(str(d), str(e)))
    return tasks, rejects


def seed_paths() -> list[Path]:
    return list(task_dirs(SEED_DIR)) if SEED_DIR.is_dir() else []


def load_seeds() -> list[Task]:
    """The bundled seed corpus (raises on a malformed seed: seeds are ours to keep valid)."""
    return [load_harbor(p) for p in seed_paths()]
