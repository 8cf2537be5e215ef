"""`t1 demo`: the main job end to end on embedded defaults (grows as capabilities land)."""

from __future__ import annotations

import time
from collections import defaultdict

import typer
from rich.console import Console
from rich.table import Table

from pipelines.cli import app
from sandbox.check import TaskCheck, check_tasks
from tasks.corpus import SEED_DIR, load_seeds
from tasks.model import Category

console = Console()


def category_table(checks: list[TaskCheck]) -> Table:
    """Per-category table of seed checks: tasks, valid, mean assertions, oracle/nop outcome."""
    by_cat: dict[Category, list[TaskCheck]] = defaultdict(list)
    for c in checks:
        by_cat[c.task.category].append(c)
    table = Table(title="Seed corpus by category")
    for col in ("category", "tasks", "valid", "mean assertions", "oracle all-pass", "nop fails"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for cat in Category:
        rows = by_cat.get(cat, [])
        if not rows:
            continue
        totals = [c.oracle.total for c in rows if c.oracle]
        table.add_row(
            cat.value,
            str(len(rows)),
            str(sum(c.ok for c in rows)),
            f"{sum(totals) / max(1, len(totals)):.1f}",
            str(sum(1 for c in rows if c.oracle and c.oracle.total and c.oracle.resolved)),
            str(sum(1 for c in rows if c.nop.total and c.nop.passed < c.nop.total)),
        )
    table.add_row(
        "[b]all",
        str(len(checks)),
        str(sum(c.ok for c in checks)),
        "",
        str(sum(1 for c in checks if c.oracle and c.oracle.resolved)),
        str(sum(1 for c in checks if c.nop.total and c.nop.passed < c.nop.total)),
    )
    return table


@app.command("demo")
def demo(workers: int = typer.Option(2, help="tasks checked concurrently")) -> None:
    """Check every seed task in the local sandbox and print the per-category table."""
    t0 = time.monotonic()
    tasks = load_seeds()
    console.print(f"checking {len(tasks)} seed tasks from {SEED_DIR} in the local sandbox ...")
    checks = check_tasks(tasks, "local", workers)
    console.print(category_table(checks))
    for c in checks:
        for p in c.problems:
            console.print(f"[red]{c.task.id}:[/red] {p}")
    console.print(f"done in {time.monotonic() - t0:.1f}s")
    if any(not c.ok for c in checks):
        raise typer.Exit(1)
