"""`t1 audit`, `t1 select`, `t1 preflight`: the audit and T1 selection from the command line.

`t1 audit run-all` is the one-command path: from synthesis output in the warehouse (or the
seeds when there is none) it writes the funnel, score distributions, composition chart,
a T1 pool file and a pre-flight figure. See docs/audit.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from audit.artifacts import run_all, write_reports
from audit.judge_exec import ExecConfig
from audit.judge_llm import LlmConfig
from audit.pools import T1, audit_candidates, import_tmax, record_t1
from audit.preflight import run_preflight
from audit.reports import write_preflight
from audit.rubric import load_rubric
from audit.selection import STAGES, SelectionConfig, Stage, audit_version, run_selection
from pipelines.cli.output import phase_progress
from pipelines.cli.root import app
from tasks.pools import Pool
from warehouse import load_pool, pool_tasks, resolve_store_path
from warehouse.recording import writable_store

console = Console()
audit_app = typer.Typer(
    help="Audit tasks: five-stage selection with executable (and optional LLM) judges.",
    invoke_without_command=True,
)
app.add_typer(audit_app, name="audit")

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store", help="Warehouse directory (default: $T1_WAREHOUSE, else data/warehouse)."
    ),
]
RubricOpt = Annotated[str, typer.Option("--rubric", help="Rubric preset name or TOML path.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Directory for report files.")]
DEFAULT_OUT = Path("artifacts/audit")


def _config(rubric: str, workers: int, reruns: int, mutants: int, until: Stage) -> SelectionConfig:
    try:
        r = load_rubric(rubric)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    return SelectionConfig(
        rubric=r,
        exec=ExecConfig(reruns=reruns, max_mutants=mutants, workers=workers),
        llm=LlmConfig.from_env(),
        until=until,
    )


def _store(store: Path | None):
    return writable_store(resolve_store_path(store))


@audit_app.callback()
def audit(
    ctx: typer.Context,
    pool: Annotated[
        Pool | None,
        typer.Option(
            case_sensitive=False,
            help="Pool to audit (default: synthesis output, else the seeds).",
        ),
    ] = None,
    stage: Annotated[Stage, typer.Option(help="Run stages 1..S.")] = Stage.REAUDIT,
    store: StoreOpt = None,
    rubric: RubricOpt = "t1",
    workers: Annotated[int, typer.Option(help="Trials run concurrently per task.")] = 2,
    reruns: Annotated[int, typer.Option(help="Oracle reruns (verdict stability).")] = 2,
    mutants: Annotated[int, typer.Option(help="Solution mutants per task.")] = 6,
    limit: Annotated[int | None, typer.Option(help="Audit at most N candidates.")] = None,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Audit a pool (default: synthesis output, else the seeds) up to stage S."""
    if ctx.invoked_subcommand is not None:
        return
    st = _store(store)
    cfg = _config(rubric, workers, reruns, mutants, stage)
    tasks, source = audit_candidates(st, pool)
    tasks = tasks[:limit] if limit is not None else tasks
    llm = "with the LLM judge" if cfg.llm else "executable judge only"
    console.print(f"auditing {len(tasks)} tasks from {source} ({llm}) -> {st.root}")
    with phase_progress() as update:
        result = run_selection(st, tasks, cfg, progress=update)
    table = Table(title=f"audit {result.version}")
    table.add_column("stage")
    table.add_column("decided", justify="right")
    table.add_column("outcomes")
    for s in STAGES[: STAGES.index(stage) + 1]:
        rows = result.by_stage(s)
        counts: dict[str, int] = {}
        for o in rows:
            counts[o.verdict] = counts.get(o.verdict, 0) + 1
        table.add_row(s.value, str(len(rows)), ", ".join(f"{k} {v}" for k, v in counts.items()))
    console.print(table)
    console.print(f"measured {len(result.measured)} tasks, scored {len(result.scored)}")
    files = write_reports(st, result.version, out, None, result.hashes())
    console.print(f"reports: {', '.join(str(f) for f in files)}")


@audit_app.command("run-all")
def run_all_cmd(
    store: StoreOpt = None,
    out: OutOpt = DEFAULT_OUT,
    pool: Annotated[
        Pool | None,
        typer.Option(case_sensitive=False, help="Candidates (default: rst, else seeds)."),
    ] = None,
    size: Annotated[int, typer.Option(help="T1 target size (15000 at full scale).")] = 15_000,
    preflight_n: Annotated[int, typer.Option("--preflight-n", help="Pre-flight sample.")] = 20,
    rubric: RubricOpt = "t1",
    workers: int = 2,
    reruns: int = 2,
    mutants: int = 6,
    limit: Annotated[int | None, typer.Option(help="Audit at most N candidates.")] = None,
) -> None:
    """Audit, select T1, pre-flight it, and write every report file under --out."""
    st = _store(store)
    cfg = _config(rubric, workers, reruns, mutants, Stage.REAUDIT)
    with phase_progress() as update:
        summary = run_all(
            st, out, cfg, pool=pool, size=size, preflight_n=preflight_n, limit=limit,
            progress=update,
        )  # fmt: skip
    console.print_json(json.dumps(summary.model_dump(mode="json")))


@audit_app.command("import-tmax")
def import_tmax_cmd(
    root: Annotated[Path, typer.Argument(help="Directory of Harbor or Terminal-Bench tasks.")],
    store: StoreOpt = None,
) -> None:
    """Import a public corpus as the TMax pool (binary verifiers)."""
    pv, rejects = import_tmax(_store(store), root)
    for r in rejects:
        console.print(f"[yellow]rejected[/yellow] {r.path}: {r.reason}")
    if pv is None:
        console.print("[red]no task imported[/red]")
        raise typer.Exit(1)
    console.print(f"TMax version {pv.version}: {pv.tasks} tasks ({len(rejects)} rejected)")


@app.command("select")
def select(
    pool: Annotated[
        Pool, typer.Option(case_sensitive=False, help="Pool to build (only t1 is selected).")
    ] = T1,
    size: Annotated[int, typer.Option(help="Target size (15000 at full scale).")] = 15_000,
    store: StoreOpt = None,
    rubric: RubricOpt = "t1",
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Record T1: the audit's accepted tasks, best composite first, up to --size."""
    if pool != T1:
        console.print(f"[red]error:[/red] only {T1} is selected by the audit (got {pool.value!r})")
        raise typer.Exit(2)
    st = _store(store)
    version = audit_version(load_rubric(rubric), LlmConfig.from_env())
    pv, members = record_t1(st, version, size)
    if pv is None:
        console.print(f"[red]no accepted tasks under audit version {version}[/red]; run t1 audit")
        raise typer.Exit(1)
    console.print(f"{T1} version {pv.version}: {pv.tasks} tasks (audit {version})")
    write_reports(st, version, out, len(members))


@app.command("preflight")
def preflight(
    pool: Annotated[Pool, typer.Option(case_sensitive=False, help="Pool to sample.")] = T1,
    n: Annotated[int, typer.Option("--n", help="Tasks to sample.")] = 20,
    seed: int = 0,
    workers: int = 2,
    store: StoreOpt = None,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Run the oracle on N sampled pool tasks; report the share with per-assertion records."""
    st = _store(store)
    try:
        tasks = pool_tasks(load_pool(st, pool))
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    report = run_preflight(tasks, n, pool=pool, seed=seed, workers=workers, store=st)
    files = write_preflight(report, out)
    console.print(
        f"pre-flight {pool}: {report.usable}/{report.sampled} usable "
        f"({100 * report.share:.0f}%), reasons {report.reasons()} -> {files[1]}"
    )
