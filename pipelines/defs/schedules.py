"""Scheduled re-audit: re-run the audit with the current audit version and re-select T1."""

import os

import dagster as dg

reaudit_job = dg.define_asset_job(
    "reaudit_job",
    selection=dg.AssetSelection.assets("audit_results", "t1_pool", "pool_reports"),
    description="Re-audit (only new (task hash, audit version) pairs are scored) and re-select.",
)

reaudit_schedule = dg.ScheduleDefinition(
    name="reaudit_schedule",
    job=reaudit_job,
    cron_schedule=os.environ.get("T1_REAUDIT_CRON", "0 3 * * *"),
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
