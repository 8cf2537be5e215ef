"""`RayExecutor`: trials as Ray tasks on a cluster whose nodes offer sandbox slots.

Each trial is one Ray task holding `slots_per_trial` of the node's `t1_sandbox_slot` custom
resource (and no CPU reservation: the slots are the node's sandbox capacity), running the
callable on the node where it lands; a sandbox trial there uses that node's local sandbox
backend and its image cache. Cache affinity: the driver remembers, per `affinity` key (an
environment hash), the node that last finished work with that key, and places the next such
trial there with a *soft* node affinity (elsewhere when that node is full or gone).

Faults: one retry layer, the driver's. Ray's own task retries are off (`max_retries=0`):
when a trial's worker or node dies, or its result object is lost with its node, the driver
submits it again, up to `retries` times, so a trial runs at most `retries + 1` times in all
(Ray's `max_retries` inside the driver's re-launches used to give (retries + 1)^2: 16 runs of
a poison trial at the default 3). Then its future fails with `TrialLost`. The driver's future
of a trial id is settled once; a late or repeated completion is dropped, so a re-run trial is
recorded once.

No slot left: a watchdog thread checks, while trials are waiting, that some live node still
offers `t1_sandbox_slot`; when none has for `no_slot_timeout_s` (every slot node died), it
logs why and fails each waiting trial with `TrialLost` instead of letting it wait for ever.

A worker that died leaves its sandboxes' lease files and cgroups on its node (their holders
kill the sandboxes' processes, nothing removes the rest); given a `reclaim` callable
(`sandbox.gc.collect_garbage`), the executor runs it on every live slot node after a worker
crash, so they are reclaimed without anyone running `t1 sandbox gc`.

Ray is imported here only, and only when a program's executor address is not `local`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import wait as wait_all
from typing import Any, TypeVar

import ray
from ray import exceptions as rex
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from executor.base import SLOT_RESOURCE, ExecutorConfig, TrialLost

T = TypeVar("T")
log = logging.getLogger(__name__)

# Worker deaths on a node that lives on: what they left is reclaimed there.
WORKER_DEATHS: tuple[type[BaseException], ...] = (rex.WorkerCrashedError, rex.OutOfMemoryError)

# The machinery's failures (never the callable's own): the trial is run again elsewhere.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    rex.WorkerCrashedError,
    rex.NodeDiedError,
    rex.LocalRayletDiedError,
    rex.ObjectLostError,  # includes OwnerDiedError, ObjectReconstructionFailedError
    rex.ObjectFetchTimedOutError,
    rex.ObjectStoreFullError,
    rex.OutOfMemoryError,  # Ray's memory monitor killed the worker (node pressure)
    rex.OutOfDiskError,
    rex.RaySystemError,
    rex.RuntimeEnvSetupError,
)


def on_node(fn: Callable[..., Any]) -> Callable[..., tuple[str, Any]]:
    """What a Ray worker runs for one trial of `fn`: (the node's id, `fn(*args)`)."""

    def run(*args: Any) -> tuple[str, Any]:
        return ray.get_runtime_context().get_node_id(), fn(*args)

    run.__name__ = run.__qualname__ = getattr(fn, "__name__", "trial")
    return run


class RayExecutor:
    """The executor interface over a Ray cluster (see the module docstring).

    Connects to `cfg.address` unless Ray is already initialised in this process (then that
    connection is used and left open on shutdown). `placements` (trial id -> node id),
    `affinity` (key -> node id) and `ran_on` (node id -> trials) are the driver's record,
    readable by tests and benchmarks.
    """

    def __init__(self, cfg: ExecutorConfig, *, reclaim: Callable[[], Any] | None = None) -> None:
        if cfg.local:
            raise ValueError("RayExecutor needs a Ray address, got 'local' (use LocalExecutor)")
        self.cfg = cfg
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            try:
                ray.init(address=cfg.address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ValueError(
                    f"executor.address {cfg.address!r}: no Ray cluster there ({first})"
                ) from e
        offered = ray.cluster_resources().get(SLOT_RESOURCE, 0.0)
        if offered < cfg.slots_per_trial:
            if self._owns_connection:
                ray.shutdown()
            raise ValueError(
                f"the Ray cluster at {cfg.address!r} offers {offered:g} {SLOT_RESOURCE} "
                f"(a trial needs {cfg.slots_per_trial:g}): start each node with "
                f"ray start --resources='{{\"{SLOT_RESOURCE}\": N}}'"
            )
        # Reentrant: a Ray future already done runs its callback (`_settle`) at once, in the
        # thread that is launching the attempt with the lock held.
        self._lock = threading.RLock()
        self._futures: dict[str, Future[Any]] = {}
        self._refs: dict[str, ray.ObjectRef] = {}
        self.attempts: dict[str, int] = {}
        self.placements: dict[str, str] = {}
        self.affinity: dict[str, str] = {}
        # Trials settled with a result per node id (kept when `forget` drops `placements`).
        self.ran_on: Counter[str] = Counter()
        # One Ray remote function per callable, exported once: shipping the callable with
        # every trial cost ~25% of a trivial sandbox trial's time (benchmarks/scale.py).
        self._remote_fns: dict[Callable[..., Any], Any] = {}
        # Reclaiming what dead workers left (see the module docstring).
        self._reclaim = ray.remote(reclaim) if reclaim is not None else None
        self._reclaim_running = self._reclaim_again = False
        self.reclaimed: list[tuple[str, Any]] = []  # (node id, what `reclaim` returned)
        # The no-slot watchdog.
        self.no_slot_since: float | None = None
        self._closed = threading.Event()
        self._watchdog = threading.Thread(target=self._watch_slots, name="slots", daemon=True)
        self._watchdog.start()

    def share(self, value: T) -> T:
        """`value` put in the object store once; a trial given the reference gets the value
        (Ray resolves references passed as arguments)."""
        return ray.put(value)  # type: ignore[return-value]

    def submit(
        self, trial_id: str, fn: Callable[..., T], /, *args: Any, affinity: str | None = None
    ) -> Future[T]:
        with self._lock:
            known = self._futures.get(trial_id)
            if known is not None:
                return known
            fut: Future[T] = Future()
            self._futures[trial_id] = fut
            self.attempts[trial_id] = 0
            self._launch(trial_id, fn, args, affinity)
        return fut

    def _launch(
        self, trial_id: str, fn: Callable[..., Any], args: tuple[Any, ...], affinity: str | None
    ) -> None:
        """Start one attempt (called with the lock held)."""
        options: dict[str, Any] = {
            "num_cpus": 0,
            "resources": {SLOT_RESOURCE: self.cfg.slots_per_trial},
            "max_retries": 0,  # the driver is the one retry layer (`_settle`)
            "retry_exceptions": False,  # the callable's own exceptions are its result
            "name": f"trial:{trial_id}"[:200],
        }
        node = self.affinity.get(affinity) if affinity is not None else None
        if node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        remote = self._remote_fns.get(fn)
        if remote is None:
            remote = self._remote_fns[fn] = ray.remote(on_node(fn))
        ref = remote.options(**options).remote(*args)
        self.attempts[trial_id] += 1
        self._refs[trial_id] = ref
        ref.future().add_done_callback(
            lambda done: self._settle(trial_id, fn, args, affinity, ref, done)
        )

    def _settle(
        self,
        trial_id: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        affinity: str | None,
        ref: ray.ObjectRef,
        done: Future[Any],
    ) -> None:
        with self._lock:
            fut = self._futures.get(trial_id)
            if fut is None or fut.done() or self._refs.get(trial_id) is not ref:
                return  # forgotten, cancelled, or a stale attempt: the trial is recorded once
            try:
                node, value = done.result()
            except rex.TaskCancelledError:
                _cancel_future(fut)
                return
            except INFRASTRUCTURE_ERRORS as e:
                if isinstance(e, WORKER_DEATHS):
                    self._reclaim_nodes()
                if self.attempts[trial_id] <= self.cfg.retries:
                    self._launch(trial_id, fn, args, affinity)
                    return
                lost = TrialLost(trial_id, self.attempts[trial_id], f"{type(e).__name__}: {e}")
                lost.__cause__ = e
                _settle_once(fut, exception=lost)
                return
            except BaseException as e:  # noqa: BLE001 - the callable's own, as on a thread
                _settle_once(fut, exception=e)
                return
            self.placements[trial_id] = node
            self.ran_on[node] += 1
            if affinity is not None:
                self.affinity[affinity] = node
            _settle_once(fut, value=value)

    def _reclaim_nodes(self) -> None:
        """Run `reclaim` once on every live slot node (called with the lock held); a crash
        while a round is running asks for one more round after it."""
        if self._reclaim is None:
            return
        if self._reclaim_running:
            self._reclaim_again = True
            return
        nodes = [
            n["NodeID"]
            for n in ray.nodes()
            if n.get("Alive") and n.get("Resources", {}).get(SLOT_RESOURCE, 0) > 0
        ]
        if not nodes:
            return
        self._reclaim_running, self._reclaim_again = True, False
        left = [len(nodes)]

        def done(node: str, fut: Future[Any]) -> None:
            with self._lock:
                try:
                    self.reclaimed.append((node, fut.result()))
                except Exception as e:  # noqa: BLE001 - best effort; the node may be gone
                    log.warning("reclaiming dead workers' sandboxes on node %s failed: %s", node, e)
                left[0] -= 1
                if left[0] == 0:
                    self._reclaim_running = False
                    if self._reclaim_again and not self._closed.is_set():
                        self._reclaim_nodes()

        for node in nodes:
            ref = self._reclaim.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote()
            ref.future().add_done_callback(functools.partial(done, node))

    def _watch_slots(self) -> None:
        """While trials wait, fail them as `TrialLost` once no live node has offered a slot
        for `no_slot_timeout_s` (see the module docstring)."""
        timeout = self.cfg.no_slot_timeout_s
        while not self._closed.wait(min(1.0, timeout / 4)):
            with self._lock:
                waiting = [t for t, f in self._futures.items() if not f.done()]
            if not waiting:
                self.no_slot_since = None
                continue
            try:
                offered = ray.cluster_resources().get(SLOT_RESOURCE, 0.0)
            except Exception:  # noqa: BLE001 - the GCS did not answer: look again later
                continue
            if offered >= self.cfg.slots_per_trial:
                if self.no_slot_since is not None:
                    log.warning("%s offered again: %d trials wait for a slot", SLOT_RESOURCE,
                                len(waiting))  # fmt: skip
                self.no_slot_since = None
                continue
            now = time.monotonic()
            if self.no_slot_since is None:
                self.no_slot_since = now
                log.warning(
                    "no live node offers %s (a trial needs %g): %d trials wait; they are lost "
                    "in %g s unless a slot node joins",
                    SLOT_RESOURCE, self.cfg.slots_per_trial, len(waiting), timeout,
                )  # fmt: skip
                continue
            if now - self.no_slot_since < timeout:
                continue
            cause = (
                f"no live node of the cluster offered {SLOT_RESOURCE} for {timeout:g} s "
                f"(every slot node gone; the cluster offers {offered:g})"
            )
            log.error("%s: failing %d waiting trials", cause, len(waiting))
            for trial_id in waiting:
                with self._lock:
                    fut, ref = self._futures.get(trial_id), self._refs.get(trial_id)
                    if fut is None or fut.done():
                        continue
                    _settle_once(
                        fut, exception=TrialLost(trial_id, self.attempts.get(trial_id, 0), cause)
                    )
                if ref is not None:
                    try:
                        ray.cancel(ref, force=False)
                    except Exception:  # noqa: BLE001 - settled meanwhile: nothing to stop
                        pass

    def cancel(self, trial_id: str) -> bool:
        with self._lock:
            fut = self._futures.get(trial_id)
            ref = self._refs.get(trial_id)
            if fut is None or fut.done():
                return False
            _cancel_future(fut)
        if ref is not None:
            try:
                ray.cancel(ref, force=False)  # KeyboardInterrupt in the worker
            except Exception:  # noqa: BLE001 - it finished meanwhile; the future is cancelled
                pass
        return True

    def result_of(self, trial_id: str) -> Future[Any] | None:
        with self._lock:
            return self._futures.get(trial_id)

    def forget(self, trial_id: str) -> None:
        with self._lock:
            fut = self._futures.get(trial_id)
            if fut is None or not fut.done():
                return
            del self._futures[trial_id]
            self._refs.pop(trial_id, None)
            self.attempts.pop(trial_id, None)
            self.placements.pop(trial_id, None)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            for trial_id in list(self._futures):
                self.cancel(trial_id)
        if wait:
            wait_all(list(self._futures.values()))
        self._closed.set()
        self._watchdog.join(timeout=5)
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)


def _cancel_future(fut: Future[Any]) -> None:
    """Cancel a driver-side future so that `wait` and `as_completed` see it done (a bare
    `cancel()` leaves it CANCELLED but not notified, and `wait` blocks on it for ever)."""
    if fut.cancel():
        fut.set_running_or_notify_cancel()


def _settle_once(
    fut: Future[Any], *, value: Any = None, exception: BaseException | None = None
) -> None:
    try:
        if exception is not None:
            fut.set_exception(exception)
        else:
            fut.set_result(value)
    except InvalidStateError:  # cancelled meanwhile
        pass


# How long an idle worker stays up: a day, in practice a job's pauses between batches (a
# worker idle longer is started again when a trial needs it).
IDLE_WORKER_KEEP_MS = 24 * 3600 * 1000


def worker_pool_config() -> dict[str, int]:
    """Ray system config for a sandbox node's worker pool: a worker per slot once started,
    kept between batches, and no worker started that no trial asked for.

    Ray's `num_workers_soft_limit` (default: the node's CPUs) is two things at once: how
    many idle workers survive `idle_worker_killing_time_threshold_ms` (1 s), and how many
    idle workers the raylet *prestarts* whenever a lease request arrives with a backlog,
    counting neither the busy workers nor the free slots (Ray 2.60 logs it as "available
    CPUs" whatever the node's CPUs). With every slot busy and trials queued, Ray started up
    to that many more workers, none of which could get a trial (the slots were taken), and
    killed them 1 s after the batch: a Python process importing Ray (~0.6 CPU s here) per
    slot at every batch after a pause, as much CPU as the 50-ms trials of
    benchmarks/scale.py themselves (docs/scale.md "Measured"). At 0 the raylet prestarts
    nothing (a worker starts when a granted lease finds none idle: at most one per slot), and
    the idle threshold of a day keeps those workers between batches. On real nodes:
    `RAY_num_workers_soft_limit=0 RAY_idle_worker_killing_time_threshold_ms=86400000` in the
    environment of `ray start`."""
    return {
        "num_workers_soft_limit": 0,
        "idle_worker_killing_time_threshold_ms": IDLE_WORKER_KEEP_MS,
    }


# A simulated cluster on this machine (ray.cluster_utils): the tests' and the benchmark's.
SIM_STORE_BYTES = 80 * 2**20  # object store per simulated node
SIM_FAST_DEATH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


def simulated_cluster(
    head_slots: float, worker_slots: list[float], *, system_config: dict[str, Any] | None = None
) -> tuple[Any, list[Any]]:
    """A head and worker nodes on this machine, one CPU each, offering `SLOT_RESOURCE` as
    given, with node death noticed within ~1.5 s; this process is connected to it. The caller
    calls `ray.shutdown()` and the cluster's `shutdown()`.

    Each node starts a worker per slot on demand and keeps it between batches, starting none
    beyond (`worker_pool_config`)."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {SLOT_RESOURCE: head_slots},
            "object_store_memory": SIM_STORE_BYTES,
            "include_dashboard": False,
            "_system_config": {
                **SIM_FAST_DEATH,
                **worker_pool_config(),
                **(system_config or {}),
            },
        },
    )
    nodes = [
        cluster.add_node(
            num_cpus=1, resources={SLOT_RESOURCE: s}, object_store_memory=SIM_STORE_BYTES
        )
        for s in worker_slots
    ]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster, nodes
