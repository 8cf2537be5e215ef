"""What a campaign launch trains on: the preset with the launch's choices, and the pool
version split into training and held-out tasks, lineage-aware (Prefect-free, so `t1 train
--no-flow` and the flow share it).

A pool task that descends from a held-out evaluation task, or is an ancestor of one, never
trains: it shares the held-out task's environment, checks or solution path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipelines.host import BACKEND_ENV, RUNS_DIR_ENV
from tasks.model import Task
from tasks.pools import Pool
from training.campaign_config import CampaignConfig, load_campaign_config


@dataclass
class CampaignTasks:
    """A pool version split for training: what trains, what is held out, what lineage
    excluded."""

    pool: str
    pool_version: int
    train: list[Task]
    held_out: list[Task]
    excluded: list[str] = field(default_factory=list)  # task ids
    audit_version: str | None = None  # the audit that selected the version, where recorded


def split_campaign_tasks(
    cfg: CampaignConfig, pool: Pool | str, version: int | None
) -> CampaignTasks:
    """The pool version's tasks less every task related by lineage to a held-out one; the
    held-out tasks are the preset's evaluation tasks.

    Pool `seed` falls back to the bundled corpus (version 0) while no version is recorded,
    and keeps only the preset's `train_task_ids` when it names some (they are seed ids).
    """
    from training.campaign import campaign_tasks

    pool = Pool.parse(pool).value
    _, held_out = campaign_tasks(cfg.model_copy(update={"pool": None}))
    v, members, related, audit = _members_and_relatives(cfg, pool, version, held_out)
    related |= {t.content_hash for t in held_out}  # held-out tasks the store never recorded
    if pool == Pool.SEED and cfg.train_task_ids is not None:
        members = [t for t in members if t.id in set(cfg.train_task_ids)]
    train = [t for t in members if t.content_hash not in related]
    if not train:
        raise ValueError(
            f"pool {pool} v{v}: no task left to train on ({len(members)} members, all related "
            "by lineage to the held-out evaluation tasks)"
        )
    excluded = [t.id for t in members if t.content_hash in related]
    return CampaignTasks(pool, v, train, held_out, excluded, audit)


def with_audit_version(split: CampaignTasks, given: str | None) -> CampaignTasks:
    """The split naming the audit that selected its pool version: the one the warehouse
    recorded with the version (`pool_members.audit_version`), else `given` (what Dagster
    passes from the pool asset; a Prefect form leaves it empty), else None. A run started
    from Prefect's form used to report `audit_version: unknown`."""
    split.audit_version = split.audit_version or given or None
    return split


def _members_and_relatives(
    cfg: CampaignConfig, pool: str, version: int | None, held_out: list[Task]
) -> tuple[int, list[Task], set[str], str | None]:
    from tasks.corpus import load_seeds
    from warehouse import Snapshot, StoreNotFoundError, load_pool, pool_tasks, pool_version
    from warehouse.lineage import relatives
    from warehouse.provenance import pool_audit_version

    try:
        with Snapshot.open(cfg.store) as snap:
            recorded = pool != Pool.SEED or version is not None or _has_versions(snap, pool)
            if recorded:
                v = pool_version(snap, pool, version)
                members = pool_tasks(load_pool(snap, pool, v))
                related = relatives(snap, [t.content_hash for t in held_out])
                return v, members, related, pool_audit_version(snap, pool, v)
    except StoreNotFoundError:
        if pool != Pool.SEED or version is not None:
            raise
    return 0, load_seeds(), set(), None  # seeds have no recorded relatives but themselves


def _has_versions(snap, pool: str) -> bool:
    rows = snap.sql("SELECT count(*) FROM pool_members WHERE pool = $p", {"p": pool}).rows
    return bool(rows[0][0])


def campaign_config(
    preset: str | None,
    *,
    steps: int | None,
    eval_every: int | None,
    pool: str | None,
    store: str | None,
    policy_path: str | None,
    runs_dir: str | None,
    resume_from: str | None = None,
    cluster_address: str | None = None,
    pool_version: int | None = None,
) -> CampaignConfig:
    """A launch's config: None is an option not chosen. A new run: the preset (None:
    `CampaignRequest`'s) with the launch's choices and a new run id (unique per run, known
    before the run starts so the orchestrator can name and tag it); $T1_SANDBOX_BACKEND and
    $T1_RUNS_DIR (`t1 ui --store`, `t1 demo` set them) override the preset's backend and runs
    directory; `runs_dir` overrides both. Resuming: the run's own recorded config with the
    choices made (`resumed_config`). `cluster_address` (None: the preset's) is where the
    trials run (`ExecutorConfig`).
    Raises ValueError naming the directory when `resume_from` holds no checkpoint, the file
    when the run's config.json is unreadable."""
    from pipelines.campaign_deployment import CampaignRequest
    from training.campaign import new_run_id

    if resume_from is not None:
        return resumed_config(
            Path(resume_from), preset=preset, steps=steps, eval_every=eval_every, pool=pool,
            pool_version=pool_version, store=store, policy_path=policy_path,
            cluster_address=cluster_address,
        )  # fmt: skip
    defaults = CampaignRequest()
    preset = preset or defaults.preset
    runs_dir = runs_dir or os.environ.get(RUNS_DIR_ENV) or None
    base = load_campaign_config(
        preset,
        steps=steps,
        eval_every=eval_every,
        sandbox_backend=os.environ.get(BACKEND_ENV) or None,
        runs_dir=Path(runs_dir) if runs_dir else None,
        store=Path(store) if store else None,
        policy_path=Path(policy_path) if policy_path else None,
    )
    executor = base.executor
    if cluster_address is not None:
        executor = replace(executor, address=cluster_address)
    return CampaignConfig.model_validate(
        {
            **base.model_dump(),
            "run_id": new_run_id(base.campaign),
            "preset": preset,
            "pool": pool or defaults.pool,
            "pool_version": pool_version,
            "executor": executor,
        }
    )


def resumed_config(
    resume_from: Path,
    *,
    preset: str | None = None,
    steps: int | None = None,
    eval_every: int | None = None,
    pool: str | None = None,
    pool_version: int | None = None,
    store: str | None = None,
    policy_path: str | None = None,
    cluster_address: str | None = None,
) -> CampaignConfig:
    """The config a resumed run continues with: the one its run directory recorded
    (config.json: preset settings, steps, cadences, pool and version, store, executor, seed)
    with the options chosen here (None: not chosen) in place of what they set.

    Another pool without a version trains on that pool's latest. A preset other than the
    recorded one is refused (its settings are not this run's); so is a run directory
    without a readable config.json (ValueError naming the file)."""
    from training.campaign_config import RUN_CONFIG, recorded_config
    from training.checkpoint import latest_checkpoint, read_state

    checkpoint = latest_checkpoint(resume_from)
    run_id = read_state(checkpoint).run_id
    run_dir = checkpoint.parent.parent  # <run dir>/checkpoints/step-N
    recorded = recorded_config(run_dir)
    if preset is not None and preset != recorded.preset:
        raise ValueError(
            f"--preset {preset}: a resumed run keeps the settings it recorded in "
            f"{run_dir / RUN_CONFIG} (preset {recorded.preset or 'not recorded'}); "
            "drop --preset, or start a new run"
        )
    given = {
        "steps": steps, "eval_every": eval_every, "pool": pool, "pool_version": pool_version,
        "store": store, "policy_path": policy_path,
    }  # fmt: skip
    chosen: dict[str, object] = {k: v for k, v in given.items() if v is not None}
    if pool is not None and pool != recorded.pool:
        chosen["pool_version"] = pool_version  # None: the other pool's latest
    if cluster_address is not None:
        chosen["executor"] = replace(recorded.executor, address=cluster_address)
    return CampaignConfig.model_validate(
        {
            **recorded.model_dump(),
            **chosen,
            "run_id": run_id,
            "runs_dir": run_dir.parent,
            "resume_from": resume_from,
        }
    )


def ensure_policy(cfg: CampaignConfig, log: Callable[[str], None]) -> None:
    """Build the warm-started policy a new run starts from, if it is not cached, with a line
    per 50 of its supervised steps (on a fresh checkout this is minutes to most of an hour;
    it used to happen inside the run's setup without a word). Nothing when the run starts
    from a given checkpoint or resumes."""
    if cfg.policy_path is not None or cfg.resume_from is not None:
        return
    import contextlib
    import io

    from training.warm_start import WarmStartConfig, cache_root, warm_started_policy

    steps = WarmStartConfig().steps
    log(f"the tiny policy's warm start: read from {cache_root() / 'policy'}, or built once "
        f"({steps} supervised steps; a line per 50)")  # fmt: skip

    class Lines(io.TextIOBase):
        def write(self, text: str) -> int:
            for line in text.splitlines():
                if line.strip():
                    log(line.strip())
            return len(text)

    with contextlib.redirect_stdout(Lines()):
        path = warm_started_policy(reuse_stale=True, log=True)
    log(f"warm start ready: {path}")
