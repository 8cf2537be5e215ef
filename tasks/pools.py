"""Pool names: the one vocabulary for the task pools, in one case, everywhere.

The same lowercase names are used by the CLI (`--pool t1`), the warehouse (`pool_members.pool`,
`tasks.origin_pool`), the Dagster assets and the docs. `Pool.parse` accepts any case (`T1`,
`TMax`) and refuses an unknown name with one line listing the known ones, so a typo cannot
silently select nothing. The warehouse's SQL views also compare these columns case-blind.

This lives in `tasks/` (the leaf every stage imports) because a task's own lineage names its
source pool.
"""

from __future__ import annotations

from enum import StrEnum


class Pool(StrEnum):
    """A task pool. Stored, printed and documented by its lowercase value."""

    SEED = "seed"  # the bundled seed corpus
    RST = "rst"  # every task recursive synthesis accepted
    T1 = "t1"  # the audit's quality-ranked selection the campaign trains on
    TMAX = "tmax"  # an imported public corpus with binary verifiers
    BENCHMARK = "benchmark"  # a held-out evaluation split

    @classmethod
    def parse(cls, name: str | Pool) -> Pool:
        """The pool called `name` in any case; ValueError naming the known pools otherwise."""
        if isinstance(name, Pool):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            known = ", ".join(p.value for p in cls)
            raise ValueError(f"unknown pool {name!r}; pools are: {known}") from None
