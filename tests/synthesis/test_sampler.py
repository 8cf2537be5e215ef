"""The round sampler: caps respected, deterministic by seed, spread over parents first,
weighted toward under-extended lineages, parents with too much free reward left out."""

from __future__ import annotations

from collections import Counter

import pytest

from synthesis.operators import CHORES, Extension, Operator, Parent, RewriteContext, registry
from synthesis.profile import OutputFile, TaskProfile
from synthesis.sampler import Caps, sample_round
from tasks.model import Category, Lineage, Task

CATEGORIES = [Category.DATA_SCIENCE, Category.DEBUGGING, Category.VERSION_CONTROL]
RUNNER = b"python3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier\n"


CHECKS = b"""def test_x():
    assert open('/app/out.csv').read() and open('/app/out.json').read()
"""


def make_parent(
    i: int,
    root: int,
    category: Category,
    chain: tuple[str, ...] = (),
    nop_passed: int | None = None,
) -> Parent:
    """A parent with a CSV and a JSON output, so every programmatic operator is feasible."""
    task = Task(
        id=f"p{i}",
        name=f"p{i}",
        instruction=f"task {i}\n",
        category=category,
        solution={"solve.sh": f"echo {i} > /app/out.csv\n".encode()},
        verifier={"test.sh": RUNNER, "test_outputs.py": CHECKS},
        lineage=Lineage(root_seed=f"{root:064x}", round=1),
    )
    outs = [
        OutputFile(path="/app/out.csv", rel="out.csv", size=10, mode=0o644, sha256="0" * 64,
                   created=True, kind="csv", lines=3, header="a,b", columns=2),
        OutputFile(path="/app/out.json", rel="out.json", size=10, mode=0o644, sha256="1" * 64,
                   created=True, kind="json", lines=1, header="{}"),
    ]  # fmt: skip
    profile = TaskProfile(task_hash=task.content_hash, workdir="/app", ok=True, outputs=outs,
                          assertions=4, nop_passed=nop_passed)  # fmt: skip
    return Parent(task, profile, chain)


@pytest.fixture
def parents() -> list[Parent]:
    # 24 parents over 6 roots (4 each) and 3 categories.
    return [make_parent(i, i % 6, CATEGORIES[i % 3]) for i in range(24)]


def test_caps_respected(parents) -> None:
    ops = registry(CHORES)
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
    ops = registry(CHORES)
    few = [make_parent(i, 0, Category.DEBUGGING) for i in range(5)]  # one root, one category
    plan = sample_round(few, ops, budget=8, round_=1, seed=0, caps=Caps())
    assert len(plan) == 2  # ceil(0.25 * 8) per root
    one = sample_round(few[:1], ops, budget=8, round_=1, seed=0, caps=Caps(root_share=1.0,
                       category_share=1.0, family_share=1.0, children_per_parent=3))  # fmt: skip
    assert len(one) == 3 and len({a.operator for a in one}) == 3


def test_deterministic_by_seed(parents) -> None:
    ops = registry(CHORES)
    a = sample_round(parents, ops, budget=10, round_=4, seed=11)
    b = sample_round(list(reversed(parents)), ops, budget=10, round_=4, seed=11)
    c = sample_round(parents, ops, budget=10, round_=4, seed=12)
    assert a == b  # input order does not matter
    assert a != c  # the seed does
    assert sample_round(parents, ops, budget=10, round_=5, seed=11) != a


def test_prefers_operators_the_lineage_has_not_used() -> None:
    ops = registry(CHORES)
    used = tuple(n for n in ops if n != "wc_report")
    p = make_parent(0, 0, Category.DEBUGGING, chain=used)
    plan = sample_round([p], ops, budget=1, round_=9, seed=0, caps=Caps(root_share=1.0))
    assert [a.operator for a in plan] == ["wc_report"]


def test_spreads_over_parents_before_second_children(parents) -> None:
    plan = sample_round(parents, registry(CHORES), budget=10, round_=1, seed=0,
                        caps=Caps(root_share=1.0, category_share=1.0))  # fmt: skip
    assert len({a.parent_hash for a in plan}) == 10


def test_under_extended_lineages_come_first(parents) -> None:
    """Roots 0-2 already have many accepted descendants, roots 3-5 none: with room for six
    children, the six go mostly to the fresh roots (weights 1/11 against 1)."""
    roots = {p.root_seed for p in parents}
    busy = {r for r in roots if int(r, 16) < 3}
    descendants = {r: 10 for r in busy}
    fresh_share = []
    for seed in range(20):
        plan = sample_round(parents, registry(CHORES), budget=6, round_=3, seed=seed,
                            caps=Caps(root_share=1.0, category_share=1.0),
                            descendants=descendants)  # fmt: skip
        fresh_share.append(sum(a.root_seed not in busy for a in plan) / len(plan))
    assert sum(fresh_share) / len(fresh_share) > 0.8, fresh_share
    # Without the counts the same sampler spreads evenly (the weights, not the order, decide).
    even = [
        sum(a.root_seed not in busy for a in sample_round(parents, registry(CHORES), budget=6,
            round_=3, seed=seed, caps=Caps(root_share=1.0, category_share=1.0))) / 6
        for seed in range(20)
    ]  # fmt: skip
    assert 0.3 < sum(even) / len(even) < 0.7, even


def test_parents_with_free_reward_over_the_cap_are_left_out() -> None:
    ops = registry(CHORES)
    # 4 assertions, nop passes 2: even with 2 more assertions nop earns 2/6 > 0.2.
    blocked = make_parent(0, 0, Category.DEBUGGING, nop_passed=2)
    ok = make_parent(1, 1, Category.DEBUGGING, nop_passed=1)  # 1/6 <= 0.2
    caps = Caps(root_share=1.0, category_share=1.0, family_share=1.0)
    plan = sample_round([blocked, ok], ops, budget=4, round_=1, seed=0, free_reward_cap=0.2,
                        caps=caps)  # fmt: skip
    assert plan and {a.parent_hash for a in plan} == {ok.hash}
    assert sample_round([blocked], ops, budget=4, round_=1, seed=0, free_reward_cap=0.5)


def test_guards() -> None:
    with pytest.raises(ValueError, match="children_per_parent"):
        Caps(children_per_parent=0)
    with pytest.raises(ValueError, match="family_share"):
        Caps(family_share=0)
    with pytest.raises(ValueError, match="budget"):
        sample_round([], registry(CHORES), budget=-1, round_=1, seed=0)


def simulate(caps: Caps, rounds: int, seeds: int = 27, budget: int = 8) -> list[Counter[int]]:
    """Rounds of the sampler over `seeds` one-seed lineages, every assignment accepted (a
    new parent with the chain grown by one): the chain depths each round accepts."""
    ops = registry(CHORES)
    pool = [make_parent(i, i, CATEGORIES[i % 3]) for i in range(seeds)]
    descendants: Counter[str] = Counter()
    children: Counter[str] = Counter()
    out = []
    for r in range(1, rounds + 1):
        plan = sample_round(pool, ops, budget=budget, round_=r, seed=0, caps=caps,
                            descendants=descendants, children=children)  # fmt: skip
        by_hash = {p.hash: p for p in pool}
        depths: Counter[int] = Counter()
        for a in plan:
            p = by_hash[a.parent_hash]
            child = make_parent(
                1000 + len(pool), int(p.root_seed, 16), p.task.category, (*p.chain, a.operator)
            )
            pool.append(child)
            descendants[p.root_seed] += 1
            children[p.hash] += 1
            depths[len(child.chain)] += 1
        out.append(depths)
    return out


def test_the_default_sampler_extends_extensions_every_round() -> None:
    """With the seed corpus's breadth (27 extendable seeds, 8 a round), half of each round
    extends tasks earlier rounds accepted, deepest lineages weighted up: depth-3 chains by
    round 3, and every round after the first extends an extension."""
    rounds = simulate(Caps(), 15)
    assert all(sum(n for d, n in r.items() if d >= 2) >= 4 for r in rounds[1:]), rounds
    assert max(rounds[2]) >= 3, rounds[2]
    assert max(d for r in rounds for d in r) >= 5
    # Fresh seeds still get the other half: breadth is kept.
    assert all(r[1] >= 3 for r in rounds[:4]), rounds[:4]


def test_deep_share_zero_leaves_depth_to_chance() -> None:
    """Without the reservation the order is breadth-first by weight: fewer extensions of
    extensions in the early rounds (measured here, same seed)."""

    def deep(rounds: list[Counter[int]]) -> int:
        return sum(n for r in rounds for d, n in r.items() if d >= 2)

    assert deep(simulate(Caps(deep_share=0.0), 4)) < deep(simulate(Caps(), 4))
    with pytest.raises(ValueError, match="deep_share"):
        Caps(deep_share=1.5)


class _Only(Operator):
    """An operator feasible for the parents named in `ids` only."""

    ids: frozenset[str] = frozenset()

    def feasible(self, parent: Parent) -> str | None:
        return None if parent.task.id in self.ids else "not this parent"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        raise NotImplementedError


def test_a_parent_with_one_family_is_not_capped_out_by_one_with_more() -> None:
    """Regression: with a budget of 2 (one per family) the parent that could use either
    family took the only family the other could use, and the round made one candidate."""

    def op(name: str, family: str, ids: set[str]) -> type[_Only]:
        return type(name, (_Only,), {"name": name, "family": family, "ids": frozenset(ids)})

    ops = {n: op(n, "text", {"p0", "p1"})() for n in ("a_text", "c_text", "d_text", "e_text")}
    ops["b_record"] = op("b_record", "record", {"p0"})()
    two = [make_parent(0, 0, Category.DEBUGGING), make_parent(1, 1, Category.DATA_SCIENCE)]
    for seed in range(8):  # whichever parent the weighted order visits first
        plan = sample_round(two, ops, budget=2, round_=1, seed=seed, caps=Caps())
        assert len(plan) == 2 and {a.family for a in plan} == {"text", "record"}
        assert next(a.operator for a in plan if a.parent_hash == two[0].hash) == "b_record"
