"""`t1 task ...` and `t1 seeds`: check, run, import and format tasks."""

from __future__ import annotations

import dataclasses
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from pipelines.cli.output import dumps, fail, progress
from pipelines.cli.root import app
from pipelines.host import engine_for
from sandbox.base import SandboxUnavailable
from sandbox.build import BuildRow
from sandbox.check import TaskCheck, check_task
from sandbox.trial import agent_by_name, run_trial
from tasks.corpus import SEED_DIR, Reject, TaskFormat, import_dir, load_seeds, load_task
from tasks.environment import render_dockerfile
from tasks.errors import TaskFormatError
from tasks.harbor import write_harbor
from tasks.model import PAPER_CATEGORIES
from tasks.results import TrialResult

task_app = typer.Typer(help="Check, run, import and format terminal tasks.", no_args_is_help=True)
app.add_typer(task_app, name="task")
console = Console()  # data: tables
notes = Console(stderr=True)  # progress, notes, rejects


def _load_or_exit(path: Path):
    try:
        return load_task(path)
    except TaskFormatError as e:
        raise fail(str(e)) from e


def _trial_dict(r: TrialResult | None) -> dict | None:
    if r is None:
        return None
    return {
        "failure_mode": r.failure_mode.value,
        "failure_detail": r.failure_detail,
        "passed": r.passed,
        "total": r.total,
        "seconds": round(r.total_s, 3),
        "assertions": [
            {"name": a.name, "status": a.status.value, "ok": a.ok, "message": a.message}
            for a in r.assertions
        ],
    }


def _check_table(c: TaskCheck) -> Table:
    table = Table(title=f"{c.task.id}  [{'green]OK' if c.ok else 'red]INVALID'}[/]")
    table.add_column("assertion")
    table.add_column("oracle")
    table.add_column("nop")
    oracle = {a.name: a for a in (c.oracle.assertions if c.oracle else [])}
    nop = {a.name: a for a in c.nop.assertions}
    for name in dict.fromkeys([*oracle, *nop]):
        cells = []
        for side in (oracle, nop):
            a = side.get(name)
            cells.append("-" if a is None else ("[green]pass" if a.ok else "[red]fail"))
        table.add_row(name, *cells)
    return table


@task_app.command("check")
def check(
    paths: list[Path],
    backend: str = typer.Option("local", help="sandbox backend: local or docker"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    workers: int = typer.Option(2, help="tasks checked concurrently"),
) -> None:
    """Run the oracle and a nop agent on each task; exit 1 if any task is invalid (a task
    that does not load is reported as invalid, with the others)."""
    for p in paths:  # a path that is not there is a typo (2), not an invalid task (1)
        if not p.exists():
            raise fail(f"{p}: no such task directory")
    _check_host(backend)  # a host that cannot run the backend (2), not invalid tasks (1)
    loaded: list = []
    unloadable: list[tuple[Path, str]] = []
    for p in paths:
        try:
            loaded.append(load_task(p))
        except TaskFormatError as e:
            unloadable.append((p, str(e)))
    checks: list[TaskCheck] = []
    with (
        engine_for(backend),
        progress(f"checking {len(loaded)} tasks", len(loaded)) as advance,
        ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
    ):
        for fut in as_completed([pool.submit(check_task, t, backend) for t in loaded]):
            checks.append(fut.result())
            advance()
    order = {t.id: i for i, t in enumerate(loaded)}
    checks.sort(key=lambda c: order[c.task.id])
    if as_json:
        rows: list[dict[str, Any]] = [
            {"task": str(p), "ok": False, "problems": [why], "oracle": None, "nop": None}
            for p, why in unloadable
        ]
        rows += [
            {
                "task": c.task.id,
                "ok": c.ok,
                "checked": c.environment_failure is None,
                "problems": c.problems,
                "oracle": _trial_dict(c.oracle),
                "nop": _trial_dict(c.nop),
            }
            for c in checks
        ]
        typer.echo(dumps(rows, indent=2))
    else:
        for p, why in unloadable:
            console.print(f"[red]{p}:[/red] does not load: {why}", highlight=False)
        for c in checks:
            console.print(_check_table(c))
            for prob in c.problems:
                console.print(f"  [red]problem:[/red] {prob}")
        bad = sum(not c.ok and not c.environment_failure for c in checks) + len(unloadable)
        unchecked = sum(bool(c.environment_failure) for c in checks)
        console.print(
            f"{len(checks) + len(unloadable) - bad - unchecked} valid, {bad} invalid"
            + (f", {unchecked} not checked (the host failed their trials)" if unchecked else "")
        )
    invalid = unloadable or any(not c.ok and not c.environment_failure for c in checks)
    if invalid:
        raise typer.Exit(1)
    host = [c for c in checks if c.environment_failure]
    if host:  # no task was found invalid, but the host kept some from being checked
        raise fail(
            f"{len(host)} task(s) not checked: the host failed their trials "
            f"({host[0].task.id}: {host[0].environment_failure})"
        )


def _check_host(backend: str) -> None:
    """Refuse, in one line (exit 2), a backend this host cannot run."""
    from pipelines.host import backend_problem

    problem = backend_problem(backend)
    if problem:
        hint = "; `--backend docker` uses a container engine (Podman) instead"
        raise fail(
            f"the {backend} sandbox cannot run here: {problem}"
            + (hint if backend == "local" else "")
        )


@task_app.command("run")
def run(
    path: Path,
    agent: str = typer.Option("oracle", help="oracle | nop"),
    backend: str = typer.Option("local"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run one trial and print its per-assertion outcomes."""
    try:
        agent_by_name(agent)
    except ValueError as e:
        raise fail(f"--agent: {e}") from None
    task = _load_or_exit(path)
    _check_host(backend)
    with engine_for(backend):
        r = run_trial(task, agent, backend)
    if as_json:
        typer.echo(dumps(_trial_dict(r), indent=2))
        return
    table = Table(title=f"{task.id} / {agent}: {r.passed}/{r.total} passed ({r.failure_mode})")
    table.add_column("assertion")
    table.add_column("status")
    table.add_column("message")
    for a in r.assertions:
        table.add_row(a.name, a.status.value, a.message[:120])
    console.print(table)
    if r.failure_detail:
        notes.print(f"[yellow]{r.failure_mode}:[/yellow] {r.failure_detail[:500]}")


@task_app.command("import")
def import_(
    directory: Path,
    fmt: TaskFormat = typer.Option(
        None, "--format", help="harbor | terminal-bench (default: detect)"
    ),
    out: Path = typer.Option(None, help="write the imported tasks here in Harbor layout"),
    rejects_file: Path = typer.Option(None, "--rejects", help="write rejects as JSON lines"),
    build: bool = typer.Option(False, "--build", help="also build each environment"),
    record: bool = typer.Option(
        False, "--record", help="record the tasks (and their source) in the warehouse"
    ),
    store: Path = typer.Option(None, "--store", help="warehouse for --record"),
) -> None:
    """Import a directory of tasks; malformed ones are recorded as rejects, the rest go on."""
    try:
        tasks, rejects = import_dir(directory, fmt)
    except TaskFormatError as e:
        raise fail(str(e)) from e
    if build:
        rows = _build_rows(tasks)
        failed = {r.task_id: r for r in rows if not r.built}
        by_id = {t.id: directory / t.id for t in tasks}
        rejects += [Reject(str(by_id.get(i, i)), _row_reason(r)) for i, r in failed.items()]
        tasks = [t for t in tasks if t.id not in failed]
    if record:
        from audit.intake import record_import

        where = record_import(tasks, directory, store)
        notes.print(f"recorded {len(tasks)} task(s) from {directory} in {where}")
    if out is not None:
        for t in tasks:
            write_harbor(t, out / t.id)
    if rejects_file is not None:
        with open(rejects_file, "w") as f:
            for r in rejects:
                f.write(dumps({"path": r.path, "reason": r.reason}) + "\n")
    notes.print(f"imported {len(tasks)} task(s), rejected {len(rejects)}")
    for r in rejects[:50]:
        notes.print(f"  [red]reject[/red] {r.path}: {r.reason}")


def _row_reason(row: BuildRow) -> str:
    where = f"environment/Dockerfile:{row.line}: " if row.line else ""
    kind = row.failure.value if row.failure else "built"
    return f"{where}{kind}: {row.reason}"


def _build_rows(tasks: list) -> list[BuildRow]:
    from sandbox.build import build_row, default_runner

    try:
        runner = default_runner()
    except SandboxUnavailable as e:
        raise fail(f"cannot build here: {e}") from e
    rows = []
    for t in tasks:
        row = build_row(t, runner)
        rows.append(row)
        mark = "[green]built[/green]" if row.built else f"[red]{row.failure}[/red]"
        notes.print(f"  {mark} {t.id} ({row.seconds:.1f}s, {row.layers_reused} cached)")
    return rows


@task_app.command("build")
def build_cmd(
    paths: list[Path],
    as_json: bool = typer.Option(False, "--json", help="print one JSON row per task"),
) -> None:
    """Build each task's environment image; a failure is a row with its reason, not a crash."""
    tasks, rejects = [], []
    for p in paths:
        try:
            tasks.append(load_task(p))
        except TaskFormatError as e:
            rejects.append(Reject(str(p), str(e)))
    rows = _build_rows(tasks)
    if as_json:
        for r in rows:
            typer.echo(dumps(dataclasses.asdict(r)))
        for rj in rejects:
            typer.echo(dumps({"path": rj.path, "built": False, "reason": rj.reason}))
    built = sum(r.built for r in rows)
    notes.print(f"built {built} of {len(rows) + len(rejects)}")
    for r in rows:
        if not r.built:
            notes.print(f"  [red]reject[/red] {r.task_id}: {_row_reason(r)}")
    for rj in rejects:
        notes.print(f"  [red]reject[/red] {rj.path}: {rj.reason}")
    if built < len(rows) + len(rejects):
        raise typer.Exit(1)


@task_app.command("fmt")
def fmt(paths: list[Path]) -> None:
    """Render each Harbor task's environment/Dockerfile from its spec, rewriting in place."""
    for p in paths:
        task = _load_or_exit(p)
        files = dict(task.environment.files)
        files["Dockerfile"] = render_dockerfile(task).encode()
        task = task.model_copy(
            update={"environment": task.environment.model_copy(update={"files": files})}
        )
        write_harbor(task, p)
        notes.print(f"formatted {p}")


@app.command("seeds")
def seeds(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the bundled seed corpus and where it lives."""
    tasks = load_seeds()
    if as_json:
        rows = [
            {
                "id": t.id,
                "category": t.category.value,
                "difficulty": t.difficulty.value,
                "hash": t.content_hash,
            }
            for t in tasks
        ]
        typer.echo(dumps({"path": str(SEED_DIR), "tasks": rows}, indent=2))
        return
    table = Table(title=f"{len(tasks)} seed tasks in {SEED_DIR}")
    for col in ("id", "category", "difficulty", "hash"):
        table.add_column(col)
    for t in tasks:
        table.add_row(t.id, t.category.value, t.difficulty.value, t.content_hash[:12])
    console.print(table)
    counts = Counter(t.category for t in tasks)
    console.print(", ".join(f"{c.value}: {counts.get(c, 0)}" for c in PAPER_CATEGORIES))
