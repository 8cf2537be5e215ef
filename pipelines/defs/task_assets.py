"""Task sources: the bundled seed corpus."""

from collections import Counter

import dagster as dg

from pipelines.defs.resources import ForgeConfig
from tasks.corpus import SEED_DIR, load_seeds
from tasks.pools import Pool
from warehouse import record_pool


def category_markdown(counts: Counter) -> str:
    rows = "\n".join(f"| {c} | {n} |" for c, n in sorted(counts.items()))
    return "| category | tasks |\n| --- | --- |\n" + rows


@dg.asset(group_name="tasks", kinds={"parquet"})
def seed_corpus(context: dg.AssetExecutionContext, forge: ForgeConfig) -> dg.MaterializeResult:
    """The bundled seed tasks, recorded in the warehouse as pool 'seed'."""
    seeds = load_seeds()
    pv = record_pool(forge.store_path, Pool.SEED, [t.content_hash for t in seeds], tasks=seeds)
    counts = Counter(t.category.value for t in seeds)
    return dg.MaterializeResult(
        metadata={
            "tasks": len(seeds),
            "pool_version": pv.version,
            "path": str(SEED_DIR),
            "categories": dg.MetadataValue.md(category_markdown(counts)),
        }
    )
