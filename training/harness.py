"""The agent harness: a multi-turn tool-calling loop over a sandbox trial.

Each turn the model, served by an SGLang-protocol engine, emits a `shell` tool call; the harness
runs the command in the trial's sandbox and returns the output as the next message, until the
model answers without a tool call, the turn limit (300+ supported), the context limit, or the
task's agent timeout. `sandbox.run_trial` then runs the held-out verifier, per assertion.

What the model sampled travels as token ids and is never re-tokenized: in `tito` prompt mode
(the default) the next prompt is the previous stream (prompt + sampled ids) plus the encoding
of the new messages only, joined by `training.tito.resolve_boundary`, whose case is recorded per
turn. `retokenize` mode re-renders and re-encodes the whole history every turn, the common
harness behaviour the paper measures against; it exists to measure drift, not to train on.

Commands are typed into the trial's long-lived shell (`sandbox.session().run`), so cwd, exports
and background processes persist between turns as in a terminal. The tool has no way to type
into a program that waits for the terminal, so none waits for it (`tool_command`).

Two ways a turn's request ends early, told apart by the agent's `cancel` event:
- a weight publish aborts every in-flight request (`pause_generation("abort")`); the turn is
  sent again, unchanged, and runs on the new weights once generation continues. An aborted
  answer is never kept, so every kept turn ran on exactly one weight version (recorded).
- a straggler cancel sets `cancel` and aborts the trial's request by rid: the agent raises
  `TrialCancelled` (a BaseException, like KeyboardInterrupt, so `run_trial` skips the verifier
  and its `finally` stops the sandbox) and the trial becomes a CANCELLED row.
"""

from __future__ import annotations

import shlex
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from training.chat_format import (
    GENERATION_PROMPT,
    IM_END,
    SHELL_TOOL,
    Message,
    format_observation,
    parse_assistant_turn,
)
from training.chat_tokenizer import decode_ids, encode_text
from training.engine_protocol import EngineClient, GenerateRequest, Generation, SamplingParams
from training.tito import (
    Boundary,
    BoundaryCase,
    TurnRecord,
    new_messages_text,
    resolve_boundary,
)
from training.trajectories import SYSTEM_PROMPT

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from sandbox import AgentOutcome, Sandbox
    from tasks.model import Task
    from tasks.results import TrialResult

StopReason = Literal[
    "finished", "turn_limit", "context_limit", "agent_timeout", "aborted", "engine_error"
]
TRUNCATED_STOPS: frozenset[str] = frozenset({"turn_limit", "context_limit", "agent_timeout"})
"""The trial was cut by a limit, not ended by the policy: what it earns is a campaign setting
(`CampaignConfig.truncation`), since scoring it like a finish makes running out the clock free."""
INFRASTRUCTURE_STOPS: frozenset[str] = frozenset({"engine_error", "aborted"})
"""The engine failed mid-trial, or a turn was aborted on every re-send: no evidence about the
policy, so `rollout_trial` makes such a trial an ENGINE_ERROR (infrastructure) result."""


TOOL_SHELL_SETUP = (
    '[ -n "$__t1_tool" ] || { export PAGER=cat GIT_PAGER=cat MANPAGER=cat SYSTEMD_PAGER=cat; '
    "__t1_tool=1; }"
)
"""Typed before each command, acting once per shell (the first command's, and again after the
agent's `exit` restarted it): pagers print (`git log`, `git -p`, `man` page through `less`,
which reads its keys from /dev/tty whatever the input). The agent may export others."""


def tool_command(command: str) -> str:
    """What the shell runs for one tool call (pure): the command evaluated with /dev/null for
    its input, in the shell itself (`cd`, exports and jobs persist; parsed on its own, so a
    here-document left open is the command's alone). A bare `cat`, a REPL or a prompt reads
    end-of-file and returns at once instead of waiting out `command_timeout_s` for a key the
    tool cannot send."""
    return f"{TOOL_SHELL_SETUP}; eval {shlex.quote(command)} </dev/null"


class TrialCancelled(BaseException):  # noqa: N818 - a signal like KeyboardInterrupt, not an error
    """Raised by the agent when its trial was cancelled (straggler cancel): it must not be
    verified, scored or caught by `except Exception` on its way out of `run_trial`."""


class HarnessConfig(BaseModel):
    """How the agent loop talks to the engine and the sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(300, ge=1, description="assistant turns before the trial is cut")
    max_new_tokens: int = Field(384, ge=1, description="sampled tokens per turn")
    max_context_tokens: int = Field(16384, ge=16, description="stream length the policy takes")
    temperature: float = 1.0
    top_p: float = 1.0
    prompt_mode: Literal["tito", "retokenize"] = "tito"
    observation_role: Literal["tool", "user"] = Field(
        "tool", description="'user' makes the template prune earlier reasoning every turn"
    )
    command_timeout_s: float = Field(60.0, gt=0, description="per command, within the deadline")
    max_observation_chars: int = 2000
    return_routed_experts: bool = True
    system_prompt: str = SYSTEM_PROMPT
    seed: int | None = Field(None, description="base sampling seed; turn t uses seed + t")
    max_abort_retries: int = Field(
        8, ge=0, description="re-sends of one turn whose request a weight publish aborted"
    )


@dataclass
class AgentTrajectory:
    """Everything the agent did in one trial: engine turns (ids) and the parsed messages."""

    task_id: str
    turns: list[TurnRecord] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    stop: StopReason = "finished"
    commands: int = 0
    malformed_tool_calls: int = 0
    retried_turns: int = 0
    """Turns re-sent because a weight publish aborted their request."""
    detail: str = ""

    def weight_versions(self) -> list[int]:
        """The weight version of each kept turn (what generated its sampled ids)."""
        return [version_number(t.generation.weight_version) for t in self.turns]

    def boundary_counts(self) -> dict[str, int]:
        counts = {c.value: 0 for c in BoundaryCase}
        for t in self.turns:
            if t.boundary is not None:
                counts[t.boundary.value] += 1
        return counts


def render_conversation(
    tokenizer: PreTrainedTokenizerFast, messages: Sequence[Message], *, generation_prompt: bool
) -> str:
    """The chat template applied to `messages` with the shell tool declared."""
    text = tokenizer.apply_chat_template(
        [m.as_dict() for m in messages],
        tools=[SHELL_TOOL],
        add_generation_prompt=generation_prompt,
        tokenize=False,
    )
    return cast(str, text)  # tokenize=False: the rendered string


class PolicyAgent:
    """An `sandbox.Agent` driving the policy through an engine; keeps each trial's trajectory.

    `run` follows the Agent protocol (sandbox, task, deadline) and returns an AgentOutcome; the
    trajectory of the latest run is `last_trajectory`.
    """

    name = "policy"

    def __init__(
        self,
        engine: EngineClient,
        tokenizer: PreTrainedTokenizerFast,
        config: HarnessConfig | None = None,
        *,
        cancel: threading.Event | None = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.config = config or HarnessConfig()
        self.im_end_id = int(cast(int, tokenizer.convert_tokens_to_ids(IM_END)))
        self.last_trajectory: AgentTrajectory | None = None
        self.cancel = cancel or threading.Event()
        self.current_rid: str | None = None
        """The rid of the request in flight (a canceller aborts it by rid)."""

    # The Agent protocol -------------------------------------------------------------------
    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        from sandbox import AgentOutcome

        traj = self.rollout(sandbox, task.id, task.instruction, deadline)
        return AgentOutcome(
            exit_code=0 if traj.stop == "finished" else None,
            timed_out=traj.stop == "agent_timeout",
            detail=f"{traj.stop}: {traj.detail}"[-2000:],
        )

    # The loop ---------------------------------------------------------------------------
    def rollout(
        self, sandbox: Any, task_id: str, instruction: str, deadline: float
    ) -> AgentTrajectory:
        """Run the multi-turn loop in `sandbox`'s session until a stop condition; never raises
        for the model's own mistakes (a malformed tool call becomes an error observation).
        Raises TrialCancelled once `cancel` is set."""
        cfg = self.config
        tok = self.tokenizer
        traj = AgentTrajectory(task_id=task_id)
        self.last_trajectory = traj
        traj.messages = [
            Message(role="system", content=cfg.system_prompt),
            Message(role="user", content=instruction),
        ]
        stream: list[int] = []
        for turn in range(cfg.max_turns):
            self._check_cancel()
            if time.monotonic() >= deadline:
                traj.stop = "agent_timeout"
                return traj
            prompt, boundary = self._next_prompt(traj, stream, first=turn == 0)
            if len(prompt) + cfg.max_new_tokens > cfg.max_context_tokens:
                traj.stop = "context_limit"
                return traj
            start = max(0, len(stream) - 1) if (turn > 0 and cfg.prompt_mode == "tito") else 0
            req = GenerateRequest(
                input_ids=prompt,
                sampling_params=SamplingParams(
                    max_new_tokens=cfg.max_new_tokens,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    stop_token_ids=[self.im_end_id],
                    sampling_seed=None if cfg.seed is None else cfg.seed + turn,
                ),
                return_logprob=True,
                return_routed_experts=cfg.return_routed_experts,
                routed_experts_start_len=start,
            )
            try:
                gen = self._generate(req, traj)
            except Exception as e:  # noqa: BLE001 - an engine failure ends this trial only
                traj.stop = "engine_error"
                traj.detail = f"{type(e).__name__}: {e}"
                return traj
            if gen is None:
                traj.stop = "aborted"
                traj.detail = f"turn {turn} aborted {cfg.max_abort_retries + 1} times"
                return traj
            traj.turns.append(TurnRecord(generation=gen, boundary=boundary))
            stream = prompt + gen.output_ids
            parsed = parse_assistant_turn(decode_ids(tok, gen.output_ids))
            traj.messages.append(parsed.message)
            if parsed.malformed_tool_call is not None and not parsed.message.tool_calls:
                traj.malformed_tool_calls += 1
                self._observe(traj, f"error: {parsed.malformed_tool_call}")
                continue
            if not parsed.message.tool_calls:
                traj.stop = "finished"
                return traj
            for call in parsed.message.tool_calls:
                command = call.arguments.get("command")
                if call.name != "shell" or not isinstance(command, str):
                    traj.malformed_tool_calls += 1
                    self._observe(traj, "error: only shell(command: str) is available")
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    traj.stop = "agent_timeout"
                    return traj
                self._check_cancel()
                r = sandbox.session().run(
                    tool_command(command), timeout_s=min(cfg.command_timeout_s, remaining)
                )
                traj.commands += 1
                self._observe(
                    traj,
                    format_observation(
                        exit_code=r.exit_code,
                        stdout=r.stdout,
                        stderr=r.stderr,
                        timed_out=r.timed_out,
                        max_chars=cfg.max_observation_chars,
                    ),
                )
        traj.stop = "turn_limit"
        return traj

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise TrialCancelled(
                f"trial of {self.last_trajectory and self.last_trajectory.task_id}"
            )

    def _generate(self, req: GenerateRequest, traj: AgentTrajectory) -> Generation | None:
        """One turn's engine call; a request aborted by a weight publish is sent again (fresh
        rid) until it completes on one version. None after `max_abort_retries` re-sends."""
        for attempt in range(self.config.max_abort_retries + 1):
            self._check_cancel()
            self.current_rid = uuid.uuid4().hex
            gen = self.engine.generate(req.model_copy(update={"rid": self.current_rid}))
            self.current_rid = None
            if gen.finish != "abort":
                return gen
            self._check_cancel()  # aborted by a straggler cancel, not by a publish
            if attempt < self.config.max_abort_retries:
                traj.retried_turns += 1
        return None

    def _observe(self, traj: AgentTrajectory, text: str) -> None:
        traj.messages.append(Message(role=self.config.observation_role, content=text))

    def _next_prompt(
        self, traj: AgentTrajectory, stream: list[int], *, first: bool
    ) -> tuple[list[int], BoundaryCase | None]:
        if first or self.config.prompt_mode == "retokenize":
            rendered = render_conversation(self.tokenizer, traj.messages, generation_prompt=True)
            return encode_text(self.tokenizer, rendered), None
        turn_start = len(traj.turns[-1].generation.prompt_ids)
        boundary = tito_next_prompt(
            self.tokenizer, traj.messages, stream, im_end_id=self.im_end_id, turn_start=turn_start
        )
        return stream + boundary.append_ids, boundary.case


def tito_next_prompt(
    tokenizer: PreTrainedTokenizerFast,
    messages: Sequence[Message],
    stream: Sequence[int],
    *,
    im_end_id: int,
    turn_start: int | None = None,
) -> Boundary:
    """How to extend `stream` (every id so far) with the messages appended since its last turn.

    Re-renders the conversation to test the prefix relations (Cases 6-8); whatever the case, the
    ids already in `stream` are kept and only `append_ids` are new. With `turn_start` (where the
    last sampled output begins in `stream`) only a window is re-rendered: the opening messages
    through the first user message, then everything from the last assistant message on. For this
    template a message renders the same in the window as in the full history (its text depends
    only on itself and on whether a user message follows it), so the window tests the boundary
    the last turn created at constant cost per turn instead of re-rendering 300 turns each turn.
    """
    if not stream:
        raise ValueError("tito_next_prompt needs a non-empty stream")
    decode = lambda ids: decode_ids(tokenizer, list(ids))  # noqa: E731 - a one-line adapter
    closed = stream[-1] == im_end_id
    if turn_start is None:
        rendered = render_conversation(tokenizer, messages, generation_prompt=True)
        n_closed = sum(1 for i in stream if i == im_end_id) + (0 if closed else 1)
        delta = new_messages_text(rendered, closed_messages=n_closed, stream_closed=closed)
        return resolve_boundary(
            stream, encode_text(tokenizer, rendered), encode_text(tokenizer, delta), decode
        )
    first_user = next(i for i, m in enumerate(messages) if m.role == "user")
    last_asst = max(i for i, m in enumerate(messages) if m.role == "assistant")
    head = render_conversation(tokenizer, messages[: first_user + 1], generation_prompt=False)
    window = render_conversation(
        tokenizer, [*messages[: first_user + 1], *messages[last_asst:]], generation_prompt=True
    )
    if not window.startswith(head):
        raise ValueError("template is not append-only over the opening messages")
    tail = window[len(head) :]  # "<|im_start|>assistant\n" + last turn + new messages
    opener = encode_text(tokenizer, GENERATION_PROMPT)
    local_start = turn_start - len(opener)
    if local_start < 0 or list(stream[local_start:turn_start]) != opener:
        raise ValueError("turn_start does not follow the assistant generation prompt")
    # the new messages start after the first block of the tail (the last assistant turn)
    delta = new_messages_text(tail, closed_messages=1, stream_closed=closed)
    return resolve_boundary(
        stream[local_start:], encode_text(tokenizer, tail), encode_text(tokenizer, delta), decode
    )


def rendered_history(
    tokenizer: PreTrainedTokenizerFast, messages: Sequence[Message]
) -> tuple[list[int], list[bool]]:
    """The final conversation as a text pipeline trains on it: re-rendered, re-encoded.

    Returns canonical ids of the rendering (no generation prompt) and a mask that is True on
    the tokens of every assistant message body through its `<|im_end|>` (what an
    assistant-only loss mask covers). This is the "neither TITO" stream of the measurement.
    """
    text = render_conversation(tokenizer, messages, generation_prompt=False)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    header = "<|im_start|>assistant\n"
    spans: list[tuple[int, int]] = []
    pos = text.find(header)
    while pos >= 0:
        start = pos + len(header)
        end = text.find(IM_END, start)
        end = len(text) if end < 0 else end + len(IM_END)
        spans.append((start, end))
        pos = text.find(header, end)
    mask = [any(s <= a and b <= e for s, e in spans) for a, b in enc["offset_mapping"]]
    return list(enc["input_ids"]), mask


@dataclass
class Rollout:
    """A finished trial: the verifier's result and the agent's trajectory."""

    trial: TrialResult
    trajectory: AgentTrajectory
    sample: int = 0
    """Launch slot within its step (unique per step: the warehouse row's `sample`)."""


def rollout_trial(task: Task, agent: PolicyAgent, *, backend: str = "local") -> Rollout:
    """Run one sandbox trial of `task` with `agent`, then the held-out verifier.

    Never raises for the trial's failures; a cancelled trial (TrialCancelled) is returned as a
    CANCELLED result without a verdict, its sandbox already stopped by `run_trial`.
    """
    from sandbox import run_trial
    from tasks.results import FailureMode, TrialResult

    agent.last_trajectory = None
    try:
        trial = run_trial(task, agent, backend=backend)
    except TrialCancelled as e:
        trial = TrialResult(
            trial_id=uuid.uuid4().hex,
            task_id=task.id,
            task_hash=task.content_hash,
            agent=agent.name,
            backend=backend,
            failure_mode=FailureMode.CANCELLED,
            failure_detail=f"cancelled: {e}",
        )
    traj = agent.last_trajectory or AgentTrajectory(
        task_id=task.id, stop="engine_error", detail=trial.failure_detail
    )
    if traj.stop in INFRASTRUCTURE_STOPS and trial.rewardable:
        # the verifier ran on whatever state the broken turn left: not a verdict on the policy
        trial.failure_mode = FailureMode.ENGINE_ERROR
        trial.failure_detail = f"{traj.stop}: {traj.detail}"[-1000:]
    return Rollout(trial=trial, trajectory=traj)


def version_number(v: str | None) -> int:
    """An engine weight version as the int the campaign publishes (0 when unset)."""
    return int(v) if v is not None and v.isdigit() else 0
