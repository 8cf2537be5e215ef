"""Several Docker-API engines as one docker backend (sandbox.docker_hosts): placement by free
slots and image affinity (pure), and a batch over two private Podman services with separate
storage roots, one of them stopped mid-batch."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import pytest

from sandbox.docker_hosts import EnginePool, configured_pool, parse_hosts
from tasks.results import FailureMode
from tests.sandbox.conftest import unmount_under


def pool(n: int = 3, slots: int = 2) -> EnginePool:
    return EnginePool([f"unix:///e{i}.sock" for i in range(n)], slots, connect=lambda url: url)


def test_parse_hosts():
    assert parse_hosts(" tcp://a:2376, ssh://u@b ,,tcp://a:2376") == ["tcp://a:2376", "ssh://u@b"]


def test_placement_prefers_free_slots_then_the_engine_holding_the_image():
    p = pool()
    e0, e1, e2 = p.engines
    e1.images.add("img")
    assert p.choose("img", 0.0) is e1  # affinity
    e1.live = e1.slots  # full: affinity never overfills an engine
    assert p.choose("img", 0.0) in (e0, e2)
    e0.live = 1
    assert p.choose("other", 0.0) is e2  # the most free slots
    e0.live = e2.live = 2
    assert p.choose("other", 0.0) is None


def test_an_engine_that_does_not_answer_is_out_of_the_rotation():
    p = pool(2, slots=1)
    first = p.acquire("x")
    p.mark_down(first, "refused")
    p.release(first)
    second = p.acquire("x")
    assert second is not first
    p.release(second)
    p.mark_down(second, "refused")
    with pytest.raises(Exception, match="no engine of T1_DOCKER_HOSTS answers"):
        p.acquire("x", timeout_s=1)


def test_acquire_waits_for_a_free_slot():
    p = pool(1, slots=1)
    held = p.acquire("x")
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(p.acquire("x", timeout_s=10)))
    t.start()
    time.sleep(0.3)
    assert not got
    p.release(held)
    t.join(5)
    assert got == [held]


def test_pool_from_the_environment(monkeypatch):
    monkeypatch.delenv("T1_DOCKER_HOSTS", raising=False)
    assert configured_pool() is None
    monkeypatch.setenv("T1_DOCKER_HOSTS", "unix:///a.sock,unix:///b.sock")
    monkeypatch.setenv("T1_DOCKER_SLOTS", "3")
    p = configured_pool()
    assert p is not None and [e.slots for e in p.engines] == [3, 3]
    monkeypatch.setenv("T1_DOCKER_SLOTS", "zero")
    with pytest.raises(ValueError, match="T1_DOCKER_SLOTS"):
        configured_pool()


@pytest.mark.sandbox
def test_a_batch_over_two_engines_survives_losing_one(tmp_path, monkeypatch):
    """Two private Podman services, each with its own storage root: trials are spread over
    both (each builds the image it runs); one service is stopped mid-batch: every trial is
    either judged or an infrastructure failure (never a 0 reward), and the rest of the batch
    runs on the engine left."""
    from sandbox import run_trial
    from sandbox.base import SandboxUnavailable
    from sandbox.podman import PodmanService, podman_problem, write_config
    from tests.factories import make_task

    if podman_problem() is not None:
        pytest.skip(f"no container engine: {podman_problem()}")
    services = [
        PodmanService(write_config(tmp_path / f"engine{i}"), name=f"e{i}") for i in range(2)
    ]
    try:
        for s in services:
            s.start()
    except SandboxUnavailable as e:
        for s in services:
            s.stop()
        unmount_under(tmp_path)
        pytest.skip(f"no container engine: {e}")
    monkeypatch.setenv("T1_DOCKER_HOSTS", ",".join(s.docker_host for s in services))
    monkeypatch.setenv("T1_DOCKER_SLOTS", "1")
    try:
        p = configured_pool()
        assert p is not None
        task = make_task("multi-engine")
        with cf.ThreadPoolExecutor(2) as ex:
            first = list(ex.map(lambda _: run_trial(task, "oracle", "docker"), range(2)))
            assert all(r.resolved for r in first), [r.failure_detail for r in first]
            assert [e.placed for e in p.engines] == [1, 1], "one trial on each engine"
            services[1].stop()  # engine 1 goes away mid-batch
            rest = list(ex.map(lambda _: run_trial(task, "oracle", "docker"), range(4)))
        for r in rest:
            assert r.resolved or (r.failure_mode.infrastructure and not r.rewardable), (
                r.failure_mode,
                r.failure_detail,
            )
            assert r.failure_mode != FailureMode.NONE or r.resolved
        assert sum(r.resolved for r in rest) >= 3, [r.failure_detail for r in rest]
        assert p.engines[1].down_until > time.monotonic()  # out of the rotation
    finally:
        for s in services:
            s.stop()
        unmount_under(tmp_path)
