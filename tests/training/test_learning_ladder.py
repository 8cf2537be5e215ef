"""A ladder of learning checks through the campaign's own `assemble` + `train_step`, from trivial
up: one decisive token; a short command (several tokens of one turn); two turns with an
observation between them; the finish decision (work until the environment says done, then stop).

Each rung trains a tiny policy on a synthetic environment (tests/training/synthetic.py:
the policy samples, the environment gives the verdict) and fails unless the update raises the
reward by a clear margin. Regression guards for an update that does not learn: a flipped
advantage sign, a zero learning rate, a reward that does not reach the loss, a loss mask that
trains on observations or misses a turn. Checked by hand: with the surrogate's sign flipped
(ppo_math.policy_loss) or lr = 0 every rung fails. A fifth test runs the finish rung with
truncation scored like a finish and pins the reward hack that setting invites.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from tests.training.synthetic import (  # noqa: E402
    ACTIONS,
    Continue,
    Env,
    Finish,
    batch_of,
    campaign,
    mean_reward,
    play,
    warm_up,
)
from training.campaign import assemble, train_step  # noqa: E402

pytestmark = pytest.mark.torch

PROMPT = [5, 17, 42, 99, 7, 300, 12, 64]
OK, ERR = [201, 202], [301, 302]  # observations: "it worked" / "it failed"
NOT_DONE, DONE = [401, 402], [501, 502]


def good(tok: int, salt: int = 0) -> bool:
    """Two of the eight actions are right (a quarter of the warm policy's mass); `salt` picks
    which two."""
    return tok in ACTIONS and (ACTIONS.index(tok) + 2 * salt) % 8 < 2


def finishes(tok: int) -> bool:
    """Two actions end the trial (a final answer without a tool call)."""
    return tok in ACTIONS[-2:]


@pytest.fixture(scope="module")
def warm(random_checkpoint, tmp_path_factory):
    """The tiny policy warm-started to spread its mass over the 8 actions in every context."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the campaign's trainer_threads: more threads than free cores spin
    try:
        out = tmp_path_factory.mktemp("ladder_policy")
        yield warm_up(random_checkpoint, out, [OK, ERR, NOT_DONE, DONE], PROMPT)
    finally:
        torch.set_num_threads(threads)


def train(c, env: Env, steps: int, episodes: int, seed: int = 0) -> tuple[float, float]:
    """Mean reward of 256 fresh episodes before and after `steps` updates of `episodes` each."""
    gen = torch.Generator().manual_seed(seed)
    probe = torch.Generator().manual_seed(seed + 1000)
    before = mean_reward(play(c.actor, env, 256, probe))
    for step in range(steps):
        samples = assemble(c, batch_of(play(c.actor, env, episodes, gen), step))
        metrics = train_step(c, samples)
        assert metrics["train/actor_updated"] == 1.0
    probe = torch.Generator().manual_seed(seed + 1000)
    after = mean_reward(play(c.actor, env, 256, probe))
    return before, after


def _c(policy, tmp_path, tokenizer, **cfg):
    base = dict(lr=3e-3, critic_lr=1e-3, ppo_epochs=4, whiten_advantages=True)
    return campaign(policy, tmp_path, tokenizer, **{**base, **cfg})


def test_rung1_one_decisive_token(warm, tmp_path, tokenizer):
    env = Env(PROMPT, 1, 1, lambda outs: Finish(int(good(outs[0][0])), 1))
    before, after = train(_c(warm, tmp_path, tokenizer), env, steps=6, episodes=24)
    assert after - before > 0.4, f"P(right token) {before:.2f} -> {after:.2f}"


def test_rung2_a_short_command(warm, tmp_path, tokenizer):
    """Three tokens of one turn, each right in a quarter of the vocabulary (its own quarter):
    dense reward = right tokens / 3; every sampled token of the turn gets credit."""
    env = Env(
        PROMPT, 3, 1, lambda outs: Finish(sum(good(t, salt=i) for i, t in enumerate(outs[0])), 3)
    )
    before, after = train(_c(warm, tmp_path, tokenizer), env, steps=10, episodes=24)
    assert after - before > 0.15, f"right tokens {before:.2f} -> {after:.2f}"


def test_rung3_two_turns(warm, tmp_path, tokenizer):
    """Turn 1 runs a command (right or not, the observation says which); turn 2's right answer
    depends on that observation. Reward = right turns / 2: the second turn is trained on the
    stream with the observation as masked context."""

    def react(outs):
        if len(outs) == 1:
            return Continue(OK if good(outs[0][0]) else ERR)
        ok = good(outs[0][0])
        return Finish(int(ok) + int(good(outs[1][0], salt=1 if ok else 2)), 2)

    env = Env(PROMPT, 1, 2, react)
    before, after = train(_c(warm, tmp_path, tokenizer), env, steps=10, episodes=24)
    assert after - before > 0.12, f"right turns {before:.2f} -> {after:.2f}"


def _finish_env() -> Env:
    """The work takes two turns of commands; after each the observation says not done / done.
    Finishing before the work is done fails, finishing after it passes; a trial cut at the turn
    limit (4) with the work done is what the verifier would pass."""

    def react(outs):
        work = sum(not finishes(o[0]) for o in outs)
        if finishes(outs[-1][0]):
            return Finish(int(work >= 2), 1)
        return Continue(DONE if work >= 2 else NOT_DONE)

    def verdict(outs):
        return Finish(int(sum(not finishes(o[0]) for o in outs) >= 2), 1)

    return Env(PROMPT, 1, 4, react, verdict)


def _stop_rate(rollouts) -> float:
    return sum(r.trajectory.stop == "finished" for r in rollouts) / len(rollouts)


def test_rung4_the_finish_decision(warm, tmp_path, tokenizer):
    """Under the default truncation setting a cut trial earns 0: the policy must learn to keep
    working and then to stop (reward counts only finished trials)."""
    c = _c(warm, tmp_path, tokenizer, lr=2e-3, ppo_epochs=2)
    assert c.cfg.truncation == "zero"
    before, after = train(c, _finish_env(), steps=16, episodes=32)
    assert after - before > 0.2, f"finished with the work done {before:.2f} -> {after:.2f}"


def test_rung4_scored_truncation_is_a_free_pass(warm, tmp_path, tokenizer):
    """The reward hack of docs/ppo.md in miniature: with a cut trial scored like a finish, the
    same update learns to never finish (measured: stop rate 0.62-0.66 -> 0.02-0.05 over three
    seeds, where the default raises it to 0.83-0.86). Pins why `scored` is not the default."""
    c = _c(warm, tmp_path, tokenizer, lr=2e-3, ppo_epochs=2, truncation="scored")
    env = _finish_env()
    gen = torch.Generator().manual_seed(0)
    before = _stop_rate(play(c.actor, env, 256, torch.Generator().manual_seed(1000)))
    for step in range(16):
        train_step(c, assemble(c, batch_of(play(c.actor, env, 32, gen), step)))
    after = play(c.actor, env, 256, torch.Generator().manual_seed(1000))
    assert before > 0.5 and _stop_rate(after) < 0.2, (before, _stop_rate(after))
    assert mean_reward(after, truncation="scored") > 0.9  # "solved", by running out the clock
