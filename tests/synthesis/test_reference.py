"""The reference agent's pass rate: an endpoint-driven agent (`EndpointAgent`, against the
scripted chat-completions fake over real HTTP) attempts accepted candidates in the sandbox;
its reward share is kept per task and its pass rate per round."""

from __future__ import annotations

import pytest

from synthesis.llm import LLMSettings
from synthesis.operators import Extension, Operator, Parent, RewriteContext
from synthesis.reference import EndpointAgent
from synthesis.rounds import SynthConfig, Timing, build_and_validate, round_stats
from synthesis.sampler import Assignment
from synthesis.validate import ValidationConfig, Verdict
from tests.synthesis.fake_llm import FakeEndpoint, ok
from tests.synthesis.tiny import tiny_parent
from warehouse.records import SynthCandidateRecord

UPPER = "tr a-z A-Z < /app/out.txt > /app/upper_r1.txt"


class UpperOut(Operator):
    name, family = "upper_out", "test"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension(
            "shout the greeting",
            [UPPER],
            "def test_r1_upper():\n"
            "    assert open('/app/upper_r1.txt').read() == open('/app/out.txt').read().upper()\n",
            "Write `/app/out.txt` in upper case to `/app/upper_r1.txt`.",
            ["/app/out.txt"],
            creates=["/app/upper_r1.txt"],
        )


def attempt(replies: list) -> tuple:
    parent = tiny_parent("tiny-reference")
    # the reference agent is the subject here, not the scripted hacks (tests of their own)
    cfg = SynthConfig(validation=ValidationConfig(reruns=1, max_repairs=0, hacks=False))
    a = Assignment(1, 0, parent.hash, "upper_out", "test", parent.root_seed, "x")
    with FakeEndpoint(replies) as server:
        settings = LLMSettings(base_url=server.url, model="ref", timeout_s=10)
        agents: list[EndpointAgent] = []

        def make() -> EndpointAgent:
            agents.append(EndpointAgent(settings, max_turns=5))
            return agents[-1]

        built, v = build_and_validate(cfg, a, parent, UpperOut(), None, lambda: make)
    return built, v, server, agents


@pytest.mark.sandbox
def test_a_solving_agent_scores_full_reward() -> None:
    built, v, server, agents = attempt(
        [
            ok({"command": "echo hello > /app/out.txt"}),
            ok({"command": UPPER + " && cat /app/upper_r1.txt"}),
            ok({"done": True}),
        ]
    )
    assert v.verdict == Verdict.ACCEPTED, v.detail
    assert built.reference_reward == 1.0
    assert [t.agent for t in v.trials][-1] == "reference"
    assert agents[0].commands[0] == "echo hello > /app/out.txt"
    # The command's output came back to the model as the next message.
    assert "HELLO" in server.requests[2]["body"]["messages"][-1]["content"]
    assert "in upper case" in server.requests[0]["body"]["messages"][1]["content"]


@pytest.mark.sandbox
def test_a_partial_agent_scores_its_share() -> None:
    built, v, _, _ = attempt([ok({"command": "echo hello > /app/out.txt"}), ok({"done": True})])
    assert built.reference_reward == 0.5  # the core check passes, the new one does not


def test_round_pass_rate_counts_fully_solved_samples() -> None:
    def row(i: int, reward: float | None) -> SynthCandidateRecord:
        return SynthCandidateRecord(
            campaign="c", candidate_hash=f"{i:064x}", assignment=f"1:{i}", round=1, slot=i,
            parent_hash="0" * 64, root_seed="0" * 64, operator="o", family="f",
            status="accepted", reason="accepted", solution_steps=3, assertion_count=2,
            instruction_chars=10, reference_reward=reward,
        )  # fmt: skip

    stats = round_stats(
        SynthConfig(), 1, 3, [row(0, 1.0), row(1, 0.5), row(2, None)], Timing(), 1.0, 2
    )
    assert stats.reference_sampled == 2 and stats.reference_pass_rate == 0.5
    assert stats.seeds_with_descendants == 2
