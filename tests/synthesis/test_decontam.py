"""Decontamination: MinHash estimates track exact Jaccard, and planted near-duplicates of
benchmark tasks (Harbor and Terminal-Bench layouts) are caught while unrelated ones pass."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from synthesis.decontam import BenchmarkIndex, DecontamConfig, MinHasher, jaccard, shingles
from synthesis.operators import CHORES, Parent, RewriteContext, build_child, registry
from synthesis.profile import OutputFile, TaskProfile
from synthesis.rounds import synthesize
from synthesis.sampler import Assignment
from synthesis.validate import Verdict
from tasks.corpus import SEED_DIR, load_seeds
from tasks.harbor import write_harbor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_minhash_estimates_jaccard() -> None:
    rng = random.Random(0)
    words = [f"w{rng.randrange(400)}" for _ in range(600)]
    a = " ".join(words)
    b = " ".join(words[:450] + [f"x{i}" for i in range(150)])
    sa, sb = shingles(a, 3), shingles(b, 3)
    h = MinHasher(256, seed=1)
    est = float((h.signature(sa) == h.signature(sb)).mean())
    assert abs(est - jaccard(sa, sb)) < 0.08, (est, jaccard(sa, sb))
    assert float((h.signature(sa) == h.signature(sa)).mean()) == 1.0
    assert h.signature(np.zeros(0, np.uint64)).shape == (256,)


def _perturb(text: str, every: int) -> str:
    """Replace every `every`-th word: a near-duplicate, not a copy."""
    words = text.split(" ")
    return " ".join("CHANGED" if i % every == 0 else w for i, w in enumerate(words))


def _parent(task) -> Parent:
    wd = task.environment.workdir
    out = OutputFile(path=f"{wd}/out.txt", rel="out.txt", size=10, mode=0o644, sha256="0" * 64,
                     created=True, kind="text", lines=2, header="x")  # fmt: skip
    return Parent(
        task, TaskProfile(task_hash=task.content_hash, workdir=wd, ok=True, outputs=[out])
    )


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    """A benchmark dir: a near-duplicate of one seed (Harbor), plus Terminal-Bench fixtures."""
    root = tmp_path_factory.mktemp("bench")
    seed = next(t for t in load_seeds() if t.id == "sa-access-log-csv-report")
    planted = seed.model_copy(
        update={
            "id": "bench-log-report",
            "instruction": _perturb(seed.instruction, 9),
            "solution": {"solve.sh": _perturb(seed.solution["solve.sh"].decode(), 7).encode()},
        }
    )
    write_harbor(planted, root / "bench-log-report")
    for d in (FIXTURES / "terminal-bench").iterdir():
        shutil.copytree(d, root / d.name)
    return root


def test_planted_near_duplicates_are_caught(benchmark) -> None:
    index = BenchmarkIndex.from_dir(benchmark, DecontamConfig(threshold=0.5))
    assert "bench-log-report" in index.ids and len(index) >= 2
    seeds = {t.id: t for t in load_seeds()}
    dup = index.overlap(seeds["sa-access-log-csv-report"])
    assert dup.nearest == "bench-log-report" and index.is_contaminated(dup), dup
    clean = [index.overlap(t) for i, t in seeds.items() if i != "sa-access-log-csv-report"]
    assert max(o.score for o in clean) < 0.5, max(clean, key=lambda o: o.score)
    # A rewritten child still embeds the benchmark task: containment keeps it flagged.
    parent = _parent(seeds["sa-access-log-csv-report"])
    op = registry(CHORES)["sha256_manifest"]
    child = build_child(
        parent, op.name, op.family, 1, op.extend(parent, RewriteContext(1, random.Random(0)))
    )
    assert index.is_contaminated(index.overlap(child))


def test_round_engine_drops_contaminated_candidates_before_the_sandbox(benchmark) -> None:
    index = BenchmarkIndex.from_dir(benchmark)
    seeds = {t.id: t for t in load_seeds()}
    op = registry(CHORES)["wc_report"]
    results = {}
    for sid in ("sa-access-log-csv-report", "ds-sensor-summary-stats"):
        parent = _parent(seeds[sid])
        a = Assignment(1, 0, parent.hash, op.name, op.family, parent.root_seed, "x")
        results[sid] = synthesize(a, parent, op, seed=0, index=index)
    dirty, clean = results["sa-access-log-csv-report"], results["ds-sensor-summary-stats"]
    assert dirty.verdict == Verdict.CONTAMINATED and "bench-log-report" in dirty.detail
    assert clean.verdict is None and clean.overlap is not None and clean.overlap.score < 0.5


def test_runner_boilerplate_is_not_overlap() -> None:
    # Every seed ships the same run_checks.py; it must not make unrelated tasks look alike.
    seeds = load_seeds()
    index = BenchmarkIndex(seeds[:1])
    other = next(t for t in seeds[1:] if t.verifier.get("run_checks.py"))
    assert index.overlap(other).fields["verifier"] < 0.3
    assert SEED_DIR.is_dir()
