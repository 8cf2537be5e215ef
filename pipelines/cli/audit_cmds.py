"""`t1 audit`, `t1 select`, `t1 preflight`: the audit and T1 selection from the command line.

`t1 audit DIR` audits any Harbor / Terminal-Bench directory (a directory of tasks, or one
task) and prints its funnel; `t1 audit run-all` is the one-command path from synthesis
output in the warehouse (or the seeds when there is none) to the funnel, score
distributions, composition chart, a T1 pool file and a pre-flight figure. See docs/audit.md.
Errors are one line naming the file or option.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from audit.artifacts import run_all, write_reports
from audit.intake import read_corpus, source_label
from audit.judge_exec import ExecConfig
from audit.judge_llm import LlmConfig
from audit.pools import T1, audit_candidates, import_tmax, record_t1
from audit.preflight import run_preflight
from audit.reports import funnel_counts, write_preflight
from audit.rubric import load_rubric
from audit.selection import (
    STAGES,
    SelectionConfig,
    SelectionResult,
    Stage,
    audit_version,
    run_selection,
)
from audit.verdict import Verdict
from pipelines.cli.output import dumps, phase_progress, stdout
from pipelines.cli.root import app
from tasks.errors import TaskFormatError
from tasks.pools import Pool
from warehouse import load_pool, pool_tasks, resolve_store_path
from warehouse.recording import writable_store

console = Console(stderr=True)  # progress, notes and errors
out_console = stdout()  # data: the funnel table, run-all's summary


class Backend(StrEnum):
    LOCAL = "local"
    DOCKER = "docker"


class _AuditGroup(TyperGroup):
    """`t1 audit DIR ...` runs the `dir` command when DIR is not one of the subcommands."""

    # Unannotated on purpose: typer vendors its own click, whose Context type varies by version.
    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "dir", self.commands["dir"], args
        return super().resolve_command(ctx, args)


audit_app = typer.Typer(
    cls=_AuditGroup,
    help="Audit tasks: `t1 audit DIR` for a Harbor/Terminal-Bench directory, or a recorded "
    "pool (default: synthesis output, else the seeds), with executable (and optional LLM) "
    "judges.",
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


BackendOpt = Annotated[
    Backend, typer.Option("--backend", help="Sandbox backend for the audit's trials.")
]
StaticOpt = Annotated[
    bool,
    typer.Option("--static", help="Read the bundles only; run no sandbox trial."),
]


def _config(
    rubric: str,
    workers: int,
    reruns: int,
    mutants: int,
    until: Stage,
    backend: Backend = Backend.LOCAL,
    static: bool = False,
    source: str | None = None,
    task_workers: int = 1,
) -> SelectionConfig:
    try:
        r = load_rubric(rubric)
        llm = LlmConfig.from_env()  # a malformed T1_LLM_TIMEOUT_S is a one-line error too
    except ValueError as e:
        _error(e)
        raise typer.Exit(2) from e
    return SelectionConfig(
        rubric=r,
        exec=ExecConfig(
            backend=backend.value,
            static_only=static,
            reruns=reruns,
            max_mutants=mutants,
            workers=workers,
        ),
        llm=llm,
        until=until,
        source=source,
        task_workers=task_workers,
    )


def _print_funnel(result: SelectionResult, until: Stage, before: list[tuple[str, int, str]]):
    """The funnel: intake rows first, then every stage run, with its rejects' finding codes."""
    table = Table(title=f"audit funnel ({result.version})")
    table.add_column("stage")
    table.add_column("entered", justify="right")
    table.add_column("outcomes")
    table.add_column("reject / error reasons (tasks per code)")
    for name, n, text in before:
        table.add_row(name, str(n), text, "")
    rows = [o.to_record(result.version) for o in result.outcomes]
    for f in funnel_counts(rows)[: STAGES.index(until) + 1]:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(f.outcomes.items()))
        reasons = ", ".join(f"{k} {v}" for k, v in f.reasons.items())
        table.add_row(f.stage.value, str(f.entered), outcomes, reasons)
    out_console.print(table)


def _write_rejects(result: SelectionResult, out: Path) -> Path:
    """rejects.jsonl: one line per rejected (or undecided) task and stage, with its typed
    defect findings, for reading the rejects."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rejects.jsonl"
    with open(path, "w") as f:
        for o in result.outcomes:
            if o.verdict not in (Verdict.REJECTED, Verdict.ERROR):
                continue
            doc = {
                "task_id": o.task_id,
                "task_hash": o.task_hash,
                "stage": o.stage.value,
                "verdict": o.verdict.value,
                "findings": [x.model_dump(mode="json") for x in o.findings],
                "reasons": o.reasons,
            }
            f.write(dumps(doc) + "\n")
    return path


def _error(e: object) -> None:
    """A one-line error (never wrapped at the terminal's width)."""
    console.print(f"[red]error:[/red] {e}", soft_wrap=True, highlight=False)


def _note(line: str) -> None:
    """A note on stderr (a base image being built or waited for)."""
    console.print(line, highlight=False, markup=False)


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
    backend: BackendOpt = Backend.LOCAL,
    static: StaticOpt = False,
) -> None:
    """Audit a pool (default: synthesis output, else the seeds) up to stage S; `t1 audit DIR`
    audits a directory (see `t1 audit dir --help`)."""
    if ctx.invoked_subcommand is not None:
        return
    st = _store(store)
    cfg = _config(rubric, workers, reruns, mutants, stage, backend, static)
    tasks, source = audit_candidates(st, pool)
    tasks = tasks[:limit] if limit is not None else tasks
    llm = "with the LLM judge" if cfg.llm else "executable judge only"
    console.print(f"auditing {len(tasks)} tasks from {source} ({llm}) -> {st.root}")
    with phase_progress() as update:
        result = run_selection(st, tasks, cfg, progress=update, log=_note)
    _print_funnel(result, stage, [])
    console.print(f"measured {len(result.measured)} tasks, scored {len(result.scored)}")
    files = write_reports(st, result.version, out, None, result.hashes())
    files.append(_write_rejects(result, out))
    console.print(f"reports: {', '.join(str(f) for f in files)}")


@audit_app.command("dir")
def audit_dir(
    directory: Annotated[
        Path, typer.Argument(help="A Harbor/Terminal-Bench task directory, or a directory of them.")
    ],  # fmt: skip
    store: StoreOpt = None,
    backend: BackendOpt = Backend.LOCAL,
    static: StaticOpt = False,
    sample: Annotated[
        int | None, typer.Option(help="Audit a seeded sample of N task directories.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    stage: Annotated[Stage, typer.Option(help="Run stages 1..S.")] = Stage.REAUDIT,
    rubric: RubricOpt = "t1",
    workers: Annotated[int, typer.Option(help="Trials run concurrently per task.")] = 2,
    task_workers: Annotated[int, typer.Option(help="Tasks measured concurrently.")] = 1,
    reruns: Annotated[int, typer.Option(help="Plain oracle reruns (verdict stability).")] = 2,
    mutants: Annotated[int, typer.Option(help="Solution step mutants per task.")] = 6,
    out: OutOpt = DEFAULT_OUT,
) -> None:
    """Audit every task of DIR (Harbor or Terminal-Bench): dense verifiers stay dense, the
    source directory is recorded with each task, and the funnel is printed; rejects are
    written to OUT/rejects.jsonl with their typed findings."""
    try:
        intake = read_corpus(directory, sample, seed)
    except TaskFormatError as e:
        _error(e)
        raise typer.Exit(2) from e
    st = _store(store)
    source = source_label(directory)
    cfg = _config(rubric, workers, reruns, mutants, stage, backend, static, source, task_workers)
    judges = "static evidence only" if static else f"sandbox backend {backend.value}"
    judges += ", with the LLM judge" if cfg.llm else ""
    console.print(f"auditing {len(intake.tasks)} tasks from {source} ({judges}) -> {st.root}")
    result = run_selection(st, intake.tasks, cfg)
    picked = len(intake.tasks) + len(intake.rejects)
    malformed: dict[str, int] = {}
    for r in intake.rejects:
        key = r.reason.split(": ", 1)[-1][:50]
        malformed[key] = malformed.get(key, 0) + 1
    before = [("directories", intake.found, f"sampled {picked}" if sample else "")]
    before.append(
        ("import", picked, f"loaded {len(intake.tasks)}, malformed {len(intake.rejects)}")
    )
    _print_funnel(result, stage, before)
    for r in intake.rejects[:20]:
        console.print(f"[yellow]malformed[/yellow] {r.path}: {r.reason}")
    if not intake.tasks:  # nothing could be audited: a failure, not a clean run (it exited 0)
        _error(f"no task of {directory} loads: {len(intake.rejects)} malformed (see above)")
        raise typer.Exit(1)
    binary = sum(t.binary_verifier for t in intake.tasks)
    console.print(
        f"{len(intake.tasks) - binary} per-assertion verifiers, {binary} reward-only; "
        f"measured {len(result.measured)} tasks, scored {len(result.scored)}"
    )
    files = write_reports(st, result.version, out, None, result.hashes())
    files.append(_write_rejects(result, out))
    console.print(f"reports: {', '.join(str(f) for f in files)}")


@audit_app.command("run-all")
def run_all_cmd(
    store: StoreOpt = None,
    backend: BackendOpt = Backend.LOCAL,
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
    cfg = _config(rubric, workers, reruns, mutants, Stage.REAUDIT, backend)
    with phase_progress() as update:
        summary = run_all(
            st, out, cfg, pool=pool, size=size, preflight_n=preflight_n, limit=limit,
            progress=update, log=_note,
        )  # fmt: skip
    out_console.print_json(dumps(summary.model_dump(mode="json")))


@audit_app.command("import-tmax")
def import_tmax_cmd(
    root: Annotated[Path, typer.Argument(help="Directory of Harbor or Terminal-Bench tasks.")],
    store: StoreOpt = None,
) -> None:
    """Import a public corpus as the TMax pool (dense verifiers stay dense)."""
    try:
        pv, rejects = import_tmax(_store(store), root)
    except TaskFormatError as e:
        _error(e)
        raise typer.Exit(2) from e
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
        _error(f"only {T1} is selected by the audit (got {pool.value!r})")
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
        _error(e)
        raise typer.Exit(2) from e
    report = run_preflight(tasks, n, pool=pool, seed=seed, workers=workers, store=st)
    files = write_preflight(report, out)
    console.print(
        f"pre-flight {pool}: {report.usable}/{report.sampled} usable "
        f"({100 * report.share:.0f}%), reasons {report.reasons()} -> {files[1]}"
    )
