"""`LocalExecutor`: trials on a thread pool in this process (the default; no Ray)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class LocalExecutor:
    """A `ThreadPoolExecutor` of `workers` threads behind the executor interface: the same
    behaviour as the pools the stages used before (a trial runs on a thread of this process,
    exceptions propagate from its future), plus idempotent trial ids."""

    def __init__(self, workers: int = 2, *, thread_name_prefix: str = "trial") -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
        self._futures: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()

    def submit(
        self, trial_id: str, fn: Callable[..., T], /, *args: Any, affinity: str | None = None
    ) -> Future[T]:
        with self._lock:
            known = self._futures.get(trial_id)
            if known is not None:
                return known
            fut = self._pool.submit(fn, *args)
            self._futures[trial_id] = fut
            return fut

    def share(self, value: T) -> T:
        return value

    def cancel(self, trial_id: str) -> bool:
        fut = self.result_of(trial_id)
        return fut.cancel() if fut is not None else False

    def result_of(self, trial_id: str) -> Future[Any] | None:
        with self._lock:
            return self._futures.get(trial_id)

    def forget(self, trial_id: str) -> None:
        with self._lock:
            fut = self._futures.get(trial_id)
            if fut is not None and fut.done():
                del self._futures[trial_id]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)
