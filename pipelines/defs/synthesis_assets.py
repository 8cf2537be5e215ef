"""Recursive synthesis: one dynamic partition per round, and the validation trials."""

import dagster as dg

from pipelines.defs.resources import ForgeConfig
from synthesis import ledger
from synthesis.rounds import run_round_number
from warehouse import Store

synthesis_rounds_partitions = dg.DynamicPartitionsDefinition(name="synthesis_rounds")


@dg.asset(
    group_name="synthesis",
    partitions_def=synthesis_rounds_partitions,
    deps=["seed_corpus"],
    kinds={"bubblewrap"},
)
def synthesis_round(context: dg.AssetExecutionContext, forge: ForgeConfig) -> dg.MaterializeResult:
    """One RST round (partition key = round number); reads earlier rounds from the warehouse."""
    r = int(context.partition_key)
    stats = run_round_number(forge.synth_config(), r, forge.store_path)
    reasons = ", ".join(f"{k}={v}" for k, v in stats.discard_reasons.items()) or "none"
    return dg.MaterializeResult(
        metadata={
            "round": r,
            "parents": stats.parents,
            "candidates": stats.candidates,
            "accepted": stats.accepted,
            "discarded": stats.discarded,
            "discard_reasons": reasons,
            "mean_solution_steps": stats.mean_solution_steps or 0.0,
            "mean_assertions": stats.mean_assertions or 0.0,
            "dependency_ok_share": stats.dependency_ok_share or 0.0,
            "mean_free_reward_share": stats.mean_free_reward_share or 0.0,
            "coverage_share": stats.coverage_share or 0.0,
            "seeds_with_descendants": stats.seeds_with_descendants or 0,
            "mean_distinct_tools": stats.mean_distinct_tools or 0.0,
            "mean_files_touched": stats.mean_files_touched or 0.0,
            "mean_dependency_depth": stats.mean_dependency_depth or 0.0,
            "wall_s": stats.wall_s,
        }
    )


@dg.asset(group_name="synthesis", deps=[synthesis_round], kinds={"parquet"})
def validation_trials(forge: ForgeConfig) -> dg.MaterializeResult:
    """The sandbox trials that validated the campaign's candidates, by agent and outcome."""
    counts = ledger.validation_trial_counts(Store.open(forge.store_path), forge.campaign)
    lines = ["| agent | failure mode | trials |", "| --- | --- | --- |"]
    lines += [f"| {a} | {m} | {n} |" for a, modes in counts.items() for m, n in modes.items()]
    total = sum(n for modes in counts.values() for n in modes.values())
    return dg.MaterializeResult(
        metadata={"trials": total, "by_outcome": dg.MetadataValue.md("\n".join(lines))}
    )


@dg.asset_check(asset=validation_trials, blocking=True)
def accepted_tasks_have_a_passing_oracle(forge: ForgeConfig) -> dg.AssetCheckResult:
    """Every accepted candidate has a recorded oracle trial that resolved."""
    missing = ledger.accepted_without_passing_oracle(Store.open(forge.store_path), forge.campaign)
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"without_passing_oracle": len(missing), "first": ", ".join(missing[:5])},
    )
