"""Audit, pools and reports. Every asset calls the audit package; decisions are stored per
(task hash, audit version), so re-reading a selection costs a warehouse read, not trials."""

import base64
from pathlib import Path

import dagster as dg

from audit.artifacts import write_reports, write_t1_file
from audit.pools import (
    T1,
    TMAX,
    audit_candidates,
    category_cap,
    record_rst,
    record_t1,
    recorded_tasks,
)
from audit.preflight import run_preflight
from audit.reports import funnel_counts
from audit.selection import SelectionResult, run_selection, stage_rows
from pipelines.defs.jobs import AUDIT_POOL
from pipelines.defs.resources import ForgeConfig
from pipelines.progress import Heartbeat
from tasks.pools import Pool
from warehouse import load_pool, open_snapshot, pool_tasks
from warehouse.lineage import relatives


def _selection(forge: ForgeConfig) -> SelectionResult:
    store = forge.open_store()
    tasks, _ = audit_candidates(store, forge.audit_pool or None)
    return run_selection(store, tasks, forge.selection_config())


def _png_markdown(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f"![{path.stem}](data:image/png;base64,{data})"


@dg.asset(group_name="audit", deps=["validation_trials"], kinds={"bubblewrap"}, pool=AUDIT_POOL)
def audit_results(context: dg.AssetExecutionContext, forge: ForgeConfig) -> dg.MaterializeResult:
    """The five-stage audit of the synthesis output (the seeds when there is none)."""
    store = forge.open_store()
    tasks, source = audit_candidates(store, forge.audit_pool or None)
    context.log.info(f"auditing {len(tasks)} tasks ({source})")
    with Heartbeat(context.log.info, "audit") as beat:  # stages and trials, never silent
        result = run_selection(
            store, tasks, forge.selection_config(), progress=beat.update, log=beat.note
        )
    funnel = funnel_counts(stage_rows(store, result.version, result.hashes()))
    lines = ["| stage | entered | outcomes |", "| --- | --- | --- |"]
    lines += [
        f"| {f.stage.value} | {f.entered} | "
        + ", ".join(f"{k}={v}" for k, v in sorted(f.outcomes.items()))
        + " |"
        for f in funnel
    ]
    return dg.MaterializeResult(
        metadata={
            "source": source,
            "audit_version": result.version,
            "candidates": len(tasks),
            "measured_now": len(result.measured),
            "repaired": len(result.repaired),
            "funnel": dg.MetadataValue.md("\n".join(lines)),
        }
    )


@dg.asset(group_name="pools", deps=[audit_results], kinds={"parquet"}, pool=AUDIT_POOL)
def rst_pool(forge: ForgeConfig) -> dg.MaterializeResult:
    """RST: every task synthesis accepted."""
    pv = record_rst(forge.open_store(), recorded_tasks(forge.store_path, (Pool.RST,)))
    return dg.MaterializeResult(
        metadata={
            "pool": Pool.RST.value,
            "tasks": pv.tasks if pv else 0,
            "pool_version": pv.version if pv else 0,
        }
    )


# After rst_pool too: T1 is selected from RST, so RST's blocking checks (decontamination)
# must pass before a T1 version is recorded.
@dg.asset(group_name="pools", deps=[audit_results, rst_pool], kinds={"parquet"}, pool=AUDIT_POOL)
def t1_pool(forge: ForgeConfig) -> dg.MaterializeResult:
    """T1: the audit's accepted tasks in quality-rank order, up to the target size, no
    category over its quota share."""
    result = _selection(forge)
    pv, members = record_t1(
        forge.store_path, result.version, forge.t1_size, result.hashes(), forge.category_quota
    )
    out = Path(forge.reports_dir)
    path = write_t1_file(forge.store_path, out)
    return dg.MaterializeResult(
        metadata={
            "pool": Pool.T1.value,
            "tasks": len(members),
            "pool_version": pv.version if pv else 0,
            "audit_version": result.version,
            "file": dg.MetadataValue.path(str(path)) if path else "none",
        }
    )


@dg.asset(group_name="pools", kinds={"parquet"})
def tmax_pool(forge: ForgeConfig) -> dg.MaterializeResult:
    """TMax: an imported corpus, dense verifiers kept dense (empty when T1_TMAX_DIR is unset)."""
    if not forge.tmax_dir:
        return dg.MaterializeResult(metadata={"tasks": 0, "source": "none configured"})
    from audit.pools import import_tmax

    pv, rejects = import_tmax(forge.store_path, forge.tmax_dir)
    return dg.MaterializeResult(
        metadata={
            "pool": Pool.TMAX.value,
            "tasks": pv.tasks if pv else 0,
            "pool_version": pv.version if pv else 0,
            "rejects": len(rejects),
            "source": forge.tmax_dir,
        }
    )


@dg.asset(group_name="pools", deps=[t1_pool], kinds={"matplotlib"})
def pool_reports(forge: ForgeConfig) -> dg.MaterializeResult:
    """Funnel, score distributions and the category composition chart of T1 (Figure 3)."""
    result = _selection(forge)
    out = Path(forge.reports_dir)
    files = write_reports(forge.store_path, result.version, out, None, result.hashes())
    metadata: dict = {"files": len(files), "directory": dg.MetadataValue.path(str(out))}
    for f in files:
        if f.suffix == ".png":
            metadata[f.stem] = dg.MetadataValue.md(_png_markdown(f))
        elif f.suffix == ".md":
            metadata[f.stem + "_table"] = dg.MetadataValue.md(f.read_text())
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(asset=t1_pool, blocking=True)
def t1_preflight(forge: ForgeConfig) -> dg.AssetCheckResult:
    """A sample of T1 yields usable per-assertion records above the threshold."""
    try:
        tasks = pool_tasks(load_pool(forge.store_path, T1))
    except ValueError:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "no t1 pool recorded"})
    report = run_preflight(
        tasks, forge.preflight_n, pool=T1, backend=forge.sandbox_backend, store=forge.store_path
    )
    return dg.AssetCheckResult(
        passed=report.share >= forge.preflight_threshold,
        metadata={
            "sampled": report.sampled,
            "usable": report.usable,
            "share": report.share,
            "threshold": forge.preflight_threshold,
        },
    )


@dg.asset_check(asset=t1_pool)
def t1_size_and_quotas(forge: ForgeConfig) -> dg.AssetCheckResult:
    """T1 is non-empty, within its target size, and no category exceeds its quota share."""
    try:
        table = load_pool(forge.store_path, T1, bundles=False)
    except ValueError:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "no t1 pool recorded"})
    cats = table.column("category").to_pylist()
    most = max((cats.count(c) for c in set(cats)), default=0)
    worst = most / len(cats) if cats else 0.0
    ok = 0 < len(cats) <= forge.t1_size and most <= category_cap(len(cats), forge.category_quota)
    return dg.AssetCheckResult(
        passed=ok,
        metadata={
            "tasks": len(cats),
            "largest_category_share": worst,
            "quota": forge.category_quota,
        },
    )


@dg.asset_check(asset=t1_pool, additional_deps=[tmax_pool])
def no_task_in_two_held_out_splits(forge: ForgeConfig) -> dg.AssetCheckResult:
    """No T1 task is, descends from, or is an ancestor of a held-out task: TMax, the benchmark
    split, or the default campaign's evaluation tasks (which the campaign then leaves out of
    training; a warning, not an error)."""
    from pipelines.campaign_deployment import CampaignRequest
    from tasks.corpus import load_seeds
    from training.campaign_config import load_campaign_config

    eval_ids = set(load_campaign_config(CampaignRequest().preset).eval_task_ids)
    eval_hashes = [t.content_hash for t in load_seeds() if t.id in eval_ids]
    with open_snapshot(forge.store_path) as snap:
        latest = snap.rows(
            "SELECT pool, task_hash FROM latest_pool_members WHERE pool IN ($t1, $tmax, $b)",
            {"t1": T1, "tmax": TMAX, "b": Pool.BENCHMARK},
        )
        t1 = {r["task_hash"] for r in latest if r["pool"] == T1}
        split = [r["task_hash"] for r in latest if r["pool"] != T1]
        near_split = t1 & relatives(snap, split)
        near_eval = t1 & relatives(snap, eval_hashes)
    return dg.AssetCheckResult(
        passed=not near_split and not near_eval,
        severity=dg.AssetCheckSeverity.ERROR if near_split else dg.AssetCheckSeverity.WARN,
        metadata={
            "related_to_tmax_or_benchmark": len(near_split),
            "related_to_campaign_eval_tasks": len(near_eval),
            "note": "the campaign excludes tasks related to its evaluation tasks",
        },
    )


@dg.asset_check(asset=rst_pool, blocking=True)
def rst_disjoint_from_benchmark(forge: ForgeConfig) -> dg.AssetCheckResult:
    """No RST task overlaps a task of the configured benchmark above the threshold."""
    if not forge.benchmark_dir:
        return dg.AssetCheckResult(passed=True, metadata={"benchmark": "none configured"})
    from synthesis.decontam import BenchmarkIndex

    index = BenchmarkIndex.from_dir(forge.benchmark_dir)
    tasks = recorded_tasks(forge.store_path, (Pool.RST,))
    threshold = forge.synth_config().decontam.threshold
    overlaps = [(t.id, index.overlap(t)) for t in tasks]
    hits = [(tid, o.nearest, o.score) for tid, o in overlaps if o.score >= threshold]
    worst = max((o.score for _, o in overlaps), default=0.0)
    return dg.AssetCheckResult(
        passed=not hits,
        metadata={
            "benchmark": forge.benchmark_dir,
            "benchmark_tasks": len(index),
            "checked": len(tasks),
            "over_threshold": len(hits),
            "max_overlap": worst,
            "threshold": threshold,
        },
    )
