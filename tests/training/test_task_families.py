"""Generated families: held-out names never occur in training tasks; in real sandboxes the
reference solution passes every assertion, doing nothing passes only the guard, and a partial
or wrong solution lands in between (the dense reward moves with each operation)."""

from __future__ import annotations

import re

import pytest

from sandbox import AgentOutcome, run_trial
from training.task_families import (
    BUSY_LINE,
    LOCKED_LINE,
    WORDS,
    countdown_task,
    family_splits,
    fileops_splits,
    task_trajectory,
    word_split,
    write_tasks,
)


def test_heldout_words_never_occur_in_training_tasks(tmp_path):
    splits = fileops_splits(sft=30, rl=30, heldout=20)
    held = {w for w in WORDS if word_split(w) == "heldout"}
    assert 0 < len(held) < len(WORDS)

    def names(task):
        return set(re.findall(r"export ITEM=(\w+)", task.environment.files["app/todo"].decode()))

    for t in [*splits.sft, *splits.rl]:
        assert not names(t) & held, t.id
    assert all(names(t) <= held for t in splits.heldout)
    # tasks differ: operations and their order are drawn per task
    assert len({t.environment.files["app/todo"] for t in splits.heldout}) == 20
    ids = {t.id for t in [*splits.sft, *splits.rl]}
    assert len(ids) == 60 and not ids & {t.id for t in splits.heldout}
    write_tasks(splits.heldout[:2], tmp_path / "ho")
    assert sorted(p.name for p in (tmp_path / "ho").iterdir() if p.is_dir()) == sorted(
        t.id for t in splits.heldout[:2]
    )


class Commands:
    """Types a fixed list of commands into the trial's session, one per turn."""

    name = "commands"

    def __init__(self, commands):
        self.commands = list(commands)
        self.shown: list[tuple[int, str]] = []
        """(exit code, stdout) of each command, as the session showed them."""

    def run(self, sandbox, task, deadline):
        for c in self.commands:
            r = sandbox.session().run(c, timeout_s=10)
            self.shown.append((r.exit_code, r.stdout.strip()))
        return AgentOutcome(exit_code=0)


@pytest.mark.sandbox
def test_fileops_reward_moves_with_each_operation():
    task = fileops_splits(sft=0, rl=0, heldout=1).heldout[0]
    steps = task_trajectory(task).steps
    commands = [s.command for s in steps]
    full = run_trial(task, Commands(commands))
    assert full.failure_mode == "none" and full.total == 4 and full.passed == 4, full.failure_detail
    half = run_trial(task, Commands(commands[:4]))  # two of three operations
    assert half.passed == 3 and not half.resolved
    nop = run_trial(task, Commands([]))
    assert nop.passed == 1  # only the guard
    wrong = run_trial(task, Commands(["rm -rf /app/*"]))
    assert wrong.passed < nop.passed + 1 and not wrong.resolved
    # what the reference trajectory says each command prints is what the session shows
    shown = [(s.command, s.output) for s in steps if s.command == ". ./todo"]
    assert shown[-1][1] == "all done" and all(o for _, o in shown)


@pytest.mark.sandbox
def test_countdown_counts_turns():
    task = countdown_task(0, 8)
    assert run_trial(task, Commands(["./tick"] * 8)).passed == 5
    assert run_trial(task, Commands(["./tick"] * 4)).passed == 3  # marks 2 and 4, stopped
    overshoot = run_trial(task, Commands(["./tick"] * 12))
    assert overshoot.passed == 4  # did not stop at done


def test_locked_family_splits():
    """The sft split is fileops's, unchanged (no lock ever seen); rl and held-out tasks are the
    same-index fileops tasks with 1-3 locks, placed per task."""
    plain = fileops_splits(sft=5, rl=20, heldout=20)
    locked = family_splits("fileops-locked", sft=5, rl=20, heldout=20)
    assert [t.content_hash for t in locked.sft] == [t.content_hash for t in plain.sft]
    plans = set()
    for t in [*locked.rl, *locked.heldout]:
        steps = task_trajectory(t).steps
        locks = sum(s.output == LOCKED_LINE for s in steps)
        assert 1 <= locks <= 3 and t.id.startswith("fileops-locked-")
        assert len(t.verifier["test.sh"].decode().split("\ncheck ")) - 1 == 5
        plans.add(tuple(s.output == LOCKED_LINE for s in steps))
    assert len(plans) > 4
    with pytest.raises(ValueError, match="unknown family"):
        family_splits("nope", sft=1, rl=1, heldout=1)


@pytest.mark.sandbox
def test_locked_task_rewards_recovery_over_acting_on_a_stale_item():
    """The reference (source todo again after a lock) passes all five assertions; acting on
    the lock message instead (the stale or empty $ITEM) leaves stray paths, so the
    nothing-else assertion fails even once every operation is eventually done."""
    task = next(
        t
        for t in family_splits("fileops-locked", sft=0, rl=0, heldout=30).heldout
        if "touch" in t.solution["solve.sh"].decode() and LOCKED_LINE in str(task_trajectory(t))
    )
    steps = task_trajectory(task).steps
    commands = [s.command for s in steps]
    full = run_trial(task, Commands(commands))
    assert full.failure_mode == "none" and full.total == 5, full.failure_detail
    assert full.passed == 5
    # what the session shows is what the reference trajectory says
    assert LOCKED_LINE in [s.output for s in steps]
    # acting on every lock with each command kind the policy knows, then going on
    stale = []
    for s in steps:
        stale.append(s.command)
        if s.output == LOCKED_LINE:
            stale += ["touch $ITEM.done", "mkdir -p $ITEM"]
    hurt = run_trial(task, Commands(stale))
    assert hurt.passed == 4 and not hurt.resolved
    nop = run_trial(task, Commands([]))
    assert nop.passed == 1


def test_busy_family_splits():
    """countdown-busy: the sft split never meets a busy ./tick; rl and held-out tasks meet it
    once or twice at drawn counts; held-out lengths (odd) never occur in training (even)."""
    splits = family_splits("countdown-busy", sft=20, rl=30, heldout=30)
    assert all(BUSY_LINE not in str(task_trajectory(t)) for t in splits.sft)
    lengths = {"train": set(), "heldout": set()}
    placements = set()
    for split, tasks in (("train", splits.sft + splits.rl), ("heldout", splits.heldout)):
        for t in tasks:
            outs = [s.output for s in task_trajectory(t).steps]
            ticks = sum(o != BUSY_LINE for o in outs)
            lengths[split].add(ticks)
            if t in splits.sft:
                continue
            assert 1 <= outs.count(BUSY_LINE) <= 2 and outs[-1] == "done", t.id
            placements.add(tuple(i for i, o in enumerate(outs) if o == BUSY_LINE))
    assert lengths["train"] and lengths["heldout"]
    assert not lengths["train"] & lengths["heldout"]
    assert len(placements) > 10
    assert len({t.id for t in [*splits.sft, *splits.rl, *splits.heldout]}) == 80
    with pytest.raises(ValueError, match="busy counts"):
        countdown_task(0, 6, busy=(7,))


@pytest.mark.sandbox
def test_busy_task_rewards_calling_again_over_giving_up():
    """The reference (./tick again after the busy failure) passes all five assertions, and
    the session shows what the reference trajectory says; stopping at the failure (what the
    SFT policy does most often) loses the later marks; ticking on past done loses the stop."""
    task = countdown_task(0, 8, busy=(5,), split="heldout")
    steps = task_trajectory(task).steps
    reference = Commands([s.command for s in steps])
    full = run_trial(task, reference)
    assert full.failure_mode == "none" and full.total == 5, full.failure_detail
    assert full.passed == 5
    assert [s.output for s in steps][4] == BUSY_LINE and len(steps) == 9
    assert [o for _, o in reference.shown] == [s.output for s in steps]
    assert [c for c, _ in reference.shown] == [1 if i == 4 else 0 for i in range(9)]
    gave_up = run_trial(task, Commands(["./tick"] * 5))  # the fifth call is the busy one
    assert gave_up.passed == 3 and not gave_up.resolved  # marks 2 and 4, stopped
    overshoot = run_trial(task, Commands(["./tick"] * 14))
    assert overshoot.passed == 4
