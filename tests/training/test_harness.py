"""The agent harness: multi-turn TITO rollouts with the warm-started policy on the local engine,
a 300+ turn loop, deadlines, and (with the local sandbox) a real verified trial."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sandbox.base import ExecResult
from training.chat_format import IM_END, ToolCall, render_assistant_text
from training.chat_tokenizer import encode_text
from training.engine_protocol import GenerateRequest, Generation
from training.harness import HarnessConfig, PolicyAgent, rollout_trial
from training.tito import assemble_trial, audit_sample

pytestmark = pytest.mark.torch


class FakeSandbox:
    """Fake at the sandbox boundary (stands for a bubblewrap/Docker sandbox): its session
    records commands and answers each with a fixed output. Used where the test is about the
    loop, not the shell.
    """

    id = "fake"

    def __init__(self) -> None:
        self.commands: list[str] = []

    def session(self) -> FakeSandbox:
        return self

    def run(self, command: str, *, timeout_s: float | None = None):
        self.commands.append(command)
        return ExecResult(
            exit_code=0, stdout=f"ran {len(self.commands)}\n", stderr="", duration_s=0.0
        )


class ScriptedEngine:
    """Fake at the inference-engine boundary (stands for SGLang on a GPU): always samples the
    canonical encoding of one tool call, with made-up logprobs and routing rows. Requests whose
    number is in `abort_at` answer finish=abort (a weight publish aborted them); `version`
    is the weight version it reports."""

    def __init__(self, tokenizer, layers: int = 2, k: int = 2, abort_at=()) -> None:
        text = render_assistant_text(
            reasoning="Again.", content="", calls=[ToolCall("shell", {"command": "echo hi"})]
        )
        self.out = encode_text(tokenizer, text + IM_END)
        self.layers, self.k = layers, k
        self.requests: list[GenerateRequest] = []
        self.abort_at = set(abort_at)
        self.version = "0"

    def generate(self, req: GenerateRequest) -> Generation:
        self.requests.append(req)
        if len(self.requests) in self.abort_at:
            self.version = str(int(self.version) + 1)  # the publish that aborted it
            return Generation(
                rid=req.rid or "", prompt_ids=list(req.input_ids), output_ids=self.out[:3],
                output_logprobs=[-0.5] * 3, finish="abort", weight_version="0",
                routed_experts=None, routed_experts_start=req.routed_experts_start_len,
            )  # fmt: skip
        rows = len(req.input_ids) + len(self.out) - 1 - req.routed_experts_start_len
        return Generation(
            rid=str(len(self.requests)),
            prompt_ids=list(req.input_ids),
            output_ids=list(self.out),
            output_logprobs=[-0.5] * len(self.out),
            finish="stop",
            weight_version=self.version,
            routed_experts=np.zeros((rows, self.layers, self.k), np.int32),
            routed_experts_start=req.routed_experts_start_len,
        )


def _check_tito_trajectory(traj, im_end_id, layers, k):
    prev: list[int] = []
    for t, turn in enumerate(traj.turns):
        g = turn.generation
        if t:
            assert g.prompt_ids[: len(prev)] == prev  # the prompt extends the stream exactly
            assert g.routed_experts_start == len(prev) - 1
        prev = g.prompt_ids + g.output_ids
    sample = assemble_trial(traj.turns, im_end_id=im_end_id, num_layers=layers, top_k=k)
    report = audit_sample(sample, traj.turns)
    assert report.drift_rate == 0.0 and report.span_mismatches == 0
    assert report.cases == {**traj.boundary_counts()}
    assert len(sample) == len(prev)
    return sample, report


def test_three_hundred_turns(tokenizer):
    engine = ScriptedEngine(tokenizer)
    agent = PolicyAgent(engine, tokenizer, HarnessConfig(max_turns=320, max_context_tokens=10**6))
    box = FakeSandbox()
    traj = agent.rollout(box, "t", "Say hi forever.", time.monotonic() + 600)
    assert traj.stop == "turn_limit" and len(traj.turns) == 320 and len(box.commands) == 320
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    _, report = _check_tito_trajectory(traj, im_end, 2, 2)
    assert report.cases["exact_prefix"] == 319


def test_a_turn_aborted_by_a_publish_is_resent_on_the_new_version(tokenizer):
    """The second request is aborted (as `pause_generation("abort")` does during a publish):
    the turn is sent again with the same prompt and a fresh rid, only the completed answer is
    kept, and it carries the new version; the aborted partial output is never trained on."""
    engine = ScriptedEngine(tokenizer, abort_at={2})
    agent = PolicyAgent(engine, tokenizer, HarnessConfig(max_turns=3))
    traj = agent.rollout(FakeSandbox(), "t", "x", time.monotonic() + 60)
    assert len(traj.turns) == 3 and traj.retried_turns == 1 and traj.stop == "turn_limit"
    assert engine.requests[1].input_ids == engine.requests[2].input_ids
    assert engine.requests[1].rid != engine.requests[2].rid
    assert traj.weight_versions() == [0, 1, 1]
    assert all(t.generation.finish != "abort" for t in traj.turns)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    _check_tito_trajectory(traj, im_end, 2, 2)
    # every request aborted: the trial ends as 'aborted' after max_abort_retries re-sends
    always = ScriptedEngine(tokenizer, abort_at=set(range(1, 100)))
    stuck = PolicyAgent(always, tokenizer, HarnessConfig(max_turns=3, max_abort_retries=2))
    t2 = stuck.rollout(FakeSandbox(), "t", "x", time.monotonic() + 60)
    assert t2.stop == "aborted" and not t2.turns and len(always.requests) == 3


def test_a_cancelled_trial_raises_trial_cancelled(tokenizer):
    from training.harness import TrialCancelled

    engine = ScriptedEngine(tokenizer)
    agent = PolicyAgent(engine, tokenizer, HarnessConfig(max_turns=5))
    box = FakeSandbox()
    original = box.run

    def run_then_cancel(command, *, timeout_s=None):
        agent.cancel.set()  # a straggler cancel arrives while the first command runs
        return original(command, timeout_s=timeout_s)

    box.run = run_then_cancel
    with pytest.raises(TrialCancelled):
        agent.rollout(box, "t", "x", time.monotonic() + 60)
    assert len(box.commands) == 1 and len(engine.requests) == 1


def test_deadline_and_context_limits(tokenizer):
    engine = ScriptedEngine(tokenizer)
    agent = PolicyAgent(engine, tokenizer, HarnessConfig(max_turns=5))
    assert agent.rollout(FakeSandbox(), "t", "x", time.monotonic() - 1).stop == "agent_timeout"
    small = PolicyAgent(engine, tokenizer, HarnessConfig(max_context_tokens=64))
    assert small.rollout(FakeSandbox(), "t", "x", time.monotonic() + 60).stop == "context_limit"


class CommandsEngine(ScriptedEngine):
    """The scripted engine sampling one tool call per command of `commands`, in order, then
    an answer without a tool call."""

    def __init__(self, tokenizer, commands: list[str]) -> None:
        super().__init__(tokenizer)
        calls = [[ToolCall("shell", {"command": c})] for c in commands] + [[]]
        self.outs = [
            encode_text(
                tokenizer, render_assistant_text(reasoning="", content=".", calls=c) + IM_END
            )
            for c in calls
        ]

    def generate(self, req: GenerateRequest) -> Generation:
        self.out = self.outs[len(self.requests)]
        return super().generate(req)


# The tool cannot send a key, so a command that waits for one only burns its timeout.
WAITS_FOR_A_KEY = [
    "cat",  # reads its input
    "read -p 'name? ' n; echo got=${n:-nothing}",  # a prompt
    "cd /tmp",
    # a program that pages like git or man: $PAGER, else `more`, which reads keys from the tty
    "python3 -c \"import os, subprocess; subprocess.run([os.environ.get('PAGER') or 'more',"
    " '/etc/os-release'])\" | head -c 0; seq 200 > n; ${PAGER:-more} n",
    "pwd",
    "exit 3",  # ends the shell: the next command gets a new one
    "${PAGER:-more} /tmp/n",
]


@pytest.mark.sandbox
def test_no_command_waits_for_a_key_the_tool_cannot_send(tokenizer):
    """Each command that would wait on the terminal returns at once (end of input; pagers
    print), in the trial's shell (the `cd` holds), and in the one after the agent's `exit`."""
    from sandbox import get_backend
    from tests.sandbox.images import tools_task

    engine = CommandsEngine(tokenizer, WAITS_FOR_A_KEY)
    timeout = 15.0
    agent = PolicyAgent(engine, tokenizer, HarnessConfig(command_timeout_s=timeout))
    sb = get_backend("local").open(tools_task("no-keys"))
    try:
        t0 = time.monotonic()
        traj = agent.rollout(sb, "no-keys", "x", time.monotonic() + 120)
        took = time.monotonic() - t0
    finally:
        sb.stop()
    tools = [m.content for m in traj.messages if m.role == "tool"]
    assert traj.stop == "finished" and len(tools) == len(WAITS_FOR_A_KEY), tools
    assert not any("timed_out" in t for t in tools), tools
    assert "got=nothing" in tools[1]
    assert "200" in tools[3] and tools[4].endswith("/tmp"), tools
    assert "exit_code: 3" in tools[5] and "200" in tools[6], tools
    assert took < timeout, took  # one wait would take the whole command timeout


@pytest.fixture(scope="module")
def warm_engine(warm_policy):
    from training.engine_local import LocalEngine

    with LocalEngine(warm_policy, seed=0) as eng:
        yield eng


def _agent(warm_engine, **cfg):
    from training.chat_tokenizer import load_chat_tokenizer
    from training.engine_protocol import EngineClient

    tok = load_chat_tokenizer(warm_engine.model_path)
    mc = warm_engine.model.config
    client = EngineClient(
        warm_engine.base_url, num_layers=mc.num_hidden_layers, top_k=mc.num_experts_per_tok
    )
    return PolicyAgent(client, tok, HarnessConfig(**cfg)), tok


def test_warm_started_policy_rolls_out_tool_calls(warm_engine):
    from tasks.corpus import load_seeds

    task = sorted(load_seeds(), key=lambda t: t.id)[0]
    agent, tok = _agent(warm_engine, max_turns=4, max_new_tokens=200, seed=0, temperature=0.7)
    box = FakeSandbox()
    traj = agent.rollout(box, task.id, task.instruction, time.monotonic() + 300)
    assert traj.turns and traj.commands == len(box.commands)
    assert traj.commands >= 1, "the warm start should emit at least one well-formed tool call"
    mc = warm_engine.model.config
    _check_tito_trajectory(
        traj, tok.convert_tokens_to_ids(IM_END), mc.num_hidden_layers, mc.num_experts_per_tok
    )


@pytest.mark.sandbox
@pytest.mark.slow
def test_real_sandbox_trial_is_verified_per_assertion(warm_engine):
    from tasks.corpus import load_seeds

    task = next(t for t in load_seeds() if t.id == "vc-gitignore-untrack")
    agent, tok = _agent(warm_engine, max_turns=3, max_new_tokens=200, seed=1, temperature=0.7)
    rollout = rollout_trial(task, agent, backend="local")
    assert rollout.trial.total > 0, rollout.trial.failure_detail
    assert len(rollout.trial.assertions) == rollout.trial.total
    assert rollout.trajectory.turns
    mc = warm_engine.model.config
    _check_tito_trajectory(
        rollout.trajectory,
        tok.convert_tokens_to_ids(IM_END),
        mc.num_hidden_layers,
        mc.num_experts_per_tok,
    )
