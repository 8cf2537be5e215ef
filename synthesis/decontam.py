"""Decontamination: n-gram shingles + MinHash overlap of candidates with a held-out benchmark.

Every candidate is compared, field by field (instruction, solution, verifier), with every task
of a benchmark directory (Harbor or Terminal-Bench layout). For each pair the MinHash estimate
of the Jaccard similarity J is computed, and from it and the shingle-set sizes the containment
of the benchmark text in the candidate, C = J (|B| + |X|) / ((1 + J) |B|): a candidate that
embeds a benchmark task verbatim and appends requirements keeps a high containment while its
Jaccard falls. A pair's score is the larger of the two (containment only when the benchmark
field has at least `min_shingles` shingles); a candidate's score is its best pair's best field.
Candidates scoring at or above `threshold` are dropped and reported.

Runner boilerplate (the shared run_checks.py, test.sh/run-tests.sh entry scripts) is excluded
from the verifier text, or every task of our own layout would look alike.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tasks.corpus import import_dir
from tasks.model import Task

FIELDS = ("instruction", "solution", "verifier")
PRIME = (1 << 31) - 1
RUNNER_FILES = frozenset({"test.sh", "run-tests.sh", "run_checks.py"})
_TOKEN = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class DecontamConfig:
    threshold: float = 0.5
    ngram: int = 5
    num_perm: int = 128
    min_shingles: int = 20
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if self.ngram < 1 or self.num_perm < 8:
            raise ValueError(f"need ngram >= 1 and num_perm >= 8, got {self!r}")


def task_texts(task: Task) -> dict[str, str]:
    """The three compared texts of a task (verifier without runner boilerplate)."""

    def join(files: dict[str, bytes]) -> str:
        return "\n".join(files[p].decode("utf-8", "replace") for p in sorted(files))

    verifier = {p: b for p, b in task.verifier.items() if p.rsplit("/", 1)[-1] not in RUNNER_FILES}
    return {
        "instruction": task.instruction,
        "solution": join(task.solution or {}),
        "verifier": join(verifier),
    }


def shingles(text: str, n: int) -> np.ndarray:
    """Distinct 32-bit hashes of the word n-grams of `text` (lowercased alphanumeric tokens)."""
    tokens = _TOKEN.findall(text.lower())
    if not tokens:
        return np.zeros(0, dtype=np.uint64)
    grams = {" ".join(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1))}
    hashes = {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=4).digest(), "big") for g in grams
    }
    return np.fromiter(sorted(hashes), dtype=np.uint64, count=len(hashes))


class MinHasher:
    """`num_perm` universal hash functions (a x + b) mod p; signature = per-function minimum."""

    def __init__(self, num_perm: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, PRIME, size=num_perm, dtype=np.uint64)
        self.b = rng.integers(0, PRIME, size=num_perm, dtype=np.uint64)

    def signature(self, shingle_hashes: np.ndarray) -> np.ndarray:
        if shingle_hashes.size == 0:
            return np.full(self.a.shape, PRIME, dtype=np.uint64)
        # a < 2^31 and x < 2^32, so a * x + b < 2^64: no overflow in uint64.
        values = (self.a[:, None] * shingle_hashes[None, :] + self.b[:, None]) % PRIME
        return values.min(axis=1)  # (num_perm,)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two shingle arrays (for reports and tests)."""
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


@dataclass
class Overlap:
    """A candidate's closest benchmark task and its per-field scores."""

    score: float = 0.0
    nearest: str | None = None
    fields: dict[str, float] = field(default_factory=dict)


class BenchmarkIndex:
    """MinHash signatures of every benchmark task, per field, for fast all-pairs scoring."""

    def __init__(
        self, tasks: list[Task], cfg: DecontamConfig | None = None, name: str = ""
    ) -> None:
        self.cfg = cfg or DecontamConfig()
        self.name = name
        self.hasher = MinHasher(self.cfg.num_perm, self.cfg.seed)
        self.ids = [t.id for t in tasks]
        self.sigs: dict[str, np.ndarray] = {}  # field -> (B, num_perm)
        self.sizes: dict[str, np.ndarray] = {}  # field -> (B,)
        for f in FIELDS:
            sh = [shingles(task_texts(t)[f], self.cfg.ngram) for t in tasks]
            sigs = [self.hasher.signature(s) for s in sh]
            self.sigs[f] = np.stack(sigs) if sigs else np.zeros((0, self.cfg.num_perm), np.uint64)
            self.sizes[f] = np.array([s.size for s in sh], dtype=np.float64)
        self.rejects: list[str] = []

    @classmethod
    def from_dir(cls, root: Path | str, cfg: DecontamConfig | None = None) -> BenchmarkIndex:
        tasks, rejects = import_dir(root)
        index = cls(tasks, cfg, name=str(root))
        index.rejects = [f"{r.path}: {r.reason}" for r in rejects]
        return index

    def __len__(self) -> int:
        return len(self.ids)

    def overlap(self, task: Task) -> Overlap:
        """The candidate's best-matching benchmark task and its per-field scores."""
        if not self.ids:
            return Overlap()
        texts = task_texts(task)
        best = np.zeros(len(self.ids))
        per_field: dict[str, np.ndarray] = {}
        for f in FIELDS:
            sh = shingles(texts[f], self.cfg.ngram)
            if sh.size == 0:
                per_field[f] = np.zeros(len(self.ids))
                continue
            sig = self.hasher.signature(sh)
            j = (self.sigs[f] == sig[None, :]).mean(axis=1)  # (B,)
            sizes = self.sizes[f]
            with np.errstate(divide="ignore", invalid="ignore"):
                contain = np.where(
                    sizes >= self.cfg.min_shingles, j * (sizes + sh.size) / ((1 + j) * sizes), 0.0
                )
            score = np.clip(np.maximum(j, np.nan_to_num(contain)), 0.0, 1.0)
            score[sizes == 0] = 0.0
            per_field[f] = score
            best = np.maximum(best, score)
        i = int(best.argmax())
        return Overlap(
            score=float(best[i]),
            nearest=self.ids[i],
            fields={f: round(float(per_field[f][i]), 4) for f in FIELDS},
        )

    def is_contaminated(self, overlap: Overlap) -> bool:
        return overlap.score >= self.cfg.threshold
