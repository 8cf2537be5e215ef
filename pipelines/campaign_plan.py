"""What a campaign launch trains on: the preset with the launch's choices, and the pool
version split into training and held-out tasks, lineage-aware (Prefect-free, so `t1 train
--no-flow` and the flow share it).

A pool task that descends from a held-out evaluation task, or is an ancestor of one, never
trains: it shares the held-out task's environment, checks or solution path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
    v, members, related = _members_and_relatives(cfg, pool, version, held_out)
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
    return CampaignTasks(pool, v, train, held_out, excluded)


def _members_and_relatives(
    cfg: CampaignConfig, pool: str, version: int | None, held_out: list[Task]
) -> tuple[int, list[Task], set[str]]:
    from tasks.corpus import load_seeds
    from warehouse import Snapshot, StoreNotFoundError, load_pool, pool_tasks, pool_version
    from warehouse.lineage import relatives

    try:
        with Snapshot.open(cfg.store) as snap:
            recorded = pool != Pool.SEED or version is not None or _has_versions(snap, pool)
            if recorded:
                v = pool_version(snap, pool, version)
                members = pool_tasks(load_pool(snap, pool, v))
                return v, members, relatives(snap, [t.content_hash for t in held_out])
    except StoreNotFoundError:
        if pool != Pool.SEED or version is not None:
            raise
    return 0, load_seeds(), set()  # seeds have no recorded relatives but themselves


def _has_versions(snap, pool: str) -> bool:
    rows = snap.sql("SELECT count(*) FROM pool_members WHERE pool = $p", {"p": pool}).rows
    return bool(rows[0][0])


def campaign_config(
    preset: str,
    *,
    steps: int | None,
    eval_every: int | None,
    pool: str,
    store: str | None,
    policy_path: str | None,
    run_dir: str | None,
    run_id: str,
) -> CampaignConfig:
    """The preset with this launch's choices; `campaign` and `run_dir` are unique per run."""
    base = load_campaign_config(preset, steps=steps, eval_every=eval_every)
    campaign = f"{base.campaign}-{run_id}"
    return base.model_copy(
        update={
            "campaign": campaign,
            "run_dir": Path(run_dir) if run_dir else base.run_dir.parent / campaign,
            "store": Path(store) if store else base.store,
            "policy_path": Path(policy_path) if policy_path else base.policy_path,
            "pool": pool,
        }
    )
