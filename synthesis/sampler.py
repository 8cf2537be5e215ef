"""The round sampler: which parent gets which rewrite operator, under caps, deterministically.

Given the parents of a round (the WHOLE accepted pool so far: the seeds and every task an
earlier round accepted) and the operator registry, `sample_round` returns up to `budget`
assignments. Parents are ordered by a seeded weighted shuffle (Efraimidis-Spirakis keys
`u ** (1 / w)`) with weight

    w(parent) = 1 / ((1 + accepted descendants of its root seed) * (1 + its accepted children))

so under-extended lineages come first and each lineage's total weight stays near one however
many members it has. The same inputs and seed always give the same assignments, so an
interrupted round re-derives exactly the candidates it had.

A parent whose free reward cannot come under the cap with a two-assertion extension (its nop
share, `nop_passed / (assertions + 2)`, above `free_reward_cap`) is not sampled: every child
would be discarded as `free_reward`.

Depth: the first `ceil(deep_share * budget)` assignments of a round go to tasks earlier rounds
accepted (when the pool has any), visited in a weighted shuffle of their own whose weight is
`w(parent) * depth` (depth: stages, the core task included), so extensions of extensions are
made every round and chains grow deeper than one rewrite (depth here: rewrites from the root
seed plus one); the rest of the round follows the
weighted order over the whole pool. Without it, a corpus with many seeds spends whole rounds
on fresh seeds (each has weight 1), and chains stay shallow.

A parent prefers the operators (then families) its lineage has used least, then the families
fewer parents of the round can use (so a parent with one feasible family is not capped out by
one that had others), ties broken by the seed.

Caps (defaults in `Caps`, documented in docs/synthesis.md):
- children per parent per round (`children_per_parent`);
- share of the round's budget descending from one lineage root (`root_share`);
- share per task category (`category_share`);
- share per rewrite family (`family_share`).
A share cap allows `max(1, ceil(share * budget))` assignments.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from synthesis.operators.extension import Operator, Parent


@dataclass(frozen=True)
class Caps:
    """Per-round caps on the sampler. Shares are fractions of the round's budget."""

    children_per_parent: int = 2
    root_share: float = 0.25
    category_share: float = 0.4
    family_share: float = 0.25
    # Share of a round reserved for extending tasks earlier rounds accepted (0: none).
    deep_share: float = 0.5

    def __post_init__(self) -> None:
        if self.children_per_parent < 1:
            raise ValueError(f"children_per_parent must be >= 1, got {self.children_per_parent!r}")
        for name in ("root_share", "category_share", "family_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if not 0 <= self.deep_share <= 1:
            raise ValueError(f"deep_share must be in [0, 1], got {self.deep_share!r}")

    @staticmethod
    def limit(share: float, budget: int) -> int:
        return max(1, math.ceil(share * budget))


@dataclass(frozen=True)
class Assignment:
    """One planned candidate: apply `operator` to the parent `parent_hash` in `round`."""

    round: int
    slot: int
    parent_hash: str
    operator: str
    family: str
    root_seed: str
    category: str

    @property
    def key(self) -> str:
        """Identity of the assignment across re-runs (resume looks candidates up by it)."""
        return f"{self.round}:{self.parent_hash}:{self.operator}"

    def rng(self, seed: int) -> random.Random:
        """The random stream the operator gets: fixed by the campaign seed and the key."""
        return random.Random(f"{seed}:{self.key}")


def feasible_operators(parent: Parent, ops: dict[str, Operator]) -> list[str]:
    return [name for name, op in sorted(ops.items()) if op.feasible(parent) is None]


def weight(parent: Parent, descendants: Mapping[str, int], children: Mapping[str, int]) -> float:
    """Sampling weight: toward lineages (root seeds) and parents extended least so far."""
    return 1.0 / ((1 + descendants.get(parent.root_seed, 0)) * (1 + children.get(parent.hash, 0)))


def free_reward_blocked(parent: Parent, cap: float) -> bool:
    """True when no two-assertion extension could bring the parent's nop share under `cap`."""
    p = parent.profile
    if p.nop_passed is None or not p.assertions:
        return False
    return p.nop_passed / (p.assertions + 2) > cap


def sample_round(
    parents: list[Parent],
    ops: dict[str, Operator],
    *,
    budget: int,
    round_: int,
    seed: int,
    caps: Caps | None = None,
    descendants: Mapping[str, int] | None = None,
    children: Mapping[str, int] | None = None,
    free_reward_cap: float = 1.0,
) -> list[Assignment]:
    """Up to `budget` assignments for `round_` (see the module docstring for order and caps).

    Parents are visited in the weighted order, one child each per pass, so a round spreads
    over as many parents as the caps allow before any parent gets a second child. Operator
    preference: see the module docstring.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget!r}")
    caps = caps or Caps()
    descendants, children = descendants or {}, children or {}
    rng = random.Random(f"{seed}:round:{round_}")
    # A parent's hash renders its whole bundle: computed once here, not per visit below
    # (the passes visit every parent once per child allowed: minutes at campaign scale).
    hash_of = {id(p): p.hash for p in parents}
    root_of = {id(p): p.root_seed for p in parents}
    pool = [
        p
        for p in sorted(parents, key=lambda p: hash_of[id(p)])
        if not free_reward_blocked(p, free_reward_cap)
    ]
    draws = {hash_of[id(p)]: rng.random() for p in pool}
    keys = {
        hash_of[id(p)]: draws[hash_of[id(p)]] ** (1.0 / weight(p, descendants, children))
        for p in pool
    }
    order = sorted(pool, key=lambda p: (-keys[hash_of[id(p)]], hash_of[id(p)]))
    deep_keys = {
        hash_of[id(p)]: draws[hash_of[id(p)]]
        ** (1.0 / (weight(p, descendants, children) * (len(p.chain) + 1)))
        for p in pool
        if p.chain
    }
    deep = sorted(
        (p for p in pool if p.chain), key=lambda p: (-deep_keys[hash_of[id(p)]], hash_of[id(p)])
    )
    feasible = {hash_of[id(p)]: feasible_operators(p, ops) for p in order}
    # how many parents could use each family: a parent prefers families fewer others can use,
    # so the family cap does not leave a parent with one family out of the round
    demand = Counter(f for names in feasible.values() for f in {ops[n].family for n in names})
    prefs: dict[str, list[str]] = {}
    for p in order:
        names = list(feasible[hash_of[id(p)]])
        rng.shuffle(names)
        used_ops = Counter(p.chain)
        used_fams = Counter(ops[n].family for n in p.chain if n in ops)
        prefs[hash_of[id(p)]] = sorted(
            names, key=lambda n: (used_ops[n], used_fams[ops[n].family], demand[ops[n].family])
        )
    root_cap = caps.limit(caps.root_share, budget)
    cat_cap = caps.limit(caps.category_share, budget)
    fam_cap = caps.limit(caps.family_share, budget)
    roots: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    fams: Counter[str] = Counter()
    taken: dict[str, set[str]] = {hash_of[id(p)]: set() for p in order}
    given: Counter[str] = Counter()  # children assigned so far, per parent hash
    out: list[Assignment] = []

    def fill(parents: list[Parent], limit: int) -> None:
        for n in range(caps.children_per_parent):
            for p in parents:
                if len(out) >= limit:
                    return
                h = hash_of[id(p)]
                if given[h] > n:
                    continue  # one child per parent per pass
                root, cat = root_of[id(p)], p.task.category.value
                if roots[root] >= root_cap or cats[cat] >= cat_cap:
                    continue
                for name in prefs[h]:
                    fam = ops[name].family
                    if name in taken[h] or fams[fam] >= fam_cap:
                        continue
                    out.append(Assignment(round_, len(out), h, name, fam, root, cat))
                    given[h] += 1
                    taken[h].add(name)
                    roots[root] += 1
                    cats[cat] += 1
                    fams[fam] += 1
                    break

    if caps.deep_share > 0 and deep:
        fill(deep, min(budget, math.ceil(caps.deep_share * budget)))
    fill(order, budget)
    return out
