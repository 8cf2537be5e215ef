"""The warehouse: Parquet parts as the durable format, DuckDB snapshots as the query engine.

Writers call the `record_*` functions; readers open a `Snapshot` (or use `t1 sql`). See
docs/warehouse.md for the layout, the concurrency contract and worked lineage queries.
"""

import warehouse.objectstore  # noqa: F401  (registers s3:// stores with Store.at)
from tasks.pools import Pool
from warehouse.pools import (
    PoolExport,
    PoolVersion,
    export_pool,
    load_pool,
    pool_tasks,
    pool_version,
    record_pool,
    reference_verdicts,
    rst_members,
)
from warehouse.recording import (
    record_audits,
    record_campaign,
    record_evaluations,
    record_rows,
    record_tasks,
    record_trajectories,
    record_trials,
)
from warehouse.records import (
    AssertionRecord,
    AuditRecord,
    CampaignRecord,
    CampaignStatus,
    EvaluationRecord,
    PoolMemberRecord,
    TaskRecord,
    TrajectoryRecord,
    TrialRecord,
)
from warehouse.snapshot import Snapshot, open_snapshot
from warehouse.store import (
    SchemaVersionError,
    Store,
    StoreNotFoundError,
    WarehouseError,
    resolve_store_path,
)

__all__ = [
    "AssertionRecord",
    "AuditRecord",
    "CampaignRecord",
    "CampaignStatus",
    "EvaluationRecord",
    "Pool",
    "PoolExport",
    "PoolMemberRecord",
    "PoolVersion",
    "SchemaVersionError",
    "Snapshot",
    "Store",
    "StoreNotFoundError",
    "TaskRecord",
    "TrajectoryRecord",
    "TrialRecord",
    "WarehouseError",
    "export_pool",
    "load_pool",
    "open_snapshot",
    "pool_tasks",
    "pool_version",
    "record_audits",
    "record_campaign",
    "record_evaluations",
    "record_pool",
    "record_rows",
    "record_tasks",
    "record_trajectories",
    "record_trials",
    "reference_verdicts",
    "resolve_store_path",
    "rst_members",
]
