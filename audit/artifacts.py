"""One run's audit artifacts, end to end: audit the candidates (synthesis output, else the
seeds), record RST and T1, pre-flight T1, and write the funnel, score distributions,
composition chart/table, the T1 pool file and the pre-flight figure under one directory.

This is what `t1 audit run-all` runs and what the Dagster assets attach; it calls only the
tested functions of the other audit modules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from audit.pools import T1, audit_candidates, record_rst, record_t1
from audit.preflight import PreflightReport, run_preflight
from audit.reports import (
    composition,
    funnel_counts,
    write_composition,
    write_funnel,
    write_preflight,
    write_scores,
)
from audit.selection import SelectionConfig, final_decisions, run_selection, stage_rows
from audit.verdict import Verdict
from warehouse.pools import load_pool, pool_tasks
from warehouse.recording import StoreRef, writable_store


class RunSummary(BaseModel):
    source: str
    version: str
    candidates: int
    measured: int
    accepted: int
    t1_size: int
    t1_version: int | None
    rst_version: int | None
    preflight_share: float | None
    files: list[str] = Field(default_factory=list)


def write_t1_file(store: StoreRef, out: Path) -> Path | None:
    """t1_pool.parquet: the latest T1 version's members (rank order), bundles left out."""
    try:
        table = load_pool(writable_store(store), T1, bundles=False)
    except ValueError:
        return None
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / "t1_pool.parquet")
    return out / "t1_pool.parquet"


def write_reports(
    store: StoreRef, version: str, out: Path, selected: int | None, only: set[str] | None = None
) -> list[Path]:
    """Funnel, score distributions and T1 composition (falls back to all accepted tasks);
    `only` restricts the funnel and scores to one run's task hashes."""
    files = write_funnel(funnel_counts(stage_rows(store, version, only)), out, selected)
    finals = final_decisions(store, version, only)
    files += write_scores(finals, out)
    try:
        t1 = load_pool(writable_store(store), T1, bundles=False)
        cats, title = t1.column("category").to_pylist(), f"T1 composition ({t1.num_rows} tasks)"
    except ValueError:
        cats = [f.category for f in finals if f.verdict == Verdict.ACCEPTED]
        title = f"Accepted tasks by category ({len(cats)})"
    if cats:
        files += write_composition(composition(cats), out, title)
    return files


def run_all(
    store: StoreRef,
    out: Path,
    cfg: SelectionConfig,
    *,
    pool: str | None = None,
    size: int = 15_000,
    preflight_n: int = 20,
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> RunSummary:
    """Audit, select, pre-flight and report; see the module docstring."""
    st = writable_store(store)
    tasks, source = audit_candidates(st, pool)
    if limit is not None:
        tasks = tasks[:limit]
    rst = record_rst(st, tasks) if source.startswith("synthesis") else None
    result = run_selection(st, tasks, cfg, progress=progress, log=log)
    t1, members = record_t1(st, result.version, size, result.hashes())
    files: list[Path] = []
    t1_file = write_t1_file(st, out)
    if t1_file:
        files.append(t1_file)
    files += write_reports(st, result.version, out, len(members), result.hashes())
    report: PreflightReport | None = None
    if t1 is not None and preflight_n > 0:
        t1_tasks = pool_tasks(load_pool(st, T1))
        report = run_preflight(t1_tasks, preflight_n, pool=T1, workers=cfg.exec.workers, store=st)
        files += write_preflight(report, out)
    finals = final_decisions(st, result.version, result.hashes())
    accepted = sum(f.verdict == Verdict.ACCEPTED for f in finals)
    summary = RunSummary(
        source=source,
        version=result.version,
        candidates=len(tasks),
        measured=len(result.measured),
        accepted=accepted,
        t1_size=len(members),
        t1_version=t1.version if t1 else None,
        rst_version=rst.version if rst else None,
        preflight_share=report.share if report else None,
        files=[str(p) for p in files],
    )
    (out / "summary.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=1))
    return summary
