"""`t1 synth`: recursive task synthesis rounds over the seed corpus (see docs/synthesis.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from pydantic import BaseModel, ValidationError
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

from pipelines.cli.output import ExitCode, dumps, fail, stdout, validation_message
from pipelines.cli.root import app
from synthesis import ledger
from synthesis.decontam import DecontamConfig
from synthesis.llm import LLMSettings, llm_operators
from synthesis.reference import EndpointAgent
from synthesis.rounds import SynthConfig, load_seed_tasks, run_synthesis
from synthesis.sampler import Caps
from synthesis.validate import ValidationConfig
from tasks.results import INFRASTRUCTURE_FAILURES
from warehouse.records import SynthRoundRecord
from warehouse.snapshot import Snapshot
from warehouse.store import Store

console = Console(stderr=True)  # progress and notes; the summary goes to stdout


class SummaryFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def rounds_table(rows: list[SynthRoundRecord], title: str = "synthesis rounds") -> Table:
    """The per-round table: acceptance and discards, the v2 guarantees (dependency_ok share,
    free-reward share, instruction coverage), breadth, the difficulty measures, the chain
    depth (rewrites from the seed) and the share of the reward the parent's solution alone
    earns."""
    table = Table(title=title)
    cols = [
        ("round", "right"), ("pool", "right"), ("cand", "right"), ("acc", "right"),
        ("discarded (by reason)", "left"), ("dep ok", "right"), ("free mean/max", "right"),
        ("cover", "right"), ("seeds ext", "right"), ("steps", "right"), ("asserts", "right"),
        ("tools", "right"), ("files", "right"), ("depth", "right"), ("chain mean/max", "right"),
        ("parent sol", "right"), ("ref pass", "right"), ("wall s", "right"),
    ]  # fmt: skip
    for name, justify in cols:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        reasons = ", ".join(f"{k}={v}" for k, v in r.discard_reasons.items())
        ref = (
            f"{_fmt(r.reference_pass_rate, '.0%')} (n={r.reference_sampled})"
            if r.reference_sampled
            else "-"
        )
        table.add_row(
            str(r.round),
            str(r.parents),
            str(r.candidates),
            str(r.accepted),
            f"{r.discarded}" + (f" ({reasons})" if r.discarded else ""),
            _fmt(r.dependency_ok_share, ".0%"),
            f"{_fmt(r.mean_free_reward_share, '.1%')}/{_fmt(r.max_free_reward_share, '.0%')}",
            _fmt(r.coverage_share, ".0%"),
            _fmt(r.seeds_with_descendants, "d"),
            _fmt(r.mean_solution_steps),
            _fmt(r.mean_assertions),
            _fmt(r.mean_distinct_tools),
            _fmt(r.mean_files_touched),
            _fmt(r.mean_dependency_depth, ".2f"),
            f"{_fmt(r.mean_chain_depth, '.2f')}/{_fmt(r.max_chain_depth, 'd')}",
            _fmt(r.mean_parent_solution_share, ".0%"),
            ref,
            f"{r.wall_s:.0f}",
        )
    return table


def reference_agent(checkpoint: Path | None, endpoint: str, model: str):
    """An agent factory for the reference pass rate: a policy checkpoint served by the local
    engine, or an OpenAI-compatible endpoint; None when neither is given."""
    if checkpoint is not None:
        from training.chat_tokenizer import load_chat_tokenizer
        from training.engine_local import LocalEngine
        from training.engine_protocol import EngineClient
        from training.harness import HarnessConfig, PolicyAgent

        engine = LocalEngine(checkpoint)
        url = engine.start()
        cfg = engine.model.config
        client = EngineClient(url, num_layers=cfg.num_hidden_layers, top_k=cfg.num_experts_per_tok)
        tokenizer = load_chat_tokenizer(checkpoint)
        return lambda: PolicyAgent(client, tokenizer, HarnessConfig(max_turns=40))
    if endpoint:
        settings = LLMSettings(base_url=endpoint, model=model or "default")
        return lambda: EndpointAgent(settings)
    return None


_SYNTH, _CAPS, _VAL = SynthConfig(), Caps(), ValidationConfig()


@app.command("synth")
def synth(
    rounds: int = typer.Option(_SYNTH.rounds, help="rounds to run"),
    per_round: int = typer.Option(_SYNTH.per_round, "--per-round", help="candidates per round"),
    benchmark: Path = typer.Option(
        None, help="held-out benchmark dir (Harbor or Terminal-Bench) for decontamination"
    ),
    store: Path = typer.Option(None, help="store path (default $T1_WAREHOUSE, data/warehouse)"),
    campaign: str = typer.Option(_SYNTH.campaign, help="campaign name (resume key)"),
    seed: int = typer.Option(_SYNTH.seed, help="sampler seed"),
    workers: int = typer.Option(_SYNTH.workers, help="concurrent candidate validations"),
    reruns: int = typer.Option(_VAL.reruns, help="oracle runs per candidate that must agree"),
    max_repairs: int = typer.Option(
        _VAL.max_repairs, "--max-repairs", help="repairs (and LLM revisions) per candidate"
    ),
    free_reward_cap: float = typer.Option(
        _VAL.free_reward_cap, help="largest reward share nop or the new steps alone may earn"
    ),
    children_per_parent: int = typer.Option(_CAPS.children_per_parent, help="cap per parent"),
    root_share: float = typer.Option(_CAPS.root_share, help="cap: round share per lineage"),
    category_share: float = typer.Option(_CAPS.category_share, help="cap: share per category"),
    family_share: float = typer.Option(_CAPS.family_share, help="cap: share per rewrite family"),
    deep_share: float = typer.Option(
        _CAPS.deep_share, help="share of a round reserved for extending accepted (non-seed) tasks"
    ),
    threshold: float = typer.Option(
        DecontamConfig().threshold, help="decontamination: drop at this overlap or more"
    ),
    seeds_dir: Path = typer.Option(None, help="seed corpus dir (default: bundled seeds)"),
    seed_ids: str = typer.Option("", help="comma-separated seed ids to restrict the corpus"),
    llm: bool = typer.Option(True, help="use the LLM operator when T1_LLM_* is configured"),
    backend: str = typer.Option(_VAL.backend, help="sandbox backend"),
    reference_sample: int = typer.Option(
        _SYNTH.reference_sample, help="accepted tasks per round the reference agent attempts"
    ),
    reference_checkpoint: Path = typer.Option(
        None, help="policy checkpoint dir: the reference agent (local engine)"
    ),
    reference_endpoint: str = typer.Option(
        "", help="OpenAI-compatible base URL: the reference agent (if no checkpoint)"
    ),
    reference_model: str = typer.Option("", help="model name at --reference-endpoint"),
    fmt: SummaryFormat = typer.Option(
        SummaryFormat.TABLE, "--format", help="the summary on stdout: a table, or one JSON object"
    ),
) -> None:
    """Run recursive synthesis rounds; re-running resumes where a killed run stopped.

    Progress and notes go to stderr, the summary to stdout. Exit codes: 0 done, 1 seeds were
    lost to environment errors (the sandbox, not the task), 2 bad options, a store that
    cannot be written, or another writer running this campaign on the store."""
    try:
        cfg = SynthConfig(
            rounds=rounds,
            per_round=per_round,
            seed=seed,
            campaign=campaign,
            workers=workers,
            caps=Caps(children_per_parent, root_share, category_share, family_share, deep_share),
            validation=ValidationConfig(
                reruns=reruns,
                max_repairs=max_repairs,
                backend=backend,
                free_reward_cap=free_reward_cap,
            ),
            decontam=DecontamConfig(threshold=threshold),
            benchmark=benchmark,
            seeds_dir=seeds_dir,
            seed_ids=tuple(s for s in seed_ids.split(",") if s),
            reference_sample=reference_sample,
        )
    except ValidationError as e:
        raise fail(validation_message(e)) from None
    except ValueError as e:
        raise fail(str(e)) from None
    settings = LLMSettings.from_env() if llm else None
    extra = llm_operators(settings) if settings else ()
    reference = reference_agent(reference_checkpoint, reference_endpoint, reference_model)
    console.print(
        f"campaign {campaign!r}: {rounds} rounds x {per_round} candidates, "
        f"operators: programmatic{' + llm (' + settings.model + ')' if settings else ''}, "
        f"reference agent: {'yes' if reference else 'none'}",
        highlight=False,
    )
    wh = Store.open(store, create=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as bars:
        ids: dict[str, TaskID] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if not console.is_terminal and done == total:  # piped: one line per phase
                console.print(f"{phase}: {done}/{total}", highlight=False)
            if phase not in ids:
                ids[phase] = bars.add_task(phase, total=total)
            bars.update(ids[phase], completed=done, total=total)

        try:
            stats = run_synthesis(
                cfg, wh, extra_operators=extra, progress=progress, reference=reference,
                log=lambda line: console.print(line, highlight=False, markup=False),
            )  # fmt: skip
        except KeyboardInterrupt:
            bars.stop()
            done = ledger.round_rows(wh, campaign)
            raise fail(
                f"interrupted: {len(done)} complete round(s) and every candidate validated so "
                f"far are recorded in {wh.root}; run the same command again to resume",
                ExitCode.INTERRUPTED,
            ) from None
    summary = synth_summary(wh, cfg, stats)
    if fmt == SummaryFormat.JSON:
        typer.echo(dumps(summary.model_dump(mode="json")))
    else:
        stdout().print(rounds_table(stats, f"synthesis rounds (campaign {campaign!r})"))
    console.print(
        f"seeds with accepted descendants: {summary.seeds_with_accepted} "
        f'(per seed: t1 sql "SELECT root_seed, count(*) FROM synth_candidates WHERE campaign = '
        f"'{campaign}' AND status = 'accepted' GROUP BY ALL ORDER BY 2 DESC\")",
        highlight=False,
    )
    depths = ", ".join(f"{d}: {n}" for d, n in summary.chain_depths.items()) or "none"
    console.print(
        f"accepted by chain depth (rewrites from the seed) {{{depths}}}; the parent's solution "
        f"alone earns {_fmt(summary.mean_parent_solution_share, '.1%')} of a child's reward "
        f"(mean over accepted); dependency rejects (dependency_missing): "
        f"{summary.dependency_rejects}; accepted without a data-flow dependency: "
        f"{summary.accepted_without_flow_dependency}",
        highlight=False,
    )
    if summary.decontamination is not None:
        d = summary.decontamination
        console.print(
            f"decontamination vs {benchmark}: {d.dropped} of {d.candidates} candidates "
            f"dropped (threshold {threshold}); highest overlap {d.worst or 0:.3f}",
            highlight=False,
        )
    if summary.stopped_early:
        console.print(f"[yellow]stopped after round {len(stats)}: the pool is empty[/yellow]")
    if summary.seeds_lost:
        lost = ", ".join(f"{s.task_id} ({s.failure_mode})" for s in summary.seeds_lost)
        console.print(
            f"[yellow]warning:[/yellow] {len(summary.seeds_lost)} of {summary.seeds} seeds lost "
            f"to environment errors (the sandbox, not the task): {lost}; their profiling "
            "trials are in the `trials` table",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(ExitCode.FAILED)


class Decontamination(BaseModel):
    candidates: int
    dropped: int
    worst: float | None


class LostSeed(BaseModel):
    """A seed whose profiling failed for the environment's sake, not the task's."""

    task_id: str
    task_hash: str
    failure_mode: str


class SynthSummary(BaseModel):
    """What `t1 synth --format json` prints: the campaign's rounds and what was lost."""

    campaign: str
    rounds: list[SynthRoundRecord]
    stopped_early: bool
    seeds: int
    seeds_with_accepted: int
    seeds_lost: list[LostSeed]
    decontamination: Decontamination | None
    # Over the campaign's accepted tasks: how many at each chain depth (rewrites from the
    # seed), the mean share of a child's reward its parent's solution alone earns, the
    # discards for a missing data-flow dependency, and accepted tasks whose data-flow probe
    # showed no dependent assertion (recorded before the probe existed, else none).
    chain_depths: dict[int, int] = {}
    mean_parent_solution_share: float | None = None
    dependency_rejects: int = 0
    accepted_without_flow_dependency: int = 0


def synth_summary(wh: Store, cfg: SynthConfig, stats: list[SynthRoundRecord]) -> SynthSummary:
    """The campaign's totals, read back from the warehouse."""
    seeds = load_seed_tasks(cfg)
    infra = sorted(m.value for m in INFRASTRUCTURE_FAILURES)
    with Snapshot.open(wh, with_lineage=False) as snap:
        totals = snap.rows(
            "SELECT count(*) AS n, count(*) FILTER (WHERE reason = 'contaminated') AS dropped,"
            " max(decontam_score) AS worst, count(DISTINCT root_seed) FILTER "
            "(WHERE status = 'accepted') AS seeds FROM synth_candidates WHERE campaign = ?",
            [cfg.campaign],
        )[0]
        lost = snap.rows(
            "SELECT p.task_hash, any_value(t.task_id) AS task_id,"
            " string_agg(DISTINCT t.failure_mode, ',' ORDER BY t.failure_mode) AS failure_mode"
            " FROM synth_profiles p JOIN trials t ON t.task_hash = p.task_hash"
            " WHERE NOT p.ok AND p.task_hash IN (SELECT unnest($seeds))"
            " AND t.failure_mode IN (SELECT unnest($infra))"
            " GROUP BY p.task_hash ORDER BY task_id",
            {"seeds": [t.content_hash for t in seeds], "infra": infra},
        )
        depth_rows = snap.rows(
            "SELECT coalesce(chain_depth, len(chain)) AS depth, count(*) AS n "
            "FROM synth_candidates WHERE campaign = ? AND status = 'accepted' "
            "GROUP BY ALL ORDER BY depth",
            [cfg.campaign],
        )
        flow = snap.rows(
            "SELECT avg(parent_solution_share) FILTER (WHERE status = 'accepted') AS share,"
            " count(*) FILTER (WHERE reason = 'dependency_missing') AS rejects,"
            " count(*) FILTER (WHERE status = 'accepted' AND coalesce(len(flow_dependent), 0)"
            " = 0) AS unproven FROM synth_candidates WHERE campaign = ?",
            [cfg.campaign],
        )[0]
    decontam = (
        Decontamination(candidates=totals["n"], dropped=totals["dropped"], worst=totals["worst"])
        if cfg.benchmark is not None
        else None
    )
    return SynthSummary(
        campaign=cfg.campaign,
        rounds=stats,
        stopped_early=len(stats) < cfg.rounds,
        seeds=len(seeds),
        seeds_with_accepted=totals["seeds"] or 0,
        seeds_lost=[LostSeed(**r) for r in lost],
        decontamination=decontam,
        chain_depths={r["depth"]: r["n"] for r in depth_rows},
        mean_parent_solution_share=flow["share"],
        dependency_rejects=flow["rejects"] or 0,
        accepted_without_flow_dependency=flow["unproven"] or 0,
    )
