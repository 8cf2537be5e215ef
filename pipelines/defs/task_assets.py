"""Task sources: the seed corpus and the imported TMax pool."""

from collections import Counter
from pathlib import Path

import dagster as dg

from pipelines.defs.resources import ForgeConfig
from tasks.corpus import SEED_DIR, import_dir, load_seeds
from warehouse import record_pool, record_tasks


def category_markdown(counts: Counter) -> str:
    rows = "\n".join(f"| {c} | {n} |" for c, n in sorted(counts.items()))
    return "| category | tasks |\n| --- | --- |\n" + rows


@dg.asset(group_name="tasks", kinds={"parquet"})
def seed_corpus(context: dg.AssetExecutionContext, forge: ForgeConfig) -> dg.MaterializeResult:
    """The bundled seed tasks, recorded in the warehouse as pool 'seed'."""
    seeds = load_seeds()
    pv = record_pool(forge.store_path, "seed", [t.content_hash for t in seeds], tasks=seeds)
    counts = Counter(t.category.value for t in seeds)
    return dg.MaterializeResult(
        metadata={
            "tasks": len(seeds),
            "pool_version": pv.version,
            "path": str(SEED_DIR),
            "categories": dg.MetadataValue.md(category_markdown(counts)),
        }
    )


@dg.asset(group_name="tasks", kinds={"parquet"})
def tmax_pool(context: dg.AssetExecutionContext, forge: ForgeConfig) -> dg.MaterializeResult:
    """An imported public corpus with binary verifiers (empty when T1_TMAX_DIR is unset)."""
    if not forge.tmax_dir:
        return dg.MaterializeResult(metadata={"tasks": 0, "source": "none configured"})
    tasks, rejects = import_dir(Path(forge.tmax_dir))
    tasks = [
        t.model_copy(
            update={
                "binary_verifier": True,
                "lineage": t.lineage.model_copy(update={"source_pool": "tmax"}),
            }
        )
        for t in tasks
    ]
    record_tasks(forge.store_path, tasks, pool="tmax")
    if tasks:
        record_pool(forge.store_path, "tmax", [t.content_hash for t in tasks])
    for r in rejects[:20]:
        context.log.warning(f"rejected {r.path}: {r.reason}")
    return dg.MaterializeResult(
        metadata={"tasks": len(tasks), "rejects": len(rejects), "source": forge.tmax_dir}
    )
