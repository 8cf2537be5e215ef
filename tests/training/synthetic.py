"""Synthetic environments for checks of the PPO update that need no sandbox and no engine.

The policy itself samples (the trainer's own forward at the harness temperature, so sampler and
trainer agree); each turn's sampled ids become a `Generation` as the engine would return it, an
episode becomes a `Rollout` (a `TrialResult` whose assertions the environment decides, an
`AgentTrajectory` with its stop reason), and a step's episodes become a `RolloutBatch`. From there
everything is the campaign's own code: `assemble`, then `train_step`.

An environment is a function of the outputs so far: `Continue(observation ids)` (the next
turn's prompt is the stream plus the observation, masked context), or `Finish(passed, total)`
(the policy ended the trial; the verifier's verdict). After `max_turns` without a finish the
episode is cut at the turn limit and the environment's `verdict` scores the state it left.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tasks.results import AssertionResult, AssertionStatus, TrialResult, VerifierReport
from training.campaign import Campaign
from training.campaign_config import CampaignConfig
from training.engine_protocol import Generation
from training.harness import AgentTrajectory, HarnessConfig, Rollout
from training.rollouts import RolloutBatch
from training.tito import TurnRecord


@dataclass(frozen=True)
class Continue:
    observation: list[int]


@dataclass(frozen=True)
class Finish:
    passed: int
    total: int


@dataclass
class Env:
    """A synthetic task: its prompt ids, tokens sampled per turn, the turn limit, what each
    turn leads to (`react`), and the verdict of the state an episode cut at the limit left."""

    prompt: list[int]
    tokens_per_turn: int
    max_turns: int
    react: Callable[[list[list[int]]], Continue | Finish]
    verdict: Callable[[list[list[int]]], Finish] = field(default=lambda outs: Finish(0, 1))


def campaign(policy: Path, tmp_path: Path, tokenizer, **cfg) -> Campaign:
    """A Campaign's trainer half (actor, critic, optimizers) on `policy`, no engine, no pool."""
    from training.critic import load_critic
    from training.policy import load_policy

    config = CampaignConfig(
        **{"async_rollouts": False, "harness": HarnessConfig(temperature=1.0), "r3": False, **cfg}
    )
    actor = load_policy(policy)
    actor.train()
    critic = load_critic(policy)
    return Campaign(
        cfg=config, run_id="synthetic", run_dir=tmp_path, store=tmp_path / "wh",
        policy_path=policy, tasks=[], eval_tasks=[], actor=actor, critic=critic,
        actor_opt=torch.optim.AdamW(actor.parameters(), lr=config.lr, weight_decay=0.0),
        critic_opt=torch.optim.AdamW(critic.parameters(), lr=config.critic_lr, weight_decay=0.0),
        client=None, pool=None, tokenizer=tokenizer,  # type: ignore[arg-type]
        reference=load_policy(policy) if config.kl_coef > 0 else None,
    )  # fmt: skip


@torch.no_grad()
def sample(model, prompts: Sequence[list[int]], n: int, gen: torch.Generator):
    """`n` ids sampled after each (equal-length) prompt at temperature 1, with their logprobs."""
    ids = torch.tensor([list(p) for p in prompts], dtype=torch.long)  # (B, t)
    out, logps = [], []
    for _ in range(n):
        logits = model(input_ids=ids, use_cache=False).logits[:, -1].float()  # (B, V)
        logp = torch.log_softmax(logits, dim=-1)
        tok = torch.multinomial(logp.exp(), 1, generator=gen)  # (B, 1)
        out.append(tok[:, 0])
        logps.append(logp.gather(1, tok)[:, 0])
        ids = torch.cat([ids, tok], dim=1)
    return torch.stack(out, 1).tolist(), torch.stack(logps, 1).tolist()  # (B, n) each


def play(model, env: Env, episodes: int, gen: torch.Generator, *, version: int = 0):
    """`episodes` rollouts of `env`, run in lock-step (every live episode's stream has the same
    length when the environment's observations do)."""
    streams = [list(env.prompt) for _ in range(episodes)]
    outs: list[list[list[int]]] = [[] for _ in range(episodes)]
    turns: list[list[TurnRecord]] = [[] for _ in range(episodes)]
    ends: list[tuple[str, Finish] | None] = [None] * episodes
    for _ in range(env.max_turns):
        live = [i for i in range(episodes) if ends[i] is None]
        if not live:
            break
        by_len: dict[int, list[int]] = {}
        for i in live:
            by_len.setdefault(len(streams[i]), []).append(i)
        for group in by_len.values():
            ids, logps = sample(model, [streams[i] for i in group], env.tokens_per_turn, gen)
            for i, o, lp in zip(group, ids, logps, strict=True):
                g = Generation(
                    rid=uuid.uuid4().hex, prompt_ids=list(streams[i]), output_ids=o,
                    output_logprobs=lp, finish="stop", weight_version=str(version),
                    routed_experts=None, routed_experts_start=0,
                )  # fmt: skip
                turns[i].append(TurnRecord(generation=g))
                outs[i].append(o)
                streams[i] = streams[i] + o
                what = env.react(outs[i])
                if isinstance(what, Finish):
                    ends[i] = ("finished", what)
                else:
                    streams[i] = streams[i] + what.observation
    out = []
    for i in range(episodes):
        stop, verdict = ends[i] or ("turn_limit", env.verdict(outs[i]))
        out.append(rollout(turns[i], stop, verdict, slot=i))
    return out


def rollout(turns: list[TurnRecord], stop: str, verdict: Finish, *, slot: int = 0) -> Rollout:
    """A finished trial: `verdict.passed` of `verdict.total` assertions pass."""
    report = VerifierReport(
        assertions=[
            AssertionResult(
                name=f"a{j}",
                status=AssertionStatus.PASSED if j < verdict.passed else AssertionStatus.FAILED,
            )
            for j in range(verdict.total)
        ]
    )
    trial = TrialResult(
        trial_id=uuid.uuid4().hex, task_id="synthetic", task_hash="synthetic", agent="policy",
        backend="none", report=report,
    )  # fmt: skip
    traj = AgentTrajectory(task_id="synthetic", turns=turns, stop=stop)  # type: ignore[arg-type]
    return Rollout(trial=trial, trajectory=traj, sample=slot)


def batch_of(rollouts: list[Rollout], step: int = 0) -> RolloutBatch:
    return RolloutBatch(step=step, want=len(rollouts), launched=len(rollouts), admitted=rollouts)


def mean_reward(rollouts: Sequence[Rollout], *, truncation: str = "zero") -> float:
    """Mean passing fraction, a truncated episode counting 0 unless `truncation` is 'scored'."""
    total = 0.0
    for r in rollouts:
        if r.trajectory.stop != "finished" and truncation != "scored":
            continue
        total += r.trial.passed / max(1, r.trial.total)
    return total / max(1, len(rollouts))


ACTIONS = list(range(600, 608))
"""The synthetic environments' action vocabulary: a warm-started policy spreads its mass evenly
over these 8 ids (each about 1/8), as an SFT policy spreads it over a few plausible commands."""


def warm_up(policy: Path, out: Path, observations: Sequence[list[int]], prompt: list[int],
            *, steps: int = 150, seed: int = 0) -> Path:  # fmt: skip
    """A copy of `policy` fine-tuned to sample uniformly from ACTIONS after `prompt` followed by
    any mix of actions and `observations`: the starting point of the ladder (a random tiny
    policy spreads its mass over 1024 ids, so no update moves a choice by much per step)."""
    from training.chat_tokenizer import load_chat_tokenizer, save_chat_tokenizer
    from training.policy import load_policy, save_policy

    model = load_policy(policy)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    acts = torch.tensor(ACTIONS)

    def pick(n: int) -> list[int]:
        return acts[torch.randint(len(ACTIONS), (n,), generator=g)].tolist()

    for _ in range(steps):
        rows, masks = [], []
        for _ in range(32):
            ids, mask = list(prompt), [False] * len(prompt)
            for _ in range(int(torch.randint(1, 5, (1,), generator=g))):
                k = int(torch.randint(1, 4, (1,), generator=g))
                ids += pick(k)
                mask += [True] * k
                obs = observations[int(torch.randint(len(observations), (1,), generator=g))]
                ids += obs
                mask += [False] * len(obs)
            rows.append(ids[:24] + [0] * (24 - len(ids[:24])))
            masks.append((mask[:24] + [False] * 24)[:24])
        x = torch.tensor(rows)  # (32, 24)
        m = torch.tensor(masks)[:, 1:]  # (32, 23): position p is predicted from p - 1
        logits = model(input_ids=x, use_cache=False).logits[:, :-1]  # (32, 23, V)
        loss = torch.nn.functional.cross_entropy(logits[m], x[:, 1:][m])
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_policy(model, out)
    save_chat_tokenizer(load_chat_tokenizer(policy), out)
    return out
