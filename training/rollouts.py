"""Concurrent rollouts: N trials at once over a pool of sandboxes; oversampling; straggler cancel.

A step's trials are jobs on a thread pool of `workers` threads; each job is one blocking
`sandbox.run_trial` (its own sandbox, opened and reclaimed by `run_trial`) driven by its own
`PolicyAgent`, and all of them share one engine, which batches their requests into common
forward passes. The paper's scheduler (section 2): launch ceil((1 + alpha) * B) trials, admit
the first B that finish with a verdict, cancel the rest.

- an infrastructure failure (`TrialResult.rewardable` False: sandbox, environment build,
  verifier never ran) is no evidence about the policy: it is excluded from the batch and
  counted, and does not take one of the B places;
- once B trials are admitted, every other trial's cancel event is set and its in-flight request
  aborted by rid; the agent raises `TrialCancelled` at its next turn boundary, `run_trial`
  stops its sandbox, and the trial is a CANCELLED row. A command already running finishes
  first (at most `command_timeout_s`);
- admitting the first finishers favours short trajectories (measured: the batch is filtered by
  length, docs/ppo.md), so it is one of two admission rules: `first_finished` (the paper's,
  bounded step time) or `launch_order` (the campaign's default): the first B rewardable trials
  by launch slot, decided by slot and never by finishing order, so the admitted batch has the
  launched batch's length distribution; the oversampled tail only stands in for infrastructure
  failures, and the step waits for its slowest admitted trial. `rollout/cancelled` and the
  cancelled rows show how much was cut.

`RolloutBatch.result()` blocks until B are admitted (or every trial is done); the cancelled
trials are collected by `RolloutBatch.cancelled()` once they have wound down.

Where the trials run (`executor`, the campaign's `ExecutorConfig`): `local` (the default) runs
each trial in the pool's own thread, as above. On a Ray cluster each of the pool's threads
submits its trial to the executor as a `RemoteRollout` (trial id `<pool>:<batch>:<slot>`, placed
by the task's environment hash) and waits for it: the threads bound the trials in flight to
`workers`, in launch order; the trial runs on a node with a free sandbox slot, in that node's
sandbox, and talks to the engine over HTTP at its trial's URL (the client's, or without a router
the server `EngineClient.for_trial` picks; every node must reach it). A straggler cancel there
is `Executor.cancel` (KeyboardInterrupt in the worker, `run_trial` reclaims the sandbox; its
request in flight is not aborted by rid and runs out on the engine) and comes back as a
CANCELLED row without the partial trajectory; a trial the machinery lost (`executor.TrialLost`)
is an infrastructure row, never reward.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from executor import Executor, ExecutorConfig, TrialLost, open_executor
from training.engine_protocol import EngineClient
from training.harness import HarnessConfig, PolicyAgent, Rollout, rollout_trial

if TYPE_CHECKING:
    from tasks.model import Task
    from tasks.results import FailureMode


Admission = Literal["launch_order", "first_finished"]


@dataclass(frozen=True)
class RolloutJob:
    """One trial to run: a task, which of its k samples, its launch slot and sampling seed."""

    task: Task
    sample: int
    slot: int
    seed: int | None


def launch_count(batch: int, oversample: float) -> int:
    """Trials launched for a batch of `batch`: ceil((1 + oversample) * batch)."""
    if batch < 1 or oversample < 0:
        raise ValueError(f"need batch >= 1 and oversample >= 0, got {batch}, {oversample}")
    return math.ceil((1.0 + oversample) * batch - 1e-9)


def job_seed(base: int | None, step: int, slot: int) -> int | None:
    """Sampling seed of a trial (turn t adds t): distinct per (base, step, slot)."""
    if base is None:
        return None
    return (base * 1_000_003 + step * 10_007 + slot * 1_009) % (2**31 - 1)


@dataclass
class _Running:
    job: RolloutJob
    agent: PolicyAgent
    future: Future[Rollout]
    trial_id: str = ""
    remote: Executor | None = field(default=None, repr=False)


@dataclass(eq=False)  # hashed by identity: the executor exports one remote function per pool
class RemoteRollout:
    """One rollout trial as it runs on a cluster node: an engine client (HTTP, to the URL the
    trial generates at; one per URL and worker process) and the pool's tokenizer, shipped once
    per worker process."""

    num_layers: int
    top_k: int
    tokenizer: Any
    backend: str

    def __call__(self, job: RolloutJob, harness: HarnessConfig, engine_url: str) -> Rollout:
        client = _node_clients.get(engine_url)
        if client is None:
            client = _node_clients[engine_url] = EngineClient(
                engine_url, num_layers=self.num_layers, top_k=self.top_k
            )
        # A Ray worker runs one task at a time: the tokenizer unpickled here is its own.
        agent = PolicyAgent(client, self.tokenizer, harness)
        rollout = rollout_trial(job.task, agent, backend=self.backend)
        rollout.sample = job.slot
        return rollout


_node_clients: dict[str, EngineClient] = {}  # per worker process, by engine URL


@dataclass
class RolloutBatch:
    """The trials of one step: admitted (training), infrastructure failures, cancelled."""

    step: int
    want: int
    launched: int
    admission: Admission = "first_finished"
    admitted: list[Rollout] = field(default_factory=list)
    infrastructure: list[Rollout] = field(default_factory=list)
    seconds: float = 0.0
    _running: list[_Running] = field(default_factory=list, repr=False)
    _straggling: list[_Running] = field(default_factory=list, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _client: Any = field(default=None, repr=False)
    _error: BaseException | None = field(default=None, repr=False)

    def result(self, timeout: float | None = None) -> RolloutBatch:
        """Block until the batch is decided (B admitted, or every trial finished)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"rollouts of step {self.step} not done after {timeout}s")
        if self._error is not None:
            raise RuntimeError(f"rollouts of step {self.step} failed") from self._error
        return self

    def cancel_all(self) -> None:
        """Cancel every trial of the batch still running (the run is being closed)."""
        for r in self._running:
            if not r.future.done():
                _cancel(self._client, r)

    def cancelled(self) -> list[Rollout]:
        """The cancelled stragglers, as CANCELLED rows (waits for them to wind down)."""
        out = []
        for r in self._straggling:
            rollout = r.future.result()
            if rollout.trial.failure_mode != "cancelled":
                # it finished before the cancel reached it: still not admitted, so cancelled
                from tasks.results import FailureMode

                rollout.trial.failure_mode = FailureMode.CANCELLED
                rollout.trial.failure_detail = "finished after the batch was full"
            out.append(rollout)
        self._straggling = []
        return out


class RolloutPool:
    """A pool of `workers` trial threads sharing one engine client.

    Each trial gets its own `PolicyAgent` (own cancel event, own tokenizer copy: the fast
    tokenizer is not shared across threads). With a cluster `executor` the threads hand their
    trials to it (module docstring); `name` makes the pool's trial ids unique (the run id)."""

    def __init__(
        self,
        client: EngineClient,
        tokenizer: Any,
        *,
        workers: int,
        backend: str = "local",
        executor: ExecutorConfig | None = None,
        name: str = "rollouts",
    ):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.client = client
        self.backend = backend
        self.workers = workers
        self.name = name
        self._tokenizer = tokenizer
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout")
        self._batches = 0
        self.remote: Executor | None = None
        self._remote_fn: RemoteRollout | None = None
        if executor is not None and not executor.local:
            self.remote = open_executor(executor)
            self._remote_fn = RemoteRollout(client.num_layers, client.top_k, tokenizer, backend)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.remote is not None:
            self.remote.shutdown(wait=False, cancel_futures=True)

    def _thread_tokenizer(self) -> Any:
        tok = getattr(self._local, "tokenizer", None)
        if tok is None:
            tok = self._local.tokenizer = copy.deepcopy(self._tokenizer)
        return tok

    def _run(self, job: RolloutJob, agent: PolicyAgent, trial_id: str) -> Rollout:
        if agent.cancel.is_set():  # cancelled before it started: nothing to reclaim
            return _cancelled_before_start(job, agent, self.backend)
        if self.remote is not None and self._remote_fn is not None:
            return _run_remote(self.remote, self._remote_fn, job, agent, trial_id, self.backend)
        agent.tokenizer = self._thread_tokenizer()
        rollout = rollout_trial(job.task, agent, backend=self.backend)
        rollout.sample = job.slot
        return rollout

    def submit(self, job: RolloutJob, harness: HarnessConfig, batch: str = "") -> _Running:
        trial_id = f"{self.name}:{batch}:{job.slot}"
        agent = PolicyAgent(
            self.client.for_trial(trial_id),  # every turn on one server's prefix cache
            self._tokenizer,
            harness.model_copy(update={"seed": job.seed}),
        )
        future = self._pool.submit(self._run, job, agent, trial_id)
        return _Running(job, agent, future, trial_id, self.remote)

    def _batch_name(self, label: str) -> str:
        self._batches += 1
        return f"{label}{self._batches}"

    def start(
        self,
        step: int,
        jobs: Sequence[RolloutJob],
        harness: HarnessConfig,
        *,
        want: int,
        admission: Admission = "first_finished",
    ) -> RolloutBatch:
        """Launch `jobs` now; the returned batch is decided in the background (`result()`):
        the first `want` rewardable trials to finish, or by launch slot (`admission`)."""
        if want < 1:
            raise ValueError(f"want must be >= 1, got {want}")
        if admission not in ("launch_order", "first_finished"):
            raise ValueError(f"admission must be launch_order or first_finished: {admission!r}")
        batch = RolloutBatch(
            step=step, want=want, launched=len(jobs), admission=admission, _client=self.client
        )
        name = self._batch_name(f"step{step}-")
        running = [self.submit(j, harness, name) for j in jobs]
        batch._running = running
        threading.Thread(
            target=self._decide, args=(batch, running), daemon=True, name=f"batch-{step}"
        ).start()
        return batch

    def run_all(self, jobs: Sequence[RolloutJob], harness: HarnessConfig) -> list[Rollout]:
        """Every job to completion (evaluation: no oversampling, nothing cancelled), in order."""
        name = self._batch_name("all")
        running = [self.submit(j, harness, name) for j in jobs]
        return [r.future.result() for r in running]

    def _decide(self, batch: RolloutBatch, running: list[_Running]) -> None:
        t0 = time.monotonic()
        try:
            if batch.admission == "launch_order":
                _decide_by_slot(self.client, batch, running)
                return
            pending = {r.future: r for r in running}
            while pending and len(batch.admitted) < batch.want:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                # admit in slot order among those that finished together (deterministic)
                for fut in sorted(done, key=lambda f: pending[f].job.slot):
                    r = pending.pop(fut)
                    rollout = fut.result()
                    if not rollout.trial.rewardable:
                        batch.infrastructure.append(rollout)
                    elif len(batch.admitted) < batch.want:
                        batch.admitted.append(rollout)
                    else:
                        batch._straggling.append(r)
            for r in pending.values():
                _cancel(self.client, r)
                batch._straggling.append(r)
        except BaseException as e:  # noqa: BLE001 - handed to the waiter, who re-raises
            batch._error = e
        finally:
            batch.seconds = time.monotonic() - t0
            batch._done.set()


def _decide_by_slot(client: EngineClient, batch: RolloutBatch, running: list[_Running]) -> None:
    """Admit the first `want` rewardable trials in launch-slot order: wait until every slot up
    to the want-th rewardable one has finished, then cancel the slots after it. Which trials
    are admitted never depends on which finished first, only on their slots (and on
    infrastructure failures, which are skipped and counted)."""
    by_slot = sorted(running, key=lambda r: r.job.slot)
    pending = {r.future: r for r in running}
    done: dict[int, Rollout] = {}
    while True:
        admitted: list[Rollout] = []
        cut: int | None = None  # index in by_slot of the want-th rewardable trial
        for i, r in enumerate(by_slot):
            rollout = done.get(r.job.slot)
            if rollout is None:
                break
            if rollout.trial.rewardable:
                admitted.append(rollout)
                if len(admitted) == batch.want:
                    cut = i
                    break
        if cut is not None or not pending:
            break
        finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in finished:
            r = pending.pop(fut)
            done[r.job.slot] = fut.result()
    batch.admitted = admitted
    last = cut if cut is not None else len(by_slot) - 1
    for i, r in enumerate(by_slot):
        rollout = done.get(r.job.slot)
        if rollout is not None and not rollout.trial.rewardable:
            batch.infrastructure.append(rollout)
        elif i > last:
            if rollout is None:
                _cancel(client, r)
            batch._straggling.append(r)


def _run_remote(
    remote: Executor,
    fn: RemoteRollout,
    job: RolloutJob,
    agent: PolicyAgent,
    trial_id: str,
    backend: str,
) -> Rollout:
    """Submit one trial to the cluster and wait for it (the calling pool thread holds its
    place); what the machinery did to it comes back as a row."""
    url = agent.engine.base_url
    if url is None:  # for_trial always names a server or the router
        raise ValueError(f"trial {trial_id} has no engine URL")
    fut = remote.submit(trial_id, fn, job, agent.config, url, affinity=job.task.environment_hash)
    if agent.cancel.is_set():  # cancelled while it was being submitted
        remote.cancel(trial_id)
    try:
        return fut.result()
    except CancelledError:
        return _cancelled_before_start(job, agent, backend, "cancelled on its node")
    except TrialLost as e:
        return _lost(job, agent, backend, e)
    finally:
        remote.forget(trial_id)


def _cancel(client: EngineClient, r: _Running) -> None:
    """Cancel one trial: its agent stops at the next turn boundary, its request now (on a
    cluster: the executor interrupts it on its node)."""
    r.agent.cancel.set()
    if r.remote is not None:
        r.remote.cancel(r.trial_id)
        return
    rid = r.agent.current_rid
    if rid is not None:
        try:
            client.abort_request(rid)
        except Exception:  # noqa: BLE001 - the cancel event alone still stops it
            pass


def _cancelled_before_start(
    job: RolloutJob, agent: PolicyAgent, backend: str, detail: str = "cancelled before it started"
) -> Rollout:
    from tasks.results import FailureMode

    return _row(job, agent, backend, FailureMode.CANCELLED, detail)


def _lost(job: RolloutJob, agent: PolicyAgent, backend: str, e: TrialLost) -> Rollout:
    """A trial the cluster lost (its node died on every attempt): infrastructure, no reward."""
    from tasks.results import FailureMode

    return _row(job, agent, backend, FailureMode.SANDBOX_ERROR, f"lost: {e}"[:1000])


def _row(
    job: RolloutJob, agent: PolicyAgent, backend: str, mode: FailureMode, detail: str
) -> Rollout:
    import uuid

    from tasks.results import TrialResult
    from training.harness import AgentTrajectory

    trial = TrialResult(
        trial_id=uuid.uuid4().hex,
        task_id=job.task.id,
        task_hash=job.task.content_hash,
        agent=agent.name,
        backend=backend,
        failure_mode=mode,
        failure_detail=detail,
    )
    return Rollout(trial, AgentTrajectory(task_id=job.task.id, stop="aborted"), sample=job.slot)


def plan_jobs(
    tasks: Sequence[Task],
    picks: Sequence[int],
    *,
    samples_per_task: int,
    launch: int,
    step: int,
    seed: int | None,
) -> list[RolloutJob]:
    """`launch` jobs: each picked task `samples_per_task` times, in pick order, truncated."""
    jobs: list[RolloutJob] = []
    for idx in picks:
        for k in range(samples_per_task):
            if len(jobs) == launch:
                return jobs
            slot = len(jobs)
            jobs.append(RolloutJob(tasks[idx], k, slot, job_seed(seed, step, slot)))
    return jobs
