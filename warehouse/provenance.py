"""Training provenance in SQL: which pool version (and audit) a checkpoint trained on.

A campaign run writes a `campaigns` row when it starts and one when it ends; its
`evaluations` and `trajectories` rows carry the run id in their `campaign` column. Every
snapshot defines, over those tables:

- `campaign_runs`: one row per start of a run, with its outcome (`started` while it runs, or
  when it died without an end row; `finished`; `failed` with `detail`).
- `evaluation_scores`: one row per evaluated checkpoint with the pool, pool version and audit
  version it trained on (the start of its run that preceded the evaluation: a resumed run may
  have moved to another version) and its scores. Infrastructure failures are excluded from
  the rates and counted apart, as in `training.evaluation.summarize_evaluation`.

Nothing here imports above `warehouse/`; the failure modes come from `tasks.results`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tasks.pools import Pool
from tasks.results import INFRASTRUCTURE_FAILURES

if TYPE_CHECKING:
    from warehouse.snapshot import Snapshot

_INFRA = ", ".join(f"'{m.value}'" for m in sorted(INFRASTRUCTURE_FAILURES))

PROVENANCE_SQL: tuple[str, ...] = (
    """CREATE VIEW campaign_runs AS
       SELECT s.run_id, s.started_at, coalesce(e.status, s.status) AS status, e.ended_at,
              s.pool, s.pool_version, s.audit_version, s.preset, s.config_hash, s.steps,
              s.prefect_flow_run_id, s.dagster_run_id, s.resumed_from, e.detail
       FROM campaigns s
       LEFT JOIN (
           SELECT run_id, started_at, arg_max(status, recorded_at) AS status,
                  max(ended_at) AS ended_at, arg_max(detail, recorded_at) AS detail
           FROM campaigns WHERE status <> 'started' GROUP BY run_id, started_at
       ) e ON e.run_id = s.run_id AND e.started_at = s.started_at
       WHERE s.status = 'started'""",
    f"""CREATE VIEW evaluation_scores AS
       WITH scored AS (
           SELECT campaign, checkpoint, benchmark,
                  count(DISTINCT task_hash) AS tasks,
                  count(*) FILTER (WHERE coalesce(failure_mode, 'none') NOT IN ({_INFRA}))
                      AS samples,
                  count(*) FILTER (WHERE failure_mode IN ({_INFRA})) AS infrastructure_failures,
                  avg(CASE WHEN resolved THEN 1.0 ELSE 0.0 END)
                      FILTER (WHERE coalesce(failure_mode, 'none') NOT IN ({_INFRA}))
                      AS resolved_rate,
                  avg(dense_score)
                      FILTER (WHERE coalesce(failure_mode, 'none') NOT IN ({_INFRA}))
                      AS dense_score,
                  max(weight_version) AS weight_version,
                  min(recorded_at) AS recorded_at
           FROM evaluations GROUP BY campaign, checkpoint, benchmark
       )
       SELECT s.campaign AS run_id, s.checkpoint, s.benchmark, s.tasks, s.samples,
              s.infrastructure_failures, coalesce(s.resolved_rate, 0.0) AS resolved_rate,
              coalesce(s.dense_score, 0.0) AS dense_score, s.weight_version, s.recorded_at,
              c.pool, c.pool_version, c.audit_version, c.preset, c.config_hash,
              c.prefect_flow_run_id, c.dagster_run_id, c.started_at
       FROM scored s ASOF LEFT JOIN campaign_runs c
         ON s.campaign = c.run_id AND s.recorded_at >= c.started_at""",
)


def pool_audit_version(snap: Snapshot, pool: Pool | str, version: int) -> str | None:
    """The audit version recorded with a pool version (None: not recorded, as for pools no
    audit selects and versions recorded before the column existed)."""
    value = snap.sql(
        """SELECT max(audit_version) FROM pool_members
           WHERE pool = $p AND pool_version = $v""",
        {"p": Pool.parse(pool).value, "v": version},
    ).scalar()
    return None if value is None else str(value)
