"""Jobs a UI user launches: build the pools (what `t1 demo` materializes) and add rounds.

Both select the same assets in dependency order, with every asset check; synthesis rounds run
in order inside `synthesis_rounds`, so one launch builds T1 on a fresh instance.
"""

import dagster as dg

# The main job's stages, in order (`pipelines.main_job` runs them one after another).
SOURCES = ("seed_corpus", "tmax_pool")
SYNTHESIS = ("synthesis_rounds",)
POOLS = ("validation_trials", "audit_results", "rst_pool", "t1_pool", "pool_reports")
STAGES = (SOURCES, SYNTHESIS, POOLS)

# Dagster concurrency pools: one synthesis step and one audit/pool step at a time on an
# instance (the limit, 1, is `pools: default_limit` in the dagster.yaml `dagster_home`
# writes); a second run's step waits for the slot. The stages' store locks
# (`warehouse.locks`) also refuse a writer from outside Dagster (`t1 synth`, `t1 audit`).
SYNTHESIS_POOL = "t1_synthesis"
AUDIT_POOL = "t1_audit"
POOL_LIMIT = 1
BUILD_POOLS = (*SOURCES, *SYNTHESIS, *POOLS)

build_pools = dg.define_asset_job(
    "build_pools",
    selection=dg.AssetSelection.assets(*BUILD_POOLS),
    description="Seeds, synthesis rounds (in order), validation trials, audit, the rst and t1 "
    "pools and their reports, with every check: what `t1 demo` materializes.",
)

add_synthesis_rounds = dg.define_asset_job(
    "add_synthesis_rounds",
    selection=dg.AssetSelection.assets(*SYNTHESIS, *POOLS),
    description="Run N more synthesis rounds (set add_rounds in the Launchpad), then validate, "
    "re-audit and re-select the pools.",
    config={"ops": {"synthesis_rounds": {"config": {"add_rounds": 1}}}},
)
