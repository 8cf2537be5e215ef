"""What a trial cut by a limit earns (`CampaignConfig.truncation`), and the stop-rate metrics.

Regression: a turn-limit truncation was verified and scored exactly like a finish, so a policy
that never declared completion lost nothing; a 15-minute run "gained" +0.23 dense by running
93% of its trials to the turn limit (docs/ppo.md). The default must not score it like a finish.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from tests.training.synthetic import Finish, batch_of, campaign, rollout  # noqa: E402
from training.campaign import (  # noqa: E402
    assemble,
    paid,
    rollout_metrics,
    train_step,
    trained_reward,
)
from training.campaign_config import CampaignConfig  # noqa: E402
from training.engine_protocol import Generation  # noqa: E402
from training.tito import TurnRecord  # noqa: E402

pytestmark = pytest.mark.torch


def _turns(prompt: list[int], outputs: list[list[int]], obs: list[int]) -> list[TurnRecord]:
    turns, stream = [], list(prompt)
    for o in outputs:
        g = Generation(
            rid="r", prompt_ids=list(stream), output_ids=list(o), output_logprobs=[-1.0] * len(o),
            finish="stop", weight_version="0", routed_experts=None, routed_experts_start=0,
        )  # fmt: skip
        turns.append(TurnRecord(generation=g))
        stream = stream + list(o) + obs
    return turns


def _trials():
    """Slot 0 finished, 2 of 4 assertions; slots 1-3 cut (turn limit, context limit, agent
    timeout), 2 of 4 each: the verifier's verdict of the state they left is the same."""
    outs = [[600, 601], [602, 603, 604]]
    stops = ["finished", "turn_limit", "context_limit", "agent_timeout"]
    return [
        rollout(_turns([5, 17, 42], outs, [201, 202]), stop, Finish(2, 4), slot=i)
        for i, stop in enumerate(stops)
    ]


def test_the_default_does_not_score_a_truncation_like_a_finish():
    assert CampaignConfig().truncation == "zero"
    with pytest.raises(ValueError):
        CampaignConfig(truncation="free")


@pytest.mark.parametrize("setting", ["scored", "zero", "masked"])
def test_reward_and_loss_mask_of_a_truncated_trial(setting, random_checkpoint, tmp_path, tokenizer):
    c = campaign(random_checkpoint, tmp_path, tokenizer, truncation=setting, lr=1e-3)
    trials = _trials()
    samples = assemble(c, batch_of(trials))
    assert c.reward_scale == pytest.approx(0.25)  # 1 / the most assertions of the batch
    by_slot = {s.slot: s for s in samples}
    finished = by_slot[0]
    assert finished.reward == pytest.approx(0.5)
    sampled = int(finished.loss_mask.sum())
    assert sampled == 5  # both turns' sampled ids, never the observation between them
    if setting == "masked":
        assert sorted(by_slot) == [0]  # the cut trials never reach the loss
        assert [trained_reward(c, r) for r in trials[1:]] == [None, None, None]
    else:
        assert sorted(by_slot) == [0, 1, 2, 3]
        want = 0.5 if setting == "scored" else 0.0
        for slot in (1, 2, 3):
            assert by_slot[slot].reward == pytest.approx(want)
            assert int(by_slot[slot].loss_mask.sum()) == sampled  # trained on, as any trial
    train_step(c, samples)
    for s in samples:  # gamma = lambda = 1: every loss position's return is the trial's reward
        assert s.returns is not None
        assert torch.allclose(s.returns[s.loss_mask], torch.tensor(s.reward))
    m = rollout_metrics(c, batch_of(trials), samples)
    assert m["rollout/stop_rate"] == pytest.approx(0.25)
    assert m["rollout/turn_limit_rate"] == pytest.approx(0.25)
    assert m["rollout/truncated_masked"] == (3.0 if setting == "masked" else 0.0)
    assert m["rollout/trainable"] == len(samples)
    assert m["rollout/reward"] == pytest.approx(2.0)  # the verdict, whatever is trained on


def test_evaluation_reports_stop_and_turn_limit_rates():
    from tasks.results import FailureMode
    from training.evaluation import summarize_evaluation
    from training.rollouts import RolloutJob
    from training.task_families import fileops_task

    task = fileops_task(0, "train", 0)
    trials = _trials()
    trials[3].trial.failure_mode = FailureMode.SANDBOX_ERROR  # infrastructure: not counted
    jobs = [RolloutJob(task, i, i, None) for i in range(4)]
    s = summarize_evaluation(
        jobs, trials, campaign="c", run_id="r", step=0, checkpoint="v0", benchmark="b"
    )
    assert s.samples == 3 and s.infrastructure_failures == 1
    assert s.stop_rate == pytest.approx(1 / 3) and s.turn_limit_rate == pytest.approx(1 / 3)
    meta = s.metadata()
    assert meta["validate/stop_rate"] == s.stop_rate
    assert meta["validate/turn_limit_rate"] == s.turn_limit_rate


def test_placebo_shuffles_the_trained_rewards_within_the_batch(
    random_checkpoint, tmp_path, tokenizer
):
    """The placebo arm trains on the batch's own rewards, permuted among its samples by
    (seed, step): the same multiset, another trial's reward on each trajectory."""
    verdicts = [Finish(p, 4) for p in (0, 1, 2, 3, 4, 4, 0, 1)]
    outs = [[600, 601], [602, 603, 604]]
    trials = [
        rollout(_turns([5, 17, 42], outs, [201, 202]), "finished", v, slot=i)
        for i, v in enumerate(verdicts)
    ]
    real = assemble(campaign(random_checkpoint, tmp_path, tokenizer), batch_of(trials))
    c = campaign(random_checkpoint, tmp_path, tokenizer, placebo_rewards=True)
    runs = [[s.reward for s in assemble(c, batch_of(trials, step=k))] for k in (0, 0, 1)]
    truth = [s.reward for s in real]
    assert truth == [p / 4 for p in (0, 1, 2, 3, 4, 4, 0, 1)]
    assert all(sorted(r) == sorted(truth) for r in runs)
    assert runs[0] == runs[1] and runs[0] != truth and runs[0] != runs[2]


def test_the_campaign_seed_varies_the_sampling_seed_unless_the_harness_pins_it(tmp_path):
    from training.campaign_config import load_campaign_config
    from training.harness import HarnessConfig

    assert CampaignConfig(seed=3).harness.seed == 3
    assert CampaignConfig(seed=3, harness={"max_turns": 4}).harness.seed == 3
    assert CampaignConfig(seed=3, harness=HarnessConfig()).harness.seed == 3
    assert CampaignConfig(seed=3, harness={"seed": 7}).harness.seed == 7
    for preset in ("fileops-learning", "fileops-conservative-nocancel", "fileops-locked"):
        assert load_campaign_config(preset, seed=2).harness.seed == 2, preset


def test_outcomes_recorded_after_the_agents_code_ran_in_the_runner_earn_nothing():
    """3 of 4 pass, but the runner executed the agent's module after the first outcome: only
    that one is the judge's own (the module could have written the rest)."""
    from types import SimpleNamespace

    from tasks.results import AgentCode

    r = rollout([], "finished", Finish(3, 4))
    c = SimpleNamespace(
        cfg=SimpleNamespace(reward="dense", truncation="zero"), reward_scale=0.25, verdicts={}
    )
    assert trained_reward(c, r) == pytest.approx(0.75)  # type: ignore[arg-type]
    r.trial.report.agent_code = [AgentCode(path="/app/solution.py", after=1)]
    assert r.trial.independent_passed == 1 and r.trial.passed == 3
    assert trained_reward(c, r) == pytest.approx(0.25)  # type: ignore[arg-type]
    r.trial.report.agent_code = [AgentCode(path="/app/solution.py", after=0)]
    assert trained_reward(c, r) == 0.0  # type: ignore[arg-type]
    c.cfg.reward = "binary"
    r.trial.report.agent_code = []
    r.trial.report.assertions = r.trial.report.assertions[:3]  # all pass: resolved
    assert trained_reward(c, r) == 1.0  # type: ignore[arg-type]
    r.trial.report.agent_code = [AgentCode(path="/app/solution.py", after=2)]
    assert trained_reward(c, r) == 0.0  # type: ignore[arg-type]


def test_a_trial_is_paid_against_its_tasks_reference_verdict():
    """With the audit's reference verdict for the task, outcomes the reference lacks (the
    agent's state added them) and skips it provoked earn nothing, and the reward scale is
    fixed by the reference's count, not by the inflated trial's."""
    from types import SimpleNamespace

    from tasks.results import AssertionResult, AssertionStatus, ReferenceVerdict

    honest = rollout([], "finished", Finish(3, 3))
    ref = ReferenceVerdict.of(honest.trial)
    assert ref is not None
    inflated = rollout([], "finished", Finish(3, 3), slot=1)
    extra = [AssertionResult(name=f"a0[r{i}]", status=AssertionStatus.PASSED) for i in range(9)]
    inflated.trial.report.assertions[1:] = extra  # a1, a2 gone; 9 reports the agent wrote
    provoked = rollout([], "finished", Finish(3, 3), slot=2)
    provoked.trial.report.assertions[2].status = AssertionStatus.SKIPPED
    c = SimpleNamespace(
        cfg=SimpleNamespace(reward="dense", truncation="zero"), reward_scale=None, verdicts={}
    )
    assert inflated.trial.passed == 10 and provoked.trial.resolved
    assert [len(paid(c, r).passed) for r in (honest, inflated, provoked)] == [3, 10, 2]
    c.verdicts = {"synthetic": ref}
    assert [len(paid(c, r).passed) for r in (honest, inflated, provoked)] == [3, 1, 2]
    assert max(paid(c, r).total for r in (honest, inflated, provoked)) == 3
    c.reward_scale = 1 / 3
    assert [trained_reward(c, r) for r in (honest, inflated, provoked)] == pytest.approx(
        [1.0, 1 / 3, 2 / 3]
    )
    c.cfg.reward = "binary"
    assert [trained_reward(c, r) for r in (honest, inflated, provoked)] == [1.0, 0.0, 0.0]
