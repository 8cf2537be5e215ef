"""Simulated Ray clusters on this machine (`ray.cluster_utils.Cluster`): a head without sandbox
slots (the driver's node) and worker nodes that each offer their own `t1_sandbox_slot`s, with
small object stores and no dashboard. Node death is detected within ~2 s (health checks
every 500 ms, 3 misses) so a node-loss test stays short."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from executor import SLOT_RESOURCE

STORE_BYTES = 80 * 2**20
FAST_DEATH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


def start_cluster(head_slots: float, worker_slots: list[float]) -> tuple[Any, list[Any]]:
    """A connected Ray cluster and its worker nodes (the caller shuts both down)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {SLOT_RESOURCE: head_slots},
            "object_store_memory": STORE_BYTES,
            "include_dashboard": False,
            "_system_config": FAST_DEATH,
        },
    )
    nodes = [
        cluster.add_node(num_cpus=1, resources={SLOT_RESOURCE: s}, object_store_memory=STORE_BYTES)
        for s in worker_slots
    ]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster, nodes


@pytest.fixture(scope="module")
def two_node_cluster() -> Iterator[tuple[Any, list[Any]]]:
    """Head (no slots) + two worker nodes with 2 slots each."""
    import ray

    cluster, nodes = start_cluster(0, [2, 2])
    try:
        yield cluster, nodes
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def one_node_cluster() -> Iterator[Any]:
    """One node (the head) with 2 slots: the driver's own machine as a Ray cluster."""
    import ray

    cluster, _ = start_cluster(2, [])
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
