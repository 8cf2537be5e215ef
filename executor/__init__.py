"""Where trial work runs: one interface, local threads by default, Ray on a cluster.

A leaf package (it imports nothing of ours): synthesis, audit and training submit their
sandbox trials here and never import Ray themselves. See docs/scale.md.
"""

from __future__ import annotations

from collections.abc import Callable

from executor.base import (
    ADDRESS_ENV,
    LOCAL,
    SLOT_RESOURCE,
    Executor,
    ExecutorConfig,
    TrialLost,
    default_address,
)
from executor.local import LocalExecutor

__all__ = [
    "ADDRESS_ENV",
    "LOCAL",
    "SLOT_RESOURCE",
    "Executor",
    "ExecutorConfig",
    "LocalExecutor",
    "TrialLost",
    "default_address",
    "open_executor",
]


def open_executor(
    cfg: ExecutorConfig | None = None,
    *,
    workers: int = 2,
    reclaim: Callable[[], object] | None = None,
) -> Executor:
    """The executor `cfg` names: `LocalExecutor(workers)` for `local`, else a `RayExecutor`
    connected to `cfg.address` (Ray is imported only then). `reclaim` (a picklable callable,
    e.g. `sandbox.gc.collect_garbage`) is run on the cluster's slot nodes after a worker died
    there, to reclaim what its sandboxes left (a local thread leaves nothing: its process
    lives on)."""
    cfg = cfg or ExecutorConfig()
    if cfg.local:
        return LocalExecutor(workers=workers)
    from executor.cluster import RayExecutor

    return RayExecutor(cfg, reclaim=reclaim)
