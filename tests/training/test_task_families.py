"""Generated families: held-out names never occur in training tasks; in real sandboxes the
reference solution passes every assertion, doing nothing passes only the guard, and a partial
or wrong solution lands in between (the dense reward moves with each operation)."""

from __future__ import annotations

import re

import pytest

from sandbox import AgentOutcome, run_trial
from training.task_families import (
    WORDS,
    countdown_task,
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

    def run(self, sandbox, task, deadline):
        for c in self.commands:
            sandbox.session().run(c, timeout_s=10)
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
