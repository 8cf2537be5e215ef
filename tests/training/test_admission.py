"""Oversampling without a length bias: which launched trials a step trains on.

Regression: admitting the first B trials to finish filtered every batch toward short trials
(docs/ppo.md, run 5: of the last launch slots only the quick trials were admitted), so what an
update taught depended on which trials were cut. Launch-order admission decides by slot: the
admitted batch must have the launched batch's length distribution.

The trials are fakes at the sandbox boundary: each sleeps a duration proportional to its
synthetic length (its number of commands) and returns a verdict; the pool, its threads, the
admission and the cancel are the real ones.
"""

from __future__ import annotations

import random
import time
from statistics import mean

import pytest

pytest.importorskip("torch")

from tasks.results import FailureMode  # noqa: E402
from tests.training.synthetic import Finish, rollout  # noqa: E402
from training.harness import HarnessConfig  # noqa: E402
from training.rollouts import RolloutJob, RolloutPool  # noqa: E402
from training.task_families import fileops_task  # noqa: E402

pytestmark = pytest.mark.torch


class TimedPool(RolloutPool):
    """A RolloutPool whose trials are timed fakes (stands for sandbox trials): slot s takes
    `lengths[s]` x `unit` seconds and has `lengths[s]` commands; slots in `broken` are
    infrastructure failures. A cancelled trial stops at its next 'turn' (every `unit`)."""

    def __init__(self, lengths, tokenizer, *, unit: float = 0.01, broken=()):
        super().__init__(_NoEngine(), tokenizer, workers=len(lengths))  # type: ignore[arg-type]
        self.lengths, self.unit, self.broken = lengths, unit, set(broken)

    def _run(self, job, agent, trial_id):
        n = self.lengths[job.slot]
        for _ in range(n):
            if agent.cancel.is_set():
                r = rollout([], "aborted", Finish(0, 0), slot=job.slot)
                r.trial.failure_mode = FailureMode.CANCELLED
                return r
            time.sleep(self.unit)
        r = rollout([], "finished", Finish(1, 1), slot=job.slot)
        r.trajectory.commands = n
        if job.slot in self.broken:
            r.trial.failure_mode = FailureMode.SANDBOX_ERROR
        return r


class _NoEngine:
    def for_trial(self, trial_id):
        return self

    def abort_request(self, rid=None, *, abort_all=False):
        return None


def _batch(lengths, want, admission, tokenizer, broken=()):
    task = fileops_task(0, "train", 0)
    jobs = [RolloutJob(task, 0, s, None) for s in range(len(lengths))]
    pool = TimedPool(lengths, tokenizer, broken=broken)
    try:
        batch = pool.start(0, jobs, HarnessConfig(), want=want, admission=admission).result(60)
        cancelled = batch.cancelled()
    finally:
        pool.close()
    return batch, cancelled


def test_launch_order_admission_keeps_the_launched_length_distribution(tokenizer):
    """20 steps of 24 launched trials (lengths 1..10, independent of slot), 16 admitted. By
    launch order the admitted trials are exactly the first 16 slots, and their mean length is
    the launched mean; by finishing order they are the short ones (the bias this replaces)."""
    rng = random.Random(0)
    launched, by_slot, by_finish = [], [], []
    for _ in range(20):
        lengths = [rng.randint(1, 10) for _ in range(24)]
        batch, cancelled = _batch(lengths, 16, "launch_order", tokenizer)
        assert [r.sample for r in batch.admitted] == list(range(16))
        assert sorted(r.sample for r in cancelled) == list(range(16, 24))
        launched += lengths
        by_slot += [r.trajectory.commands for r in batch.admitted]
        fast, _ = _batch(lengths, 16, "first_finished", tokenizer)
        by_finish += [r.trajectory.commands for r in fast.admitted]
    # the 16-of-24 slot prefix is a random subset of each batch: same mean up to sampling
    assert abs(mean(by_slot) - mean(launched)) < 0.4, (mean(by_slot), mean(launched))
    long = lambda xs: sum(x >= 8 for x in xs) / len(xs)  # noqa: E731
    assert abs(long(by_slot) - long(launched)) < 0.06
    assert mean(by_finish) < mean(launched) - 0.8, (mean(by_finish), mean(launched))
    assert long(by_finish) < long(launched) - 0.1


def test_launch_order_skips_infrastructure_failures_and_waits_for_slow_slots(tokenizer):
    """Slot 1 is an infrastructure failure: slots 0, 2, 3 are admitted (slot 0 the slowest of
    all, still admitted; slot 3 stands in for the failure); slots 4 and 5, though they finish
    first, are not admitted."""
    batch, cancelled = _batch([9, 1, 2, 1, 1, 1], 3, "launch_order", tokenizer, broken={1})
    assert [r.sample for r in batch.admitted] == [0, 2, 3]
    assert [r.sample for r in batch.infrastructure] == [1]
    assert sorted(r.sample for r in cancelled) == [4, 5]
    assert all(r.trial.failure_mode == "cancelled" for r in cancelled)
    with pytest.raises(ValueError, match="admission"):
        TimedPool([1], tokenizer).start(0, [], HarnessConfig(), want=1, admission="fastest")  # type: ignore[arg-type]
