"""Reading an external corpus for the audit: a Harbor or Terminal-Bench directory (of tasks,
or one task), a seeded sample of it, and whether each verifier reports per assertion.

A verifier stays dense unless it truly reports reward only: `verifier_reporting` reads the
verifier's entry script (and the files it runs) for a per-assertion reporter our parsers
read (pytest with `-rA`, `--ctrf` or `--junitxml`; the shipped run_checks.py; a script that
writes ctrf.json or JUnit XML). Only a verifier with none of them that writes reward.txt is
`binary_verifier`; the decision is also measured at the pre-check (the oracle's report).
"""

from __future__ import annotations

import posixpath
import random
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.corpus import Reject, detect_format, import_dir, load_task
from tasks.errors import TaskFormatError
from tasks.model import Task

if TYPE_CHECKING:
    from warehouse.recording import StoreRef

IMPORT_ORIGIN = "import"  # not a pool: tasks recorded without being audited or pooled


class Reporting(StrEnum):
    PER_ASSERTION = "per_assertion"
    REWARD_ONLY = "reward_only"
    UNKNOWN = "unknown"


_PYTEST = re.compile(r"(?<![\w-])(py\.?test|-m\s+pytest)\b")
_DENSE_PYTEST = re.compile(r"(?<![\w-])(-rA|-r\s*A|-ra[A-Za-z]*A|--ctrf|--junit-?xml)")
_DENSE_WRITER = re.compile(r"ctrf\.json|junit\.xml|results\.xml|report\.xml|run_checks\.py")
_REWARD = re.compile(r"reward\.txt")


def verifier_reporting(task: Task) -> Reporting:
    """How the task's verifier reports (see the module docstring); pure."""
    texts = {n: b.decode("utf-8", "replace") for n, b in task.verifier.items() if len(b) < 1e6}
    entry = texts.get("test.sh", "")
    code = "\n".join(
        t for n, t in texts.items() if n.endswith((".sh", ".py", ".bash")) or t.startswith("#!")
    )
    for line in entry.splitlines():
        line = line.split("#", 1)[0]
        if _PYTEST.search(line) and _DENSE_PYTEST.search(line):
            return Reporting.PER_ASSERTION
    if _DENSE_WRITER.search(code):
        return Reporting.PER_ASSERTION
    if _REWARD.search(code):
        return Reporting.REWARD_ONLY
    return Reporting.UNKNOWN


def with_reporting(task: Task) -> Task:
    """`task`, marked `binary_verifier` when its verifier reports reward only (an explicit
    `[t1] binary_verifier = true` is kept)."""
    if task.binary_verifier or verifier_reporting(task) != Reporting.REWARD_ONLY:
        return task
    return task.model_copy(update={"binary_verifier": True})


@dataclass(frozen=True)
class Intake:
    """What `read_corpus` found: the tasks, the malformed directories, how many there were."""

    root: str
    tasks: list[Task]
    rejects: list[Reject]
    found: int


def read_corpus(root: Path | str, sample: int | None = None, seed: int = 0) -> Intake:
    """Every task under `root` (or `root` itself, when it is one task), optionally a seeded
    sample of `sample` directories drawn before loading, with each verifier's reporting
    decided. Malformed tasks are rejects, never exceptions; a `root`
    that is not a directory raises TaskFormatError (one line, naming it)."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(root, None, "not a directory")
    if detect_format(root) is not None:
        dirs = [root]
    else:
        dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    found = len(dirs)
    if sample is not None and sample < len(dirs):
        # random.Random(seed).sample of the sorted directories: the draw benchmarks/real_corpus.py
        # makes when every directory imports, so the two share built environments
        dirs = random.Random(seed).sample(dirs, sample)
    if len(dirs) == found and dirs != [root]:
        tasks, rejects = import_dir(root)
    else:
        tasks, rejects = [], []
        for d in dirs:
            try:
                tasks.append(load_task(d))
            except (TaskFormatError, ValueError, UnicodeDecodeError, OSError) as e:
                rejects.append(Reject(str(d), str(e)))
    return Intake(str(root), [with_reporting(t) for t in tasks], rejects, found)


def source_label(root: Path | str) -> str:
    """The source recorded with imported tasks: the directory's absolute path."""
    return posixpath.normpath(str(Path(root).resolve()))


def record_import(tasks: list[Task], root: Path | str, store: StoreRef = None) -> str:
    """Record imported tasks in the warehouse (origin `import`, source `root`), each with its
    verifier's reporting decided; returns the store's path."""
    from warehouse.recording import record_tasks, writable_store

    st = writable_store(store)
    record_tasks(
        st, [with_reporting(t) for t in tasks], pool=IMPORT_ORIGIN, source=source_label(root)
    )
    return str(st.root)
