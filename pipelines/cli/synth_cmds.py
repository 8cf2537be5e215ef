"""`t1 synth`: recursive task synthesis rounds over the seed corpus (see docs/synthesis.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from pipelines.cli.output import ExitCode, fail
from pipelines.cli.root import app
from synthesis import ledger
from synthesis.decontam import DecontamConfig
from synthesis.llm import LLMSettings, llm_operators
from synthesis.rounds import SynthConfig, run_synthesis
from synthesis.sampler import Caps
from synthesis.validate import ValidationConfig
from warehouse.records import SynthRoundRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Store

console = Console()


def rounds_table(rows: list[SynthRoundRecord], title: str = "synthesis rounds") -> Table:
    """The per-round table: candidates, accepted, discards by reason, horizon means."""
    table = Table(title=title)
    for col in ("round", "parents", "candidates", "accepted", "discarded (by reason)"):
        table.add_column(col, justify="right" if col != "discarded (by reason)" else "left")
    for col in ("mean steps", "mean assertions", "mean instr chars", "wall s"):
        table.add_column(col, justify="right")
    for r in rows:
        reasons = ", ".join(f"{k}={v}" for k, v in r.discard_reasons.items()) or "-"

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.1f}"

        table.add_row(
            str(r.round),
            str(r.parents),
            str(r.candidates),
            str(r.accepted),
            f"{r.discarded}" + (f" ({reasons})" if r.discarded else ""),
            fmt(r.mean_solution_steps),
            fmt(r.mean_assertions),
            fmt(r.mean_instruction_chars),
            f"{r.wall_s:.0f}",
        )
    return table


@app.command("synth")
def synth(
    rounds: int = typer.Option(
        SynthConfig.rounds, help="rounds to run (round 1 rewrites the seeds)"
    ),
    per_round: int = typer.Option(
        SynthConfig.per_round, "--per-round", help="candidate budget per round"
    ),
    benchmark: Path = typer.Option(
        None, help="held-out benchmark dir (Harbor or Terminal-Bench) for decontamination"
    ),
    store: Path = typer.Option(None, help="store path (default $T1_WAREHOUSE, data/warehouse)"),
    campaign: str = typer.Option(
        SynthConfig.campaign, help="campaign name (resume key in the warehouse)"
    ),
    seed: int = typer.Option(SynthConfig.seed, help="sampler seed"),
    workers: int = typer.Option(SynthConfig.workers, help="concurrent candidate validations"),
    reruns: int = typer.Option(
        ValidationConfig.reruns, help="oracle runs per candidate that must agree"
    ),
    max_repairs: int = typer.Option(
        ValidationConfig.max_repairs, "--max-repairs", help="repair attempts per candidate"
    ),
    children_per_parent: int = typer.Option(
        Caps.children_per_parent, help="cap: children per parent per round"
    ),
    root_share: float = typer.Option(
        Caps.root_share, help="cap: share of a round per lineage root"
    ),
    category_share: float = typer.Option(
        Caps.category_share, help="cap: share of a round per category"
    ),
    family_share: float = typer.Option(
        Caps.family_share, help="cap: share of a round per rewrite family"
    ),
    threshold: float = typer.Option(
        DecontamConfig.threshold, help="decontamination: drop at this overlap or more"
    ),
    seeds_dir: Path = typer.Option(None, help="seed corpus dir (default: bundled seeds)"),
    seed_ids: str = typer.Option("", help="comma-separated seed ids to restrict the corpus"),
    llm: bool = typer.Option(True, help="use the LLM operator when T1_LLM_* is configured"),
    backend: str = typer.Option(ValidationConfig.backend, help="sandbox backend"),
) -> None:
    """Run recursive synthesis rounds; re-running resumes where a killed run stopped."""
    try:
        cfg = SynthConfig(
            rounds=rounds,
            per_round=per_round,
            seed=seed,
            campaign=campaign,
            workers=workers,
            caps=Caps(children_per_parent, root_share, category_share, family_share),
            validation=ValidationConfig(reruns=reruns, max_repairs=max_repairs, backend=backend),
            decontam=DecontamConfig(threshold=threshold),
            benchmark=benchmark,
            seeds_dir=seeds_dir,
            seed_ids=tuple(s for s in seed_ids.split(",") if s),
        )
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    settings = LLMSettings.from_env() if llm else None
    extra = llm_operators(settings) if settings else ()
    console.print(
        f"campaign {campaign!r}: {rounds} rounds x {per_round} candidates, "
        f"operators: programmatic{' + llm (' + settings.model + ')' if settings else ''}"
    )
    wh = Store.open(store, create=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bars:
        ids: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in ids:
                ids[phase] = bars.add_task(phase, total=total)
            bars.update(ids[phase], completed=done, total=total)

        try:
            stats = run_synthesis(cfg, wh, extra_operators=extra, progress=progress)
        except KeyboardInterrupt:
            bars.stop()
            done = ledger.round_rows(wh, campaign)
            raise fail(
                f"interrupted: {len(done)} complete round(s) and every candidate validated so "
                f"far are recorded in {wh.root}; run the same command again to resume",
                ExitCode.INTERRUPTED,
            ) from None
    console.print(rounds_table(stats, f"synthesis rounds (campaign {campaign!r})"))
    if benchmark is not None:
        with Snapshot.open(wh, with_lineage=False) as snap:
            rows = snap.rows(
                "SELECT count(*) AS n, count(*) FILTER (WHERE reason = 'contaminated') AS dropped,"
                " max(decontam_score) AS worst FROM synth_candidates WHERE campaign = ?",
                [campaign],
            )[0]
        console.print(
            f"decontamination vs {benchmark}: {rows['dropped']} of {rows['n']} candidates "
            f"dropped (threshold {threshold}); highest overlap {rows['worst'] or 0:.3f}"
        )
    if len(stats) < rounds:
        console.print(f"[yellow]stopped after round {len(stats)}: it accepted nothing[/yellow]")
