"""The executor interface on local threads (the default): no Ray needed."""

from __future__ import annotations

import threading
import time
from concurrent.futures import as_completed

import pytest

from executor import (
    ADDRESS_ENV,
    ExecutorConfig,
    LocalExecutor,
    default_address,
    open_executor,
)


def _square(x: int) -> int:
    return x * x


def test_results_come_back_as_they_complete_keyed_by_trial_id():
    with LocalExecutor(workers=3) as ex:
        futures = {ex.submit(f"t{i}", _square, i): i for i in range(7)}
        got = {futures[f]: f.result() for f in as_completed(futures)}
    assert got == {i: i * i for i in range(7)}


def test_a_known_trial_id_is_run_once():
    calls: list[int] = []
    lock = threading.Lock()

    def count(x: int) -> int:
        with lock:
            calls.append(x)
        return x

    with LocalExecutor(workers=2) as ex:
        first = ex.submit("same", count, 1)
        again = ex.submit("same", count, 2)  # a retry of the same trial: not run again
        other = ex.submit("other", count, 3)
        assert again is first and ex.result_of("same") is first
        assert (first.result(), other.result()) == (1, 3)
    assert sorted(calls) == [1, 3]


def test_the_callables_own_exception_comes_from_its_future():
    def boom() -> None:
        raise KeyError("missing")

    with LocalExecutor(workers=1) as ex:
        with pytest.raises(KeyError, match="missing"):
            ex.submit("x", boom).result()


def test_cancel_drops_a_trial_that_has_not_started():
    gate = threading.Event()
    with LocalExecutor(workers=1) as ex:
        busy = ex.submit("busy", gate.wait, 10)
        queued = ex.submit("queued", _square, 3)
        assert ex.cancel("queued") and queued.cancelled()
        assert not ex.cancel("busy")  # running on a thread: not interruptible here
        assert not ex.cancel("never-submitted")
        gate.set()
        assert busy.result() is True


def test_forget_drops_a_settled_id_and_keeps_a_running_one():
    """A long-lived executor (the campaign's) forgets what its caller recorded: the id is then
    unknown and would run again; a trial still running is not forgotten."""
    release = threading.Event()
    with LocalExecutor(workers=2) as ex:
        done = ex.submit("done", _square, 3)
        assert done.result() == 9
        running = ex.submit("running", release.wait, 30)
        ex.forget("done")
        ex.forget("running")
        assert ex.result_of("done") is None and ex.result_of("running") is running
        again = ex.submit("done", _square, 4)
        assert again is not done and again.result() == 16
        release.set()


def test_workers_bound_concurrency():
    live, peak = [0], [0]
    lock = threading.Lock()

    def work() -> None:
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.05)
        with lock:
            live[0] -= 1

    with LocalExecutor(workers=2) as ex:
        for f in [ex.submit(f"w{i}", work) for i in range(8)]:
            f.result()
    assert peak[0] == 2


def test_the_address_defaults_to_local_and_follows_the_environment(monkeypatch):
    monkeypatch.delenv(ADDRESS_ENV, raising=False)
    assert default_address() == "local" and ExecutorConfig().local
    assert isinstance(open_executor(workers=1), LocalExecutor)
    monkeypatch.setenv(ADDRESS_ENV, "ray://head:10001")
    cfg = ExecutorConfig()
    assert cfg.address == "ray://head:10001" and not cfg.local
    monkeypatch.setenv(ADDRESS_ENV, "  ")
    assert ExecutorConfig().local


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"address": " "}, "address"), ({"slots_per_trial": 0}, "slots_per_trial"),
     ({"retries": -1}, "retries")],
)  # fmt: skip
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ExecutorConfig(**kwargs)


def test_bad_worker_count_is_refused():
    with pytest.raises(ValueError, match="workers"):
        LocalExecutor(workers=0)


def test_no_module_outside_the_executor_imports_ray():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    wrong = []
    for pkg in ("tasks", "sandbox", "synthesis", "audit", "warehouse", "training", "pipelines"):
        for f in (root / pkg).rglob("*.py"):
            if "seeds" in f.parts:
                continue
            for node in ast.walk(ast.parse(f.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                if any(n == "ray" or n.startswith("ray.") for n in names):
                    wrong.append(str(f.relative_to(root)))
    assert not wrong, f"import Ray only through executor/: {sorted(set(wrong))}"
