"""`t1 demo`: the main job end to end on embedded defaults (local sandbox, local store, no
LLM): check every seed, then materialize the whole Dagster asset graph headless."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pipelines.cli.root import app
from pipelines.defs.jobs import BUILD_POOLS
from pipelines.defs.resources import ForgeConfig, forge_config_from_env
from pipelines.host import BackendChoice
from pipelines.services import PREFECT_PORT
from sandbox.check import TaskCheck, check_tasks
from tasks.corpus import SEED_DIR, load_seeds
from tasks.model import Category

console = Console(width=120)


def category_table(checks: list[TaskCheck]) -> Table:
    """Per-category table of seed checks: tasks, valid, mean assertions, oracle/nop outcome."""
    by_cat: dict[Category, list[TaskCheck]] = defaultdict(list)
    for c in checks:
        by_cat[c.task.category].append(c)
    table = Table(title="Seed corpus by category")
    for col in ("category", "tasks", "valid", "mean assertions", "oracle all-pass", "nop fails"):
        table.add_column(col, justify="left" if col == "category" else "right")

    def row(label: str, rows: list[TaskCheck]) -> None:
        totals = [c.oracle.total for c in rows if c.oracle]
        table.add_row(
            label,
            str(len(rows)),
            str(sum(c.ok for c in rows)),
            f"{sum(totals) / max(1, len(totals)):.1f}",
            str(sum(1 for c in rows if c.oracle and c.oracle.total and c.oracle.resolved)),
            str(sum(1 for c in rows if c.nop.total and c.nop.passed < c.nop.total)),
        )

    for cat in Category:
        if by_cat.get(cat):
            row(cat.value, by_cat[cat])
    row("[b]all", checks)
    return table


def check_seeds(workers: int, backend: str = "local") -> bool:
    tasks = load_seeds()
    console.print(f"[b]1. checking {len(tasks)} seed tasks[/b] from {SEED_DIR} ({backend} sandbox)")
    checks = check_tasks(tasks, backend, workers)
    console.print(category_table(checks))
    for c in checks:
        for p in c.problems:
            console.print(f"[red]{c.task.id}:[/red] {p}")
    return all(c.ok for c in checks)


def demo_backend() -> BackendChoice:
    """The sandbox backend the demo uses: $T1_SANDBOX_BACKEND when set, else local when this
    host can run it, else docker (an engine, or a private Podman); checked before any work."""
    from pipelines.host import BACKEND_ENV, choose_backend, engine_problem, local_problem

    requested = os.environ.get(BACKEND_ENV) or None
    local = local_problem() if requested in (None, "local") else None
    docker = engine_problem() if requested == "docker" or (not requested and local) else None
    return choose_backend(requested, local, docker)


def demo_forge(rounds: int | None, per_round: int | None) -> ForgeConfig:
    """The environment's forge config with the command line's budget, if given."""
    forge = forge_config_from_env()
    budget = {k: v for k, v in (("rounds", rounds), ("per_round", per_round)) if v}
    return ForgeConfig(**{**forge.model_dump(), **budget}) if budget else forge


def run_pipeline(forge: ForgeConfig) -> bool:
    import dagster as dg

    from pipelines.main_job import StepOutcome, dagster_home, run_main_job

    home = dagster_home()
    console.print(
        f"[b]2. materializing the asset graph[/b] (job build_pools; store "
        f"{forge.store_path.resolve()}, {forge.rounds} synthesis rounds x {forge.per_round} "
        f"candidates, DAGSTER_HOME={home})"
    )

    def show(s: StepOutcome) -> None:
        checks = ", ".join(f"{k}={v if v != 'fail' else 'FAIL'}" for k, v in s.checks.items())
        mark = "[green]ok[/green]" if s.success else "[red]FAILED[/red]"
        console.print(
            f"  {mark} {s.step} ({s.seconds:.0f}s){'  checks: ' + checks if checks else ''}"
        )

    def line(text: str) -> None:  # the assets' progress, as it comes (no silent stretch)
        console.print(f"    [dim]{text}[/dim]", highlight=False, soft_wrap=True)

    with dg.DagsterInstance.get() as instance:
        steps = run_main_job(forge, instance, on_step=show, on_log=line)
    summary(steps)
    return all(s.success for s in steps)


def summary(steps) -> None:
    md: dict[str, dict] = {}
    for s in steps:
        md.update(s.metadata)
    table = Table(title="What the main job produced")
    table.add_column("asset")
    table.add_column("figures")
    for name in BUILD_POOLS:
        if name in md:
            figures = {k: v for k, v in md[name].items() if not str(v).startswith(("|", "!["))}
            table.add_row(name, ", ".join(f"{k}={v}" for k, v in figures.items())[:200])
    console.print(table)
    console.print(
        "Where to look:\n"
        "  t1 ui                      Dagster UI: the asset graph, runs, pools and charts\n"
        '  t1 sql "SELECT pool, pool_version, count(*) FROM pool_members GROUP BY ALL"\n'
        '  t1 sql "SELECT * FROM synth_rounds ORDER BY round"\n'
        "  t1 lineage <task id or hash prefix>\n"
        "  artifacts/reports/         funnel, score distributions, T1 composition chart"
    )


GAP_BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "train_inference_gap.py"


def warm_start() -> bool:
    """The tiny policy's warm start as its own step (the gap measurement and the campaign
    start from it): built once with a line per 50 SFT steps, then read from the cache. It
    used to be built silently inside the next step, the longest wait of a first run."""
    from training.warm_start import WarmStartConfig, cache_root, warm_started_policy

    steps = WarmStartConfig().steps
    cached = cache_root() / "policy"
    console.print(
        f"[b]3. the tiny policy[/b]: warm start, {steps} supervised steps on the seeds' "
        f"reference turns; built once (a line per 50 steps; what it costs: README, First "
        f"run), then read from {cached}"
    )
    before = set(cached.glob("*/warm_start.json"))
    t0 = time.monotonic()
    try:
        path = warm_started_policy(log=True)
    except Exception as e:  # noqa: BLE001 - a failed step is reported; the demo goes on
        console.print(f"  [red]FAILED[/red]: {type(e).__name__}: {e}")
        return False
    how = "cached" if path / "warm_start.json" in before else "built"
    console.print(f"  [green]ok[/green] ({time.monotonic() - t0:.0f}s, {how}) {path}")
    return True


def measure_gap(tasks: int, max_turns: int, backend: str = "local") -> bool:
    """The TITO/R3 train-inference gap on real multi-turn rollouts of a few seed tasks."""
    console.print(
        f"[b]4. training stability[/b]: tiny Qwen3-MoE policy, "
        f"{tasks} seed tasks x <= {max_turns} turns in the local sandbox, gap per configuration"
    )
    if not GAP_BENCHMARK.is_file():
        console.print(f"  skipped: {GAP_BENCHMARK} not found (run from a checkout)")
        return True
    cmd = [
        sys.executable, str(GAP_BENCHMARK), "--tasks", str(tasks), "--max-turns",
        str(max_turns), "--backend", backend,
    ]  # fmt: skip
    return subprocess.run(cmd, check=False).returncode == 0


def run_loop(forge: ForgeConfig, prefect_port: int) -> bool:
    """T1 -> the Prefect deployment -> evaluation_results with the pool version."""
    import dagster as dg

    from pipelines.campaign_loop import run_campaign_loop
    from pipelines.main_job import dagster_home

    home = dagster_home()
    prefect_home = Path(os.environ.get("PREFECT_HOME", ".prefect")).resolve()
    log = prefect_home / "demo-servers.log"
    console.print(
        "[b]5. the loop[/b]: a Prefect server and the campaign deployment start; Dagster's "
        f"train_campaign job runs the campaign on the latest t1 (servers' log: {log})"
    )
    t0 = time.monotonic()
    with dg.DagsterInstance.get() as instance:
        out = run_campaign_loop(
            forge, instance, prefect_home=prefect_home, log_path=log, prefect_port=prefect_port,
            on_log=lambda text: console.print(
                f"    [dim]{text}[/dim]", highlight=False, soft_wrap=True
            ),
        )  # fmt: skip
    if not out.success:
        console.print(f"  [red]FAILED[/red] (Dagster run {out.dagster_run_id}): {out.error}")
        return False
    e = out.evaluation
    console.print(
        f"  [green]ok[/green] ({time.monotonic() - t0:.0f}s) evaluation {e.get('checkpoint')} of "
        "campaign "
        f"{e.get('campaign_run_id')} on {e.get('pool')} v{e.get('pool_version')} (audit "
        f"{e.get('audit_version')}): pass rate {e.get('validate/pass_rate', 0):.2f}, mean "
        f"passing assertions {e.get('validate/dense_score', 0):.2f}\n"
        f"  after `t1 ui`: Dagster -> Catalog -> evaluation_results (DAGSTER_HOME={home}); "
        f"the flow run {e.get('prefect_flow_run_url')} (PREFECT_HOME={prefect_home})"
    )
    return True


@app.command("demo")
def demo(
    workers: int = typer.Option(2, help="tasks checked concurrently"),
    seed_check: bool = typer.Option(True, help="check every seed first"),
    rounds: int | None = typer.Option(
        None, help="synthesis rounds (default: the forge config's, $T1_DEMO_ROUNDS)"
    ),
    per_round: int | None = typer.Option(
        None, help="candidates per round (default: the forge config's, $T1_DEMO_PER_ROUND)"
    ),
    train: bool = typer.Option(True, help="measure the TITO/R3 gap on a few rollouts"),
    train_tasks: int = typer.Option(4, help="seed tasks rolled out for the gap measurement"),
    loop: bool = typer.Option(True, help="end with the loop: a campaign on t1 via Prefect"),
    prefect_port: int = typer.Option(
        PREFECT_PORT, help="the loop's Prefect server port, if free (else any free port)"
    ),
) -> None:
    """Run the main job end to end on embedded defaults, then the loop; print where to look.
    The host is checked first: without a local sandbox the docker backend (Podman) runs
    every trial; with neither, one line says why (exit 2)."""
    from pipelines.cli.output import fail
    from pipelines.host import backend_env, engine_for

    t0 = time.monotonic()
    choice = demo_backend()
    if choice.backend is None:
        raise fail(choice.note)
    console.print(choice.note, highlight=False, soft_wrap=True)
    with engine_for(choice.backend), backend_env(choice.backend):
        ok = _demo_steps(
            choice.backend, workers, seed_check, rounds, per_round, train, train_tasks, loop,
            prefect_port,
        )  # fmt: skip
    console.print(f"demo {'finished' if ok else 'FAILED'} in {time.monotonic() - t0:.0f}s")
    if not ok:
        raise typer.Exit(1)


def _demo_steps(
    backend: str,
    workers: int,
    seed_check: bool,
    rounds: int | None,
    per_round: int | None,
    train: bool,
    train_tasks: int,
    loop: bool,
    prefect_port: int,
) -> bool:
    forge = demo_forge(rounds, per_round)
    ok = check_seeds(workers, backend) if seed_check else True
    built = run_pipeline(forge)
    ok = built and ok
    policy = warm_start() if train or loop else True
    ok = policy and ok
    if train and policy:
        ok = measure_gap(train_tasks, 4, backend) and ok
    if loop:
        if built and policy:
            ok = run_loop(forge, prefect_port) and ok
        else:
            console.print("[b]5. the loop[/b]: skipped, the pools or the policy are missing")
    return ok
