"""The executor interface: where trial work runs (this machine's threads, or a Ray cluster).

A trial is a picklable callable plus its arguments, named by an idempotent trial id: the
executor runs each id at most once to a recorded result (submitting a known id returns the
same future), so work that is retried after a fault, by the executor or by a resumed driver,
is recorded once. `submit` returns a `concurrent.futures.Future` on every backend, so callers
wait with the standard `as_completed` / `wait` whichever backend runs the work.

Faults of the machinery (a node or worker that died, an object that was lost) are never the
trial's result: the work is re-run elsewhere up to `ExecutorConfig.retries` times (so it
runs at most `retries + 1` times in all: the executor is the one retry layer), and when that
is exhausted the future raises `TrialLost`, which callers record as an infrastructure
failure, never as reward. A trial that no node can run (no node offers a sandbox slot any
more) is also `TrialLost`, after `no_slot_timeout_s`, never a silent wait. An exception
raised by the callable itself is its own and is re-raised from the future as on a thread
pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

LOCAL = "local"
ADDRESS_ENV = "T1_RAY_ADDRESS"
# The Ray custom resource a node offers once per sandbox it can run at a time.
SLOT_RESOURCE = "t1_sandbox_slot"


def default_address() -> str:
    """`T1_RAY_ADDRESS` when set (e.g. `auto`, `ray://head:10001`), else `local`."""
    return os.environ.get(ADDRESS_ENV, "").strip() or LOCAL


@dataclass(frozen=True)
class ExecutorConfig:
    """Where a program's trial work runs. Part of each program's one config."""

    # `local`: a thread pool in this process (no Ray). Anything else is a Ray address
    # (`auto`, `host:6379`, `ray://host:10001`) of a cluster whose nodes offer SLOT_RESOURCE.
    address: str = field(default_factory=default_address)
    # Sandbox slots one trial holds on its node (a node started with N slots runs N at once).
    slots_per_trial: float = 1.0
    # Re-runs of a trial whose node or worker died before its result reached the driver:
    # a trial runs at most retries + 1 times in all.
    retries: int = 3
    # How long trials may wait while no node of the cluster offers a sandbox slot (all slot
    # nodes gone) before each is failed as `TrialLost`.
    no_slot_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.address.strip():
            raise ValueError("executor address must be 'local' or a Ray address, got ''")
        if self.slots_per_trial <= 0:
            raise ValueError(f"slots_per_trial must be > 0, got {self.slots_per_trial!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries!r}")
        if self.no_slot_timeout_s <= 0:
            raise ValueError(f"no_slot_timeout_s must be > 0, got {self.no_slot_timeout_s!r}")

    @property
    def local(self) -> bool:
        return self.address == LOCAL


class TrialLost(RuntimeError):
    """The machinery lost a trial (its node died, every retry too): an infrastructure
    failure, to be recorded as such, never as the trial's reward."""

    def __init__(self, trial_id: str, attempts: int, cause: str) -> None:
        super().__init__(f"trial {trial_id!r} lost after {attempts} attempt(s): {cause}")
        self.trial_id, self.attempts, self.cause = trial_id, attempts, cause


class Executor(Protocol):
    """Runs trials somewhere; seven members, everything else is a free function over them."""

    def share(self, value: T) -> T:
        """`value` as an argument many trials receive: on Ray it is put in the object store
        once (each trial then gets it without its own copy being shipped); locally, itself."""
        ...

    def submit(
        self, trial_id: str, fn: Callable[..., T], /, *args: Any, affinity: str | None = None
    ) -> Future[T]:
        """Run `fn(*args)` as trial `trial_id` (a known id: its existing future). `affinity`
        (an environment hash) prefers the node that last ran work with the same key."""
        ...

    def cancel(self, trial_id: str) -> bool:
        """Stop a trial: not started, it never runs; running, it is interrupted where the
        backend can (Ray raises KeyboardInterrupt in the worker, so `run_trial` reclaims its
        sandbox; a local thread is not interrupted: pass `run_trial` a cancel event)."""
        ...

    def result_of(self, trial_id: str) -> Future[Any] | None:
        """The future of a submitted trial id (None when unknown)."""
        ...

    def forget(self, trial_id: str) -> None:
        """Drop a settled trial id's record (a long-lived executor, the campaign's, would
        keep every result otherwise). The id is then unknown: submitting it again runs it
        again, so forget only what the caller has recorded. A trial not yet settled is kept."""
        ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...
