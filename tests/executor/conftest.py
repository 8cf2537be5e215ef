"""Simulated Ray clusters on this machine (`ray.cluster_utils.Cluster`): a head without sandbox
slots (the driver's node) and worker nodes that each offer their own `t1_sandbox_slot`s, with
small object stores and no dashboard. Node death is detected within ~2 s (health checks
every 500 ms, 3 misses) so a node-loss test stays short.

One simulated cluster on the machine at a time: under `make test`'s two workers a module that
starts one (marked `ray`) waits for the other worker's to finish (`one_cluster_at_a_time`)."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CLUSTER_LOCK = Path(tempfile.gettempdir()) / "t1-forge-tests-ray.lock"


@pytest.fixture(scope="module", autouse=True)
def one_cluster_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the machine's Ray-test lock while a module marked `ray` runs."""
    if request.node.get_closest_marker("ray") is None:
        yield
        return
    with open(CLUSTER_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start_cluster(head_slots: float, worker_slots: list[float]) -> tuple[Any, list[Any]]:
    """A connected Ray cluster and its worker nodes (the caller shuts both down)."""
    pytest.importorskip("ray")
    from executor.cluster import simulated_cluster

    return simulated_cluster(head_slots, worker_slots)


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
