"""The reference agent: how often a fixed agent solves a sample of each round's accepted tasks.

Difficulty measured by behaviour, not by counting lines. When a reference agent is configured
(a policy checkpoint, wired by the CLI, or an OpenAI-compatible endpoint: `EndpointAgent`),
the round engine runs it once on up to `SynthConfig.reference_sample` accepted candidates per
round, in a fresh sandbox like any trial, and stores its share of the dense reward per task
(`synth_candidates.reference_reward`) and the share of sampled tasks it fully solved per round
(`synth_rounds.reference_pass_rate`). A trial that failed for infrastructure is not counted.

`EndpointAgent` drives any chat-completions endpoint with a provider-neutral JSON protocol:
each turn the model answers `{"command": "<shell command>"}` or `{"done": true}`; the command
runs in the trial's long-lived session and its output (clipped) is the next user message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import openai

from sandbox import Agent, AgentOutcome, Sandbox, run_trial
from synthesis.llm import LLMSettings
from tasks.model import Task
from tasks.results import TrialResult

AgentFactory = Callable[[], Agent]

SYSTEM = """You are a terminal agent solving a task in a Linux sandbox. Each turn reply with ONE
JSON object: {"command": "<one shell command to run>"} to act, or {"done": true} when the task
is complete. You will see each command's exit status and output."""


class EndpointAgent:
    """An `sandbox.Agent` whose every command comes from a chat-completions endpoint."""

    name = "reference"

    def __init__(
        self,
        settings: LLMSettings,
        *,
        max_turns: int = 40,
        command_timeout_s: float = 60.0,
        max_output_chars: int = 2000,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.settings = settings
        self.max_turns = max_turns
        self.command_timeout_s = command_timeout_s
        self.max_output_chars = max_output_chars
        self.client = client or openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            timeout=settings.timeout_s,
            max_retries=2,
        )
        self.commands: list[str] = []

    def _next(self, messages: list[dict[str, str]]) -> dict:
        resp = self.client.chat.completions.create(  # type: ignore[call-overload]
            model=self.settings.model,
            messages=messages,
            temperature=self.settings.temperature,
            response_format={"type": "json_object"},
        )
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        try:
            reply = json.loads(text)
        except json.JSONDecodeError:
            return {"invalid": text[:200]}
        return reply if isinstance(reply, dict) else {"invalid": text[:200]}

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Working directory: {task.environment.workdir}\n\n"
             f"{task.instruction}"},
        ]  # fmt: skip
        session = sandbox.session()
        for _ in range(self.max_turns):
            if time.monotonic() >= deadline:
                return AgentOutcome(timed_out=True, detail="reference agent: out of time")
            try:
                reply = self._next(messages)
            except openai.OpenAIError as e:
                return AgentOutcome(detail=f"reference agent: endpoint failed: {e}"[:500])
            messages.append({"role": "assistant", "content": json.dumps(reply)})
            if reply.get("done"):
                return AgentOutcome(exit_code=0, detail=f"done after {len(self.commands)} cmds")
            command = reply.get("command")
            if not isinstance(command, str) or not command.strip():
                messages.append(
                    {"role": "user", "content": 'Reply with {"command": "..."} or {"done": true}.'}
                )
                continue
            self.commands.append(command)
            left = max(0.1, min(self.command_timeout_s, deadline - time.monotonic()))
            r = session.run(command, timeout_s=left)
            out = (r.stdout + r.stderr)[-self.max_output_chars :]
            messages.append({"role": "user", "content": f"exit status {r.exit_code}\n{out}"})
        return AgentOutcome(exit_code=None, detail=f"reference agent: {self.max_turns} turns used")


def reference_trial(task: Task, make_agent: AgentFactory, backend: str) -> TrialResult | None:
    """One reference-agent trial; None when it failed for infrastructure (not evidence)."""
    r = run_trial(task, make_agent(), backend)
    return r if r.rewardable else None


def reward_share(r: TrialResult) -> float:
    return r.passed / r.total if r.total else 0.0
