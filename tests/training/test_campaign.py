"""The PPO campaign: task drawing, task selection, the update's invariants on real rollouts
(reward reaches GAE, infrastructure failures excluded, staleness bound, critic before actor,
R3 in the training forward, warm-up, whitening, KL loss), and real campaigns (one-step async
over concurrent sandboxes with oversampling; checkpoint and resume identical to a straight run).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from tasks.results import FailureMode  # noqa: E402
from training.campaign import (  # noqa: E402
    Campaign,
    CampaignHooks,
    assemble,
    campaign_tasks,
    draw_tasks,
    run_campaign,
    train_step,
    whiten,
)
from training.campaign_config import CampaignConfig, load_campaign_config  # noqa: E402
from training.harness import HarnessConfig  # noqa: E402
from training.rollouts import RolloutBatch  # noqa: E402
from training.task_families import fileops_splits, write_tasks  # noqa: E402
from warehouse.permutation import epoch_permutation  # noqa: E402

pytestmark = pytest.mark.torch


def test_draw_tasks_walks_each_epoch_permutation():
    pool, per_step, seed = 5, 2, 7
    drawn = [i for step in range(5) for i in draw_tasks(pool, per_step, step, seed)]  # 10 draws
    assert drawn[:5] == epoch_permutation(pool, seed, 0)
    assert drawn[5:] == epoch_permutation(pool, seed, 1)
    assert sorted(drawn[:5]) == list(range(pool))
    assert drawn[:5] != drawn[5:], "two epochs drew the same order"
    with pytest.raises(ValueError):
        draw_tasks(0, 1, 0, seed)


def test_campaign_tasks_rejects_overlap_and_unknown_ids(tmp_path):
    cfg = load_campaign_config("tiny-cpu")
    train, held_out = campaign_tasks(cfg)
    assert [t.id for t in train] == sorted(cfg.train_task_ids)
    assert [t.id for t in held_out] == cfg.eval_task_ids
    with pytest.raises(ValueError, match="both trained on and held out"):
        campaign_tasks(cfg.model_copy(update={"eval_task_ids": [cfg.train_task_ids[0]]}))
    with pytest.raises(ValueError, match="unknown eval task"):
        campaign_tasks(cfg.model_copy(update={"eval_task_ids": ["no-such-task"]}))
    # task directories: the family's splits, and the same task on both sides is refused
    splits = fileops_splits(sft=0, rl=3, heldout=2)
    train_dir = write_tasks(splits.rl, tmp_path / "rl")
    eval_dir = write_tasks(splits.heldout, tmp_path / "heldout")
    dirs = CampaignConfig(train_dir=train_dir, eval_dir=eval_dir)
    train, held_out = campaign_tasks(dirs)
    assert sorted(t.id for t in train) == sorted(t.id for t in splits.rl)
    assert sorted(t.id for t in held_out) == sorted(t.id for t in splits.heldout)
    with pytest.raises(ValueError, match="both trained on and held out"):
        campaign_tasks(dirs.model_copy(update={"eval_dir": train_dir}))
    with pytest.raises(ValueError, match="eval_dir or eval_task_ids"):
        CampaignConfig(eval_dir=eval_dir, eval_task_ids=["x"])


# ---- the update on real rollouts --------------------------------------------------------------
@pytest.fixture(scope="module")
def real_batch(warm_policy):
    """Four real trials of family tasks: the warm-started policy on the local engine, each in
    its own sandbox, two at a time."""
    from training.chat_tokenizer import load_chat_tokenizer
    from training.engine_local import LocalEngine
    from training.engine_protocol import EngineClient
    from training.rollouts import RolloutPool, plan_jobs

    tasks = fileops_splits(sft=0, rl=4, heldout=0).rl
    tok = load_chat_tokenizer(warm_policy)
    with LocalEngine(warm_policy, seed=0, skip_tokenizer_init=True) as eng:
        mc = eng.model.config
        client = EngineClient(eng.base_url, num_layers=mc.num_hidden_layers, top_k=2)
        pool = RolloutPool(client, tok, workers=2)
        jobs = plan_jobs(tasks, [0, 1, 2, 3], samples_per_task=1, launch=4, step=0, seed=3)
        harness = HarnessConfig(max_turns=2, max_new_tokens=64, temperature=1.0)
        batch = pool.start(0, jobs, harness, want=4).result(timeout=600)
        pool.close()
        client.close()
    assert len(batch.admitted) == 4 and all(r.trajectory.turns for r in batch.admitted)
    return batch


def _campaign(policy: Path, tmp_path: Path, **cfg) -> Campaign:
    """A Campaign's trainer half (actor, critic, optimizers) without engine or sandboxes."""
    from training.critic import load_critic
    from training.policy import load_policy

    config = CampaignConfig(
        async_rollouts=False, lr=1e-3, critic_lr=1e-3, ppo_epochs=1, harness=HarnessConfig(), **cfg
    )
    actor = load_policy(policy)
    actor.train()
    critic = load_critic(policy)
    return Campaign(
        cfg=config, run_id="unit", run_dir=tmp_path, store=tmp_path / "wh", policy_path=policy,
        tasks=[], eval_tasks=[], actor=actor, critic=critic,
        actor_opt=torch.optim.AdamW(actor.parameters(), lr=config.lr, weight_decay=0.0),
        critic_opt=torch.optim.AdamW(critic.parameters(), lr=config.critic_lr, weight_decay=0.0),
        client=None, pool=None, tokenizer=_tok(policy),
        reference=load_policy(policy) if config.kl_coef > 0 else None,
    )  # fmt: skip


def _tok(policy):
    from training.chat_tokenizer import load_chat_tokenizer

    return load_chat_tokenizer(policy)


def _batch(real_batch) -> RolloutBatch:
    """A decided batch holding copies of the fixture's trials (tests may edit them)."""
    return RolloutBatch(
        step=0,
        want=len(real_batch.admitted),
        launched=real_batch.launched,
        admitted=copy.deepcopy(real_batch.admitted),
        infrastructure=copy.deepcopy(real_batch.infrastructure),
    )


def test_the_dense_reward_reaches_gae_and_infrastructure_failures_are_excluded(
    real_batch, warm_policy, tmp_path
):
    """Regression guard: a reward zeroed (or an infrastructure failure trained on as 0) would
    pass silently. The scale is fixed by the first batch: 1 / the most assertions of a trial;
    every loss position's return is scale * passing assertions (gamma = lambda = 1). Scored
    truncation: these two-turn trials may hit the turn limit (tests/training/test_truncation.py
    covers the other settings)."""
    c = _campaign(warm_policy, tmp_path, truncation="scored")
    batch = _batch(real_batch)
    broken = batch.admitted.pop()
    broken.trial.failure_mode = FailureMode.VERIFIER_ERROR  # the verifier never ran
    batch.infrastructure.append(broken)
    samples = assemble(c, batch)
    most = max(r.trial.total for r in batch.admitted)
    assert c.reward_scale == pytest.approx(1.0 / most)
    assert len(samples) == len(batch.admitted) == 3  # the infrastructure failure is not there
    passed = [r.trial.passed for r in batch.admitted]
    assert any(p > 0 for p in passed), "the fixture should pass some assertions"
    assert [s.reward for s in samples] == pytest.approx([c.reward_scale * p for p in passed])
    train_step(c, samples)
    for s, p in zip(samples, passed, strict=True):
        assert torch.allclose(s.returns[s.loss_mask], torch.tensor(c.reward_scale * p))
    binary = _campaign(warm_policy, tmp_path, reward="binary", truncation="scored")
    resolved = [float(r.trial.resolved) for r in batch.admitted]
    assert [s.reward for s in assemble(binary, batch)] == resolved


def test_samples_more_than_max_staleness_behind_are_dropped(real_batch, warm_policy, tmp_path):
    c = _campaign(warm_policy, tmp_path, max_staleness=1)
    c.weight_version = 1  # every turn was sampled by version 0: staleness 1, kept
    assert len(assemble(c, _batch(real_batch))) == 4
    c.weight_version = 2  # staleness 2 > 1: dropped
    assert assemble(c, _batch(real_batch)) == []


def test_critic_steps_before_actor_on_pre_update_values(real_batch, warm_policy, tmp_path):
    """Regression guard: the actor updated before the critic. The paper updates the critic
    first; advantages come from the critic's pre-update values."""
    c = _campaign(warm_policy, tmp_path)
    samples = assemble(c, _batch(real_batch))
    before = [c.critic.values(s.sample.token_ids) for s in samples]
    order: list[str] = []
    for name, opt in (("critic", c.critic_opt), ("actor", c.actor_opt)):
        step = opt.step
        opt.step = lambda *a, _s=step, _n=name, **k: (order.append(_n), _s(*a, **k))[1]
    metrics = train_step(c, samples)
    assert order == ["critic", "actor"] and metrics["train/actor_updated"] == 1.0
    for s, v in zip(samples, before, strict=True):
        assert torch.allclose(s.values, v, atol=1e-5)  # batched forward: same up to rounding


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_update_moves_a_trials_likelihood_with_its_advantage(
    real_batch, warm_policy, tmp_path, sign
):
    """Regression guard for the direction of the whole update (a sign error anywhere between
    the reward and the optimizer step): one trial rewarded +1 (or -1), the others 0. The critic
    head starts at zero, so its advantages are exactly its reward; one step must raise (lower)
    the mean log-probability of its sampled tokens under the actor."""
    from training.campaign import _logprobs

    c = _campaign(warm_policy, tmp_path)
    samples = assemble(c, _batch(real_batch))
    for i, s in enumerate(samples):
        s.reward = sign if i == 0 else 0.0
    target = samples[:1]

    def mean_logp() -> float:
        logp = _logprobs(c, c.actor, target, grad=False)[0]  # (n,)
        return float(logp[target[0].loss_mask].mean())

    before = mean_logp()
    train_step(c, samples)
    assert torch.equal(samples[0].advantages[samples[0].loss_mask], torch.full_like(
        samples[0].advantages[samples[0].loss_mask], sign))  # fmt: skip
    moved = mean_logp() - before
    assert moved * sign > 1e-3, f"mean logprob moved {moved:+.4f} for advantage {sign:+.0f}"


def _experts(model):
    return [layer.mlp.experts.gate_up_proj.detach().clone() for layer in model.model.layers]


@pytest.mark.parametrize("r3", [True, False])
def test_r3_reaches_the_training_forward(real_batch, warm_policy, tmp_path, r3):
    """Regression guard: R3 missing from the campaign's forward. Every position's record names
    experts {0, 1}: with R3 the update moves experts 0 and 1 only (others get exactly zero
    gradient, so AdamW leaves them bit-identical); without R3 live routing reaches others."""
    c = _campaign(warm_policy, tmp_path, r3=r3)
    samples = assemble(c, _batch(real_batch))
    for s in samples:
        s.sample.routed_experts[:] = [0, 1]
    before = _experts(c.actor)
    train_step(c, samples)
    after = _experts(c.actor)
    for b, a in zip(before, after, strict=True):
        assert not torch.equal(b[:2], a[:2])
        assert torch.equal(b[2:], a[2:]) == r3


def test_critic_warmup_freezes_the_actor(real_batch, warm_policy, tmp_path):
    c = _campaign(warm_policy, tmp_path, critic_warmup_steps=1, critic_warmup_epochs=3)
    samples = assemble(c, _batch(real_batch))
    actor = copy.deepcopy(c.actor.state_dict())
    head = c.critic.value_head.weight.detach().clone()
    metrics = train_step(c, samples)
    assert metrics["train/actor_updated"] == 0.0 and metrics["critic/warmup"] == 1.0
    assert all(torch.equal(v, c.actor.state_dict()[k]) for k, v in actor.items())
    assert not torch.equal(head, c.critic.value_head.weight)


def test_whitening_and_the_k3_kl_loss(real_batch, warm_policy, tmp_path):
    c = _campaign(warm_policy, tmp_path, whiten_advantages=True)
    samples = assemble(c, _batch(real_batch))
    for i, s in enumerate(samples):
        s.reward = float(i)  # distinct returns: something to whiten
    train_step(c, samples)
    flat = torch.cat([s.advantages[s.loss_mask] for s in samples])
    assert abs(float(flat.mean())) < 1e-5 and abs(float(flat.std(unbiased=False)) - 1) < 1e-4
    whiten(samples)  # idempotent up to rounding
    # the KL term pulls a perturbed actor back toward the initial policy (zero advantages)
    k = _campaign(warm_policy, tmp_path, kl_coef=1.0, clip_eps=10.0)
    with torch.no_grad():
        for p in k.actor.parameters():
            p.add_(0.05 * torch.randn_like(p))
    samples = assemble(k, _batch(real_batch))
    first = train_step(k, [_zero_adv(s) for s in samples])["train/kl_ref"]
    for _ in range(3):
        last = train_step(k, [_zero_adv(s) for s in assemble(k, _batch(real_batch))])
    assert last["train/kl_ref"] < first


def _zero_adv(s):
    s.reward = 0.0
    return s


# ---- real campaigns ---------------------------------------------------------------------------
def _family_dirs(tmp_path: Path) -> tuple[Path, Path]:
    splits = fileops_splits(sft=0, rl=6, heldout=2)
    return write_tasks(splits.rl, tmp_path / "rl"), write_tasks(splits.heldout, tmp_path / "ho")


@pytest.mark.sandbox
@pytest.mark.slow
def test_async_campaign_over_concurrent_sandboxes(tmp_path, warm_policy):
    """One-step async, 3 trials at once, oversampling 50%: every trajectory row records the
    versions that sampled it and is at most 1 version behind its trainer; the engine serves the
    last version; held-out evaluation has k samples per task and a per-category table."""
    from warehouse import open_snapshot

    train_dir, eval_dir = _family_dirs(tmp_path)
    cfg = CampaignConfig(
        campaign="unit-async", runs_dir=tmp_path / "runs", store=tmp_path / "wh",
        policy_path=warm_policy, train_dir=train_dir, eval_dir=eval_dir, eval_samples=2,
        steps=3, tasks_per_step=2, oversample=0.5, rollout_workers=3, async_rollouts=True,
        eval_every=3, lr=1e-4, critic_lr=1e-4, local_engine="thread",
        harness=HarnessConfig(max_turns=2, max_new_tokens=64, seed=0),
    )  # fmt: skip
    evaluations, checkpoints = [], []
    from training.campaign import CampaignHooks

    hooks = CampaignHooks(
        on_evaluation=evaluations.append, on_checkpoint=lambda s, p: checkpoints.append(p)
    )
    result = run_campaign(cfg, hooks=hooks)
    again = run_campaign(cfg.model_copy(update={"steps": 1, "eval_every": 1}))
    assert result.run_id != again.run_id and result.run_dir != again.run_dir
    assert result.run_id.startswith("unit-async-")
    assert [m["weights/version"] for m in result.metrics] == [1.0, 2.0, 3.0]
    assert all(m["rollout/launched"] == 3 and m["rollout/admitted"] == 2 for m in result.metrics)
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 3 + 1  # 3 steps, 1 evaluation; the second run wrote elsewhere
    assert json.loads((result.run_dir / "config.json").read_text())["run_id"] == result.run_id
    assert checkpoints and (checkpoints[-1] / "state.json").is_file()
    with open_snapshot(tmp_path / "wh") as snap:
        rows = snap.rows(
            f"SELECT step, sample, status, weight_version, weight_version_max, staleness "
            f"FROM trajectories WHERE campaign = '{result.run_id}' ORDER BY step, sample"
        )
        evals = snap.rows(
            f"SELECT task_id, attempt, category, weight_version FROM evaluations "
            f"WHERE campaign = '{result.run_id}'"
        )
    assert len(rows) == 3 * 3  # every launched trial is a row, cancelled ones included
    for step in range(3):
        statuses = sorted(r["status"] for r in rows if r["step"] == step)
        assert statuses.count("admitted") + statuses.count("untrainable") == 2
        assert statuses.count("cancelled") == 1
    for r in rows:
        if r["status"] in ("admitted", "untrainable"):
            assert r["staleness"] is not None and 0 <= r["staleness"] <= 1
            assert r["weight_version"] <= r["weight_version_max"] <= r["step"] + 1
    assert (
        sorted((e["task_id"], e["attempt"]) for e in evals)
        == sorted((t, a) for t in {e["task_id"] for e in evals} for a in (0, 1))
        and len(evals) == 4
    )
    assert all(e["weight_version"] == 3 for e in evals)
    summary = evaluations[-1]
    assert summary.samples == 4 and sum(s.samples for s in summary.per_category.values()) == 4
    assert summary.metadata()["run_id"] == result.run_id


@pytest.mark.sandbox
@pytest.mark.slow
def test_resume_reproduces_a_straight_run(tmp_path, warm_policy):
    """4 steps straight == a run killed after its third step (its checkpoint: after step 2),
    resumed from that checkpoint to 4: every metric except wall times is identical (actor,
    critic, both optimizers, RNG, data position, step, engine version and reward scale all
    come back), and metrics.jsonl holds each step once (regression, issue 36: the replayed
    step was logged twice). Synchronous, one trial at a time."""
    train_dir, _ = _family_dirs(tmp_path)
    base = CampaignConfig(
        campaign="unit-resume", store=tmp_path / "wh", policy_path=warm_policy,
        train_dir=train_dir, eval_task_ids=[], steps=4, tasks_per_step=2, rollout_workers=1,
        async_rollouts=False, eval_every=100, checkpoint_every=2, lr=3e-4, critic_lr=3e-4,
        ppo_epochs=2, critic_warmup_steps=1, local_engine="thread",
        harness=HarnessConfig(max_turns=2, max_new_tokens=48, seed=5),
    )  # fmt: skip
    straight = run_campaign(base.model_copy(update={"runs_dir": tmp_path / "a"}))

    class Killed(Exception):
        """Stands for a kill after step 3: what it leaves is what a SIGKILL leaves."""

    def kill_after_the_third_step(step: int, metrics: dict) -> None:
        if step == 2:
            raise Killed

    with pytest.raises(Killed):
        run_campaign(
            base.model_copy(update={"runs_dir": tmp_path / "b"}),
            hooks=CampaignHooks(on_step=kill_after_the_third_step),
        )
    (run_dir,) = (tmp_path / "b").iterdir()
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step-000002"]
    resumed = run_campaign(
        base.model_copy(update={"runs_dir": tmp_path / "b", "resume_from": run_dir})
    )
    assert resumed.run_id == run_dir.name and len(resumed.metrics) == 2

    def comparable(m):  # JSON text: NaN (an undefined explained variance) equals itself
        timing = ("perf/", "rollout/seconds", "step")
        return json.dumps({k: v for k, v in m.items() if not k.startswith(timing)}, sort_keys=True)

    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged] == [0, 1, 2, 3]
    joined = [comparable(m) for m in logged]
    assert joined == [comparable(m) for m in straight.metrics]
    assert "weights/version" not in straight.metrics[0]  # step 0 is critic warm-up
    assert straight.metrics[-1]["weights/version"] == 3.0
    assert len({m["losses/policy"] for m in straight.metrics[1:]}) == 3  # the steps differ
    a = torch.load(straight.run_dir / "checkpoints" / "step-000004" / "critic.pt")
    b = torch.load(run_dir / "checkpoints" / "step-000004" / "critic.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)
