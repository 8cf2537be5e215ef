"""One writer per job on a store (`warehouse.locks`): a second process is refused with the
holder named, a lock left by a killed holder is taken over, the same thread may nest it.

Regression: two `t1 synth` at once on one store both exited 0; `synth_rounds` said 2
candidates a round while `synth_candidates` held 4, and `rst` got two versions."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from warehouse.locks import (
    LockHeldError,
    LockHolder,
    StoreReadOnlyError,
    exclusive,
    lock_path,
    read_holder,
    single_writer,
)

ROOT = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from pathlib import Path
from warehouse.locks import exclusive
with exclusive(Path(sys.argv[1]), sys.argv[2], command="holder --job " + sys.argv[2]):
    print("held", flush=True)
    time.sleep(120)
"""


def holder_of(path: Path) -> LockHolder:
    holder = read_holder(path)
    assert holder is not None, f"{path} names no holder"
    return holder


def hold(root: Path, job: str) -> subprocess.Popen:
    """Another process holding `job`'s lock on `root` (returns once it holds it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), job],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_naming_the_holder(tmp_path):
    proc = hold(tmp_path, "synthesis campaign 'c1'")
    try:
        with pytest.raises(LockHeldError) as caught, exclusive(tmp_path, "synthesis campaign 'c1'"):
            pass
        message = str(caught.value)
        assert f"pid {proc.pid} on {socket.gethostname()}" in message
        assert "holder --job synthesis campaign 'c1'" in message
        assert "synthesis campaign 'c1'" in message and "\n" not in message
        with exclusive(tmp_path, "synthesis campaign 'c2'"):  # another campaign is free
            pass
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_leaves_a_lock_that_is_taken_over(tmp_path):
    proc = hold(tmp_path, "pool build")
    path = lock_path(tmp_path, "pool build")
    assert holder_of(path).pid == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert holder_of(path).is_dead()  # the file still names it ...
    with exclusive(tmp_path, "pool build") as stale:  # ... and it is taken over
        assert stale is not None and stale.pid == proc.pid
        assert holder_of(path).pid == os.getpid()
    assert read_holder(path) is None  # released: nobody to name


def test_the_same_thread_nests_another_thread_is_refused(tmp_path):
    errors: list[Exception] = []

    def other() -> None:
        try:
            with exclusive(tmp_path, "pool build"):
                pass
        except LockHeldError as e:
            errors.append(e)

    with exclusive(tmp_path, "pool build"), exclusive(tmp_path, "pool build"):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert holder_of(lock_path(tmp_path, "pool build")).pid == os.getpid()
    assert len(errors) == 1 and f"pid {os.getpid()}" in str(errors[0])
    with exclusive(tmp_path, "pool build"):  # all released
        pass


def test_single_writer_names_the_job_from_the_arguments(tmp_path):
    seen: list[str] = []

    @single_writer("synthesis campaign {name!r}")
    def campaign(name: str, store: Path) -> None:
        seen.extend(p.name for p in (store / ".locks").iterdir() if read_holder(p))

    campaign("alpha", tmp_path)
    assert seen == ["synthesis-campaign-alpha.lock"]


def test_a_read_only_store_fails_before_any_work(tmp_path):
    store = tmp_path / "file-not-dir"
    store.write_text("")  # a path that cannot hold the lock directory
    with pytest.raises((StoreReadOnlyError, OSError)), exclusive(store, "pool build"):
        pass
