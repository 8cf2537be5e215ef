"""Job locks on a store on S3 are leases in the store itself (`warehouse.locks.Lease`), so a
second driver on another machine is refused as one on the same machine is.

Regression: the lock was an flock file in each machine's local cache, so two `t1 synth` of
one campaign with separate caches (two machines) both acquired "synthesis campaign
'default'", both exited 0 and left 84 `trials` rows for 42 trials. Another machine is
simulated here by another process with its own cache directory (and, for expiry, another
machine id) against one moto S3 server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from warehouse import Store, record_tasks
from warehouse.locks import (
    Lease,
    LeaseLostError,
    LockHeldError,
    LockHolder,
    exclusive,
    lease_name,
    single_writer,
)

ROOT = Path(__file__).resolve().parents[2]
# The held lease's ttl. The store's clock (S3 `LastModified` and `Date`) counts whole seconds,
# so a lease's measured age is within 1 s of its true age: with 4 s a check 2 s after the
# holder's last heartbeat (every ttl / 4) still sees it held, and one 5.5 s after sees it expired.
HOLD_TTL_S = 4.0
HOLD = textwrap.dedent(
    """
    import os, sys, time
    import warehouse
    from warehouse import Store
    from warehouse.locks import exclusive
    if len(sys.argv) > 3:  # pretend to be another machine: no dead-pid shortcut for us
        import warehouse.locks as locks
        locks.machine_id = lambda: "another-machine"
    store, ttl_s = Store.at(sys.argv[1]), float(os.environ["HOLD_TTL_S"])
    with exclusive(store, sys.argv[2], command="t1 synth --campaign c1", ttl_s=ttl_s):
        print("held", flush=True)
        time.sleep(120)
    """
)


def hold(url: str, job: str, cache: Path, *extra: str) -> subprocess.Popen:
    """A driver on 'another machine' (its own cache) holding `job` on `url`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, url, job, *extra],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "T1_WAREHOUSE_CACHE": str(cache),
            "HOLD_TTL_S": str(HOLD_TTL_S),
        },
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@single_writer("synthesis campaign {campaign!r}")
def synth(campaign: str, store: str) -> str:
    return "ran"


def test_a_driver_on_another_machine_is_refused_naming_the_holder(s3_store_url, tmp_path):
    Store.open(s3_store_url, create=True)
    proc = hold(s3_store_url, "synthesis campaign 'c1'", tmp_path / "other-cache")
    try:
        with pytest.raises(LockHeldError) as info:
            synth("c1", s3_store_url)  # this process: a different cache, the same bucket
        msg = str(info.value)
        assert f"pid {proc.pid} on " in msg and "(t1 synth --campaign c1)" in msg
        assert "lease s3://" in msg and "_locks/synthesis-campaign-c1.json" in msg
        assert info.value.holder is not None and info.value.holder.pid == proc.pid
        assert synth("c2", s3_store_url) == "ran"  # another campaign is another job
    finally:
        proc.kill()
        proc.wait()
    # Its holder died on this machine: taken over at once, no need to wait for expiry.
    with exclusive(Store.at(s3_store_url), "synthesis campaign 'c1'", ttl_s=2.0) as stale:
        assert stale is not None and stale.pid == proc.pid


def test_heartbeats_keep_a_lease_and_an_unrenewed_one_expires(s3_store_url, tmp_path):
    """A holder on another machine keeps its 4-s lease for 6 s by renewing it; once it is
    SIGKILLed (no release, no pid this machine can check) the lease expires after its ttl.

    Regression (CI, under load): with a 2-s ttl and a 2.5-s wait after the kill, the store's
    whole-second clock measured the age as 2 s and the lease was still held."""
    Store.open(s3_store_url, create=True)
    store = Store.at(s3_store_url)
    proc = hold(s3_store_url, "pool build", tmp_path / "other-cache", "another")
    try:
        time.sleep(1.5 * HOLD_TTL_S)
        with pytest.raises(LockHeldError, match=f"pid {proc.pid} on "):
            with exclusive(store, "pool build"):
                pass
        current = store.lease_get(lease_name("pool build"))
        assert current is not None
        assert LockHolder.model_validate_json(current.data).renewals >= 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with pytest.raises(LockHeldError):  # not expired yet (renewed within the last ttl / 4)
        with exclusive(store, "pool build"):
            pass
    time.sleep(HOLD_TTL_S + 1.5)  # the ttl, the clock's whole second and a margin
    with exclusive(store, "pool build") as stale:
        assert stale is not None and stale.pid == proc.pid and stale.machine == "another-machine"
    with exclusive(store, "pool build") as stale:  # released normally: nothing stale
        assert stale is None


def test_a_holder_whose_lease_was_taken_over_commits_nothing(s3_store_url, task_factory):
    store = Store.open(s3_store_url, create=True)
    lease, _ = Lease.acquire(store, "synthesis campaign 'x'", ttl_s=1.0)
    lease._stop.set()  # a driver stalled past its ttl (no heartbeat)
    time.sleep(2.5)  # the store's clock counts whole seconds
    other, stale = Lease.acquire(Store.at(s3_store_url), "synthesis campaign 'x'", ttl_s=30)
    assert stale is not None and stale.pid == os.getpid()
    lease._stop.clear()
    lease.renew()  # the stalled holder wakes up: its conditional rewrite fails
    assert lease.lost is not None
    with pytest.raises(LeaseLostError, match="lease was lost"):
        record_tasks(store, [task_factory("late")])
    lease.release()  # leaves the new holder's lease alone
    current = store.lease_get(lease_name("synthesis campaign 'x'"))
    assert current is not None and current.etag == other.etag
    other.release()
    record_tasks(store, [task_factory("after")])  # no lease held any more: commits again
