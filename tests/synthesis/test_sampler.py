"""The round sampler: caps respected, deterministic by seed, spread over parents first."""

from __future__ import annotations

from collections import Counter

import pytest

from synthesis.operators import Parent, registry
from synthesis.profile import OutputFile, TaskProfile
from synthesis.sampler import Caps, sample_round
from tasks.model import Category, Lineage, Task

CATEGORIES = [Category.DATA_SCIENCE, Category.DEBUGGING, Category.VERSION_CONTROL]
RUNNER = b"python3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier\n"


def make_parent(i: int, root: int, category: Category, chain: tuple[str, ...] = ()) -> Parent:
    """A parent with a CSV and a JSON output, so every programmatic operator is feasible."""
    task = Task(
        id=f"p{i}",
        name=f"p{i}",
        instruction=f"task {i}\n",
        category=category,
        solution={"solve.sh": f"echo {i} > /app/out.csv\n".encode()},
        verifier={"test.sh": RUNNER, "test_outputs.py": b"def test_x():\n    pass\n"},
        lineage=Lineage(root_seed=f"{root:064x}", round=1),
    )
    outs = [
        OutputFile(path="/app/out.csv", rel="out.csv", size=10, mode=0o644, sha256="0" * 64,
                   created=True, kind="csv", lines=3, header="a,b", columns=2),
        OutputFile(path="/app/out.json", rel="out.json", size=10, mode=0o644, sha256="1" * 64,
                   created=True, kind="json", lines=1, header="{}"),
    ]  # fmt: skip
    profile = TaskProfile(task_hash=task.content_hash, workdir="/app", ok=True, outputs=outs)
    return Parent(task, profile, chain)


@pytest.fixture
def parents() -> list[Parent]:
    # 24 parents over 6 roots (4 each) and 3 categories.
    return [make_parent(i, i % 6, CATEGORIES[i % 3]) for i in range(24)]


def test_caps_respected(parents) -> None:
    ops = registry()
    caps = Caps(children_per_parent=2, root_share=0.25, category_share=0.4, family_share=0.2)
    plan = sample_round(parents, ops, budget=12, round_=2, seed=3, caps=caps)
    assert len(plan) == 12
    by_parent = Counter(a.parent_hash for a in plan)
    assert max(by_parent.values()) <= 2
    assert max(Counter(a.root_seed for a in plan).values()) <= 3  # ceil(0.25 * 12)
    assert max(Counter(a.category for a in plan).values()) <= 5  # ceil(0.4 * 12)
    assert max(Counter(a.family for a in plan).values()) <= 3  # ceil(0.2 * 12)
    assert len({(a.parent_hash, a.operator) for a in plan}) == len(plan)
    assert [a.slot for a in plan] == list(range(12))
    assert all(a.round == 2 for a in plan)


def test_caps_bind_when_parents_are_few() -> None:
    ops = registry()
    few = [make_parent(i, 0, Category.DEBUGGING) for i in range(5)]  # one root, one category
    plan = sample_round(few, ops, budget=8, round_=1, seed=0, caps=Caps())
    assert len(plan) == 2  # ceil(0.25 * 8) per root
    one = sample_round(few[:1], ops, budget=8, round_=1, seed=0, caps=Caps(root_share=1.0,
                       category_share=1.0, family_share=1.0, children_per_parent=3))  # fmt: skip
    assert len(one) == 3 and len({a.operator for a in one}) == 3


def test_deterministic_by_seed(parents) -> None:
    ops = registry()
    a = sample_round(parents, ops, budget=10, round_=4, seed=11)
    b = sample_round(list(reversed(parents)), ops, budget=10, round_=4, seed=11)
    c = sample_round(parents, ops, budget=10, round_=4, seed=12)
    assert a == b  # input order does not matter
    assert a != c  # the seed does
    assert sample_round(parents, ops, budget=10, round_=5, seed=11) != a


def test_prefers_operators_the_lineage_has_not_used() -> None:
    ops = registry()
    used = tuple(n for n in ops if n != "wc_report")
    p = make_parent(0, 0, Category.DEBUGGING, chain=used)
    plan = sample_round([p], ops, budget=1, round_=9, seed=0, caps=Caps(root_share=1.0))
    assert [a.operator for a in plan] == ["wc_report"]


def test_spreads_over_parents_before_second_children(parents) -> None:
    plan = sample_round(parents, registry(), budget=10, round_=1, seed=0,
                        caps=Caps(root_share=1.0, category_share=1.0))  # fmt: skip
    assert len({a.parent_hash for a in plan}) == 10


def test_guards() -> None:
    with pytest.raises(ValueError, match="children_per_parent"):
        Caps(children_per_parent=0)
    with pytest.raises(ValueError, match="family_share"):
        Caps(family_share=0)
    with pytest.raises(ValueError, match="budget"):
        sample_round([], registry(), budget=-1, round_=1, seed=0)
