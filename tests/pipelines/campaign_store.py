"""A store holding a small t1 pool for the campaign tests (the `t1_store` fixture)."""

from __future__ import annotations

from pathlib import Path

from tasks.corpus import load_seeds
from tasks.model import Lineage, Task
from tasks.pools import Pool
from warehouse import record_pool

TRAIN = ("vc-gitignore-untrack", "sa-dedupe-hardlinks")  # the tiny-cpu preset's training seeds
HELD_OUT = "sa-fix-snapshot-script-filenames"  # the tiny-cpu preset's evaluation task


def child_of(parent: Task) -> Task:
    """A round-1 task derived from `parent` (what synthesis would make of it)."""
    return parent.model_copy(
        update={
            "id": f"{parent.id}-ext",
            "instruction": parent.instruction + "\nAlso keep a log of what you changed.\n",
            "lineage": Lineage(
                parents=[parent.content_hash],
                root_seed=parent.content_hash,
                round=1,
                operator="extend",
                source_pool=Pool.RST.value,
            ),
        }
    )


def t1_store_at(store: Path) -> tuple[Path, list[Task], Task]:
    """A store whose t1 v1 holds the two training seeds and a child of the held-out task."""
    seeds = {t.id: t for t in load_seeds()}
    train = [seeds[i] for i in TRAIN]
    child = child_of(seeds[HELD_OUT])
    record_pool(store, Pool.T1, [*train, child], tasks=[seeds[HELD_OUT], *train, child])
    return store, train, child
