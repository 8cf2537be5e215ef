"""Scheduled re-audit: validation, the audit (current audit version), RST and T1, reports.

The job selects the same assets as the pools stage of `build_pools`, so the blocking checks of
validation (a passing oracle per accepted task) and of RST (decontamination) run before T1 is
re-selected: a re-audit cannot put tasks into T1 that skipped them.
"""

import os

import dagster as dg

from pipelines.defs.jobs import POOLS

reaudit_job = dg.define_asset_job(
    "reaudit_job",
    selection=dg.AssetSelection.assets(*POOLS),
    description="Re-validate, re-audit (only new (task hash, audit version) pairs are scored), "
    "record rst and re-select t1, with their blocking checks; then the reports.",
)

reaudit_schedule = dg.ScheduleDefinition(
    name="reaudit_schedule",
    job=reaudit_job,
    cron_schedule=os.environ.get("T1_REAUDIT_CRON", "0 3 * * *"),
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
