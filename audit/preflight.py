"""Pre-flight: sample N tasks of a pool, run the oracle, report the share whose verifier left
a usable per-assertion record (paper: 93% of sampled T1 tasks).

A record is usable when the trial itself did not fail, the verifier's report parsed, it is
not a bare reward.txt (binary), and it names at least one assertion. Every sampled task is a
row with its reason; the trials are recorded in the warehouse when a store is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from sandbox.trial import run_trial
from tasks.model import Task
from tasks.results import FailureMode, TrialResult
from warehouse.permutation import epoch_permutation

if TYPE_CHECKING:
    from warehouse.recording import StoreRef

USABLE = "usable"


class PreflightRow(BaseModel):
    task_hash: str
    task_id: str
    usable: bool
    reason: str
    assertions: int = 0
    source: str = ""


class PreflightReport(BaseModel):
    pool: str
    sampled: int
    usable: int
    rows: list[PreflightRow] = Field(default_factory=list)

    @property
    def share(self) -> float:
        return self.usable / self.sampled if self.sampled else 0.0

    def reasons(self) -> dict[str, int]:
        return dict(Counter(r.reason for r in self.rows).most_common())


def record_usability(r: TrialResult) -> str:
    """`usable`, or why the trial's per-assertion record is not usable (pure)."""
    if r.failure_mode not in (FailureMode.NONE, FailureMode.AGENT_TIMEOUT):
        return r.failure_mode.value
    if r.report.parse_error:
        return "parse_error"
    if r.report.binary:
        return "binary"
    if r.total == 0:
        return "no_assertions"
    return USABLE


def sample(tasks: list[Task], n: int, seed: int = 0) -> list[Task]:
    """`n` tasks (all if fewer) drawn without replacement by the seeded permutation."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    return [tasks[i] for i in epoch_permutation(len(tasks), seed, 0)[:n]]


def run_preflight(
    tasks: list[Task],
    n: int,
    *,
    pool: str = "",
    seed: int = 0,
    workers: int = 2,
    backend: str = "local",
    runner: Callable[..., TrialResult] | None = None,
    store: StoreRef = None,
) -> PreflightReport:
    """Run the oracle on a sample of `tasks`; the report lists every sampled task."""
    run = runner or partial(run_trial, backend=backend)
    chosen = sample(tasks, n, seed)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        results = list(ex.map(lambda t: run(t, "oracle"), chosen))
    if store is not None:
        from warehouse.recording import record_trials

        record_trials(store, results)
    rows = []
    for t, r in zip(chosen, results, strict=True):
        why = record_usability(r)
        rows.append(
            PreflightRow(
                task_hash=t.content_hash,
                task_id=t.id,
                usable=why == USABLE,
                reason=why,
                assertions=r.total,
                source=r.report.source.value,
            )
        )
    return PreflightReport(
        pool=pool, sampled=len(rows), usable=sum(r.usable for r in rows), rows=rows
    )
