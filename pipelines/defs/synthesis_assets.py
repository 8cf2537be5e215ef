"""Recursive synthesis: every round in order, in one asset, and the validation trials.

Round r samples from everything accepted before it (read from the warehouse), so rounds
cannot run side by side: one unpartitioned asset runs them in order (resuming after the last
recorded round), whatever the user launches. `add_rounds` in its run config is how to add N
more rounds.
"""

from dataclasses import replace

import dagster as dg
from pydantic import Field

from pipelines.defs.jobs import SYNTHESIS_POOL
from pipelines.defs.resources import ForgeConfig
from pipelines.progress import Heartbeat
from synthesis import ledger
from synthesis.rounds import run_synthesis
from warehouse.records import SynthRoundRecord


class SynthesisRoundsConfig(dg.Config):
    """Run config of `synthesis_rounds` (the Launchpad shows it)."""

    add_rounds: int = Field(
        0,
        ge=0,
        description="Run this many rounds after the last recorded one; 0 runs rounds "
        "1..`rounds` of the forge resource (those already recorded are skipped).",
    )


def target_rounds(recorded: set[int], rounds: int, add_rounds: int) -> int:
    """The last round this launch should reach."""
    last = max(recorded, default=0)
    return last + add_rounds if add_rounds else max(rounds, last)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def rounds_markdown(rows: list[SynthRoundRecord]) -> str:
    """Per round: acceptance, the v2 guarantees (dependency_ok share of accepted, mean
    free-reward share, instruction coverage), breadth and wall time."""
    head = (
        "| round | parents | candidates | accepted | discarded | dependency ok | free reward "
        "| coverage | seeds with descendants | wall s |"
    )
    lines = [head, "|---" * 10 + "|"]
    lines += [
        f"| {r.round} | {r.parents} | {r.candidates} | {r.accepted} | {r.discarded} | "
        f"{_pct(r.dependency_ok_share)} | {_pct(r.mean_free_reward_share)} | "
        f"{_pct(r.coverage_share)} | {r.seeds_with_descendants or 0} | {r.wall_s:.0f} |"
        for r in rows
    ]
    return "\n".join(lines)


@dg.asset(group_name="synthesis", deps=["seed_corpus"], kinds={"bubblewrap"}, pool=SYNTHESIS_POOL)
def synthesis_rounds(
    context: dg.AssetExecutionContext, config: SynthesisRoundsConfig, forge: ForgeConfig
) -> dg.MaterializeResult:
    """Recursive synthesis rounds, run in order from the last recorded one (records `rst`)."""
    store = forge.open_store()
    cfg = forge.synth_config()
    target = target_rounds(
        set(ledger.round_rows(store, cfg.campaign)), cfg.rounds, config.add_rounds
    )
    context.log.info(f"campaign {cfg.campaign!r}: rounds up to {target}, {cfg.per_round} per round")

    logged: dict[str, int] = {}
    beat = Heartbeat(context.log.info, "synthesis")

    def progress(phase: str, done: int, total: int) -> None:
        """A line per seed profiled and per candidate validated (the step used to log only
        each phase's end, and nothing for minutes while seeds were profiled); a slow
        candidate gets a `still ...` line every half minute (pipelines.progress)."""
        if logged.get(phase) != done:
            logged[phase] = done
            context.log.info(f"{phase}: {done}/{total}")
            beat.heard(f"{phase} {done}/{total}")

    with beat:
        rows = run_synthesis(
            replace(cfg, rounds=target), store, progress=progress, log=context.log.info
        )
    stopped = len(rows) < target
    return dg.MaterializeResult(
        metadata={
            "rounds": len(rows),
            "accepted": sum(r.accepted for r in rows),
            "candidates": sum(r.candidates for r in rows),
            "stopped_early": f"after round {len(rows)}: the pool is empty" if stopped else "no",
            "by_round": dg.MetadataValue.md(rounds_markdown(rows)),
        }
    )


@dg.asset(group_name="synthesis", deps=[synthesis_rounds], kinds={"parquet"}, pool=SYNTHESIS_POOL)
def validation_trials(forge: ForgeConfig) -> dg.MaterializeResult:
    """The sandbox trials that validated the campaign's candidates, by agent and outcome."""
    counts = ledger.validation_trial_counts(forge.open_store(), forge.campaign)
    lines = ["| agent | failure mode | trials |", "| --- | --- | --- |"]
    lines += [f"| {a} | {m} | {n} |" for a, modes in counts.items() for m, n in modes.items()]
    total = sum(n for modes in counts.values() for n in modes.values())
    return dg.MaterializeResult(
        metadata={"trials": total, "by_outcome": dg.MetadataValue.md("\n".join(lines))}
    )


@dg.asset_check(asset=validation_trials, blocking=True)
def accepted_tasks_have_a_passing_oracle(forge: ForgeConfig) -> dg.AssetCheckResult:
    """Every accepted candidate has a recorded oracle trial that resolved."""
    missing = ledger.accepted_without_passing_oracle(forge.open_store(), forge.campaign)
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"without_passing_oracle": len(missing), "first": ", ".join(missing[:5])},
    )
