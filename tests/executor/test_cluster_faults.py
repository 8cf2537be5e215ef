"""RayExecutor on a simulated 2-node cluster: placement by slots and image affinity, and a
node that dies mid-batch (its trials re-run elsewhere, each recorded once, none lost)."""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import as_completed
from pathlib import Path

import pytest

from executor import ExecutorConfig, TrialLost

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray")
from executor.cluster import RayExecutor  # noqa: E402 - needs ray


def sleepy_trial(marks: str, trial_id: str, seconds: float) -> str:
    """A cheap trial: leaves a start mark naming its node and process, sleeps, answers."""
    node = ray.get_runtime_context().get_node_id()
    Path(marks, f"{trial_id}.{node}.{os.getpid()}.{uuid.uuid4().hex[:6]}").touch()
    time.sleep(seconds)
    return f"{trial_id}:ok"


def starts(marks: Path) -> dict[str, list[str]]:
    """trial id -> the nodes each of its attempts started on."""
    out: dict[str, list[str]] = {}
    for p in marks.iterdir():
        trial_id, node, *_ = p.name.split(".")
        out.setdefault(trial_id, []).append(node)
    return out


def test_slots_bound_the_batch_and_affinity_prefers_the_remembered_node(two_node_cluster, tmp_path):
    _, (a, b) = two_node_cluster
    ex = RayExecutor(ExecutorConfig(address="auto"))
    # A trial with a known key lands on the node remembered for it, either way round.
    ex.affinity["env-1"] = b.node_id
    ex.affinity["env-2"] = a.node_id
    f1 = ex.submit("aff-1", sleepy_trial, str(tmp_path), "aff-1", 0.0, affinity="env-1")
    f2 = ex.submit("aff-2", sleepy_trial, str(tmp_path), "aff-2", 0.0, affinity="env-2")
    assert (f1.result(60), f2.result(60)) == ("aff-1:ok", "aff-2:ok")
    assert (ex.placements["aff-1"], ex.placements["aff-2"]) == (b.node_id, a.node_id)
    # A new key is remembered where its first trial ran; a stale node id is only a preference.
    f3 = ex.submit("aff-3", sleepy_trial, str(tmp_path), "aff-3", 0.0, affinity="env-3")
    f3.result(60)
    assert ex.affinity["env-3"] == ex.placements["aff-3"]
    ex.affinity["env-4"] = "ab" * 28  # a node that does not exist
    f4 = ex.submit("aff-4", sleepy_trial, str(tmp_path), "aff-4", 0.0, affinity="env-4")
    assert f4.result(60) == "aff-4:ok"
    # 2 + 2 slots: 8 one-second trials take at least two waves.
    t0 = time.monotonic()
    futures = [ex.submit(f"w{i}", sleepy_trial, str(tmp_path), f"w{i}", 1.0) for i in range(8)]
    assert sorted(f.result(60) for f in futures) == sorted(f"w{i}:ok" for i in range(8))
    wall = time.monotonic() - t0
    assert 2.0 <= wall < 30, wall
    used = [ex.placements[f"w{i}"] for i in range(8)]
    assert set(used) <= {a.node_id, b.node_id}
    ex.shutdown()


def test_a_node_lost_mid_batch_reruns_its_trials_elsewhere_recorded_once(
    two_node_cluster, tmp_path
):
    cluster, (a, b) = two_node_cluster
    ex = RayExecutor(ExecutorConfig(address="auto", retries=3))
    ids = [f"t{i}" for i in range(8)]
    futures = {ex.submit(t, sleepy_trial, str(tmp_path), t, 3.0): t for t in ids}
    assert ex.submit("t0", sleepy_trial, str(tmp_path), "t0", 3.0) in futures  # idempotent
    deadline = time.monotonic() + 60
    while not any(b.node_id in nodes for nodes in starts(tmp_path).values()):
        assert time.monotonic() < deadline, "no trial started on node b"
        time.sleep(0.1)
    on_b = {t for t, nodes in starts(tmp_path).items() if b.node_id in nodes}
    cluster.remove_node(b, allow_graceful=False)

    results: dict[str, str] = {}
    for fut in as_completed(futures, timeout=90):
        trial_id = futures[fut]
        assert trial_id not in results, f"{trial_id} settled twice"
        results[trial_id] = fut.result()  # raises if a trial was lost or failed
    assert results == {t: f"{t}:ok" for t in ids}  # none lost, none a failure row
    final = starts(tmp_path)
    assert on_b, "the node died before any of its trials started"
    for t in on_b:  # started on the dead node, then again, and recorded from, the survivor
        assert len(final[t]) >= 2 and a.node_id in final[t], final[t]
    assert all(ex.placements[t] == a.node_id for t in ids)
    ex.shutdown()


def test_no_slot_left_is_a_lost_trial_after_a_bounded_wait(two_node_cluster, tmp_path):
    """Every slot node dies under a running trial: the trial is `TrialLost`, naming the
    missing resource, once `no_slot_timeout_s` passed (it waited for ever, silently, for a
    resource no node offered any more: the slot check ran only at connect time)."""
    cluster, nodes = two_node_cluster
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    left = [n for n in nodes if n.node_id in alive]
    assert left, "no worker node left to lose"
    ex = RayExecutor(ExecutorConfig(address="auto", retries=3, no_slot_timeout_s=3.0))
    running = ex.submit("last", sleepy_trial, str(tmp_path), "last", 60.0)
    deadline = time.monotonic() + 60
    while not list(tmp_path.iterdir()):
        assert time.monotonic() < deadline, "the trial never started"
        time.sleep(0.1)
    for node in left:
        cluster.remove_node(node, allow_graceful=False)
    queued = ex.submit("queued", sleepy_trial, str(tmp_path), "queued", 0.0)
    t0 = time.monotonic()
    for fut in (running, queued):
        with pytest.raises(TrialLost, match="no live node of the cluster offered t1_sandbox_slot"):
            fut.result(timeout=45)
    assert time.monotonic() - t0 < 45
    assert ex.no_slot_since is not None
    ex.shutdown()
