"""Chat messages, the Jinja chat template, and parsing a sampled assistant turn back into a message.

The template follows the Qwen3 family: `<|im_start|>role\\n...<|im_end|>\\n` blocks, tool calls as
`<tool_call>\\n{json}\\n</tool_call>`, reasoning as `<think>\\n...\\n</think>\\n\\n`, and reasoning
pruned from every assistant message before the last user message. It is deliberately *not*
idempotent over a parse/re-render round trip, exactly like production templates: reasoning is
stripped of surrounding newlines, content is trimmed and tool-call arguments are re-serialized with
`tojson`'s default whitespace. Those are the harness behaviours that TITO (training/tito.py) must
survive, so this module keeps them rather than hiding them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"

SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
"""Control tokens: split out before BPE, never produced by encoding plain text."""
MARKUP_TOKENS = (
    THINK_OPEN,
    THINK_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_RESPONSE_OPEN,
    TOOL_RESPONSE_CLOSE,
)
"""Added (non-special) tokens, kept by decode like Qwen3's `<think>` and `<tool_call>`."""

TURN_END_SUFFIX = IM_END + "\n"
"""Text the template appends after every message; the bounded-repair grid of Case 7 lives here."""
GENERATION_PROMPT = IM_START + "assistant\n"

SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a bash command in the task's sandbox and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "bash command"}},
            "required": ["command"],
        },
    },
}

CHAT_TEMPLATE = (
    "{%- set ns = namespace(last_query=-1) -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- messages[0]['content'] | trim -}}{{- '\\n\\n' -}}"
    "{%- endif -%}"
    "{{- '# Tools\\n<tools>' -}}"
    "{%- for t in tools -%}{{- '\\n' -}}{{- t | tojson -}}{%- endfor -%}"
    '{{- \'\\n</tools>\\nCall a tool as <tool_call>\\\\n{"name": ..., "arguments": ...}'
    "\\\\n</tool_call>.<|im_end|>\\n' -}}"
    "{%- elif messages and messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + (messages[0]['content'] | trim) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' and loop.first -%}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- set content = (m['content'] or '') | trim -%}"
    "{%- if m.get('reasoning_content') and loop.index0 > ns.last_query -%}"
    "{{- '<think>\\n' + m['reasoning_content'].strip('\\n') + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- content -}}"
    "{%- for tc in (m.get('tool_calls') or []) -%}"
    "{%- set f = tc['function'] if tc.get('function') else tc -%}"
    "{%- if content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + f['name'] + '\", \"arguments\": ' -}}"
    "{{- f['arguments'] | tojson -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m['role'] == 'tool' -%}"
    "{{- '<|im_start|>tool\\n<tool_response>\\n' + m['content'] + "
    "'\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""Jinja template installed on the tokenizer (`tokenizer.chat_template`)."""


@dataclass(frozen=True)
class ToolCall:
    """One parsed tool call: a function name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Message:
    """A chat message as the harness persists it: parsed text, never token ids."""

    role: Role
    content: str = ""
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The dict shape `apply_chat_template` expects."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [tc.as_dict() for tc in self.tool_calls]
        return out


@dataclass(frozen=True)
class ParsedTurn:
    """What a sampled assistant turn said, plus whether its tool-call markup was well formed."""

    message: Message
    malformed_tool_call: str | None
    """Why a `<tool_call>` block could not be parsed; None when every block parsed."""


_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def parse_assistant_turn(text: str) -> ParsedTurn:
    """Parse decoded assistant output into reasoning, content and tool calls.

    `text` is the decoded sampled output, possibly ending with `<|im_end|>`. The parse is the
    harness's lossy view (whitespace normalized, JSON re-parsed); the sampled ids stay the truth.
    """
    body = text.replace(IM_END, "").replace(END_OF_TEXT, "")
    reasoning: str | None = None
    think = _THINK_RE.search(body)
    if think is not None:
        reasoning = think.group(1).strip("\n")
        body = body[: think.start()] + body[think.end() :]
    calls: list[ToolCall] = []
    problem: str | None = None
    for match in _TOOL_CALL_RE.finditer(body):
        raw = match.group(1).strip()
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as e:
            problem = f"tool call is not JSON: {e.msg}"
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            problem = "tool call lacks a string 'name'"
            continue
        args = payload.get("arguments", {})
        if not isinstance(args, dict):
            problem = "tool call 'arguments' is not an object"
            continue
        calls.append(ToolCall(name=payload["name"], arguments=args))
    content = _TOOL_CALL_RE.sub("", body).strip()
    message = Message(
        role="assistant", content=content, reasoning_content=reasoning, tool_calls=calls
    )
    return ParsedTurn(message=message, malformed_tool_call=problem)


def render_tool_call_text(call: ToolCall, *, style: Literal["template", "compact", "loose"]) -> str:
    """Serialize a tool call the way a model might emit it.

    `template` matches CHAT_TEMPLATE byte for byte; `compact` and `loose` differ only in
    whitespace, which is the third drift behaviour (re-serialized tool calls).
    """
    if style == "template":
        body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"
    if style == "compact":
        body = json.dumps(
            {"name": call.name, "arguments": call.arguments},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"
    if style == "loose":
        body = json.dumps(
            {"name": call.name, "arguments": call.arguments},
            ensure_ascii=False,
            separators=(" , ", " : "),
        )
        return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"
    raise ValueError(f"unknown tool-call style {style!r}")


def render_assistant_text(
    *, reasoning: str | None, content: str, calls: list[ToolCall], style: str = "template"
) -> str:
    """Raw assistant output text (what a model samples), without the closing `<|im_end|>`."""
    parts: list[str] = []
    if reasoning is not None:
        parts.append(f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n")
    parts.append(content)
    for i, call in enumerate(calls):
        if content or i > 0:
            parts.append("\n")
        parts.append(render_tool_call_text(call, style=style))  # type: ignore[arg-type]
    return "".join(parts)


def sanitize_observation(text: str) -> str:
    """Defuse control-token strings in tool output so a file cannot close the turn for us."""
    for tok in SPECIAL_TOKENS:
        text = text.replace(tok, tok.replace("|", "\u00a6"))
    return text


def format_observation(
    *,
    exit_code: int | None,
    stdout: str,
    stderr: str,
    timed_out: bool = False,
    max_chars: int = 2000,
) -> str:
    """The text of the tool message the harness returns after running a command.

    Output beyond `max_chars` is cut from the middle, keeping its head and tail, because the end
    of a build log or a traceback is usually the informative part.
    """
    parts = [f"exit_code: {exit_code if exit_code is not None else 'none'}"]
    if timed_out:
        parts.append("timed_out: true")
    if stdout:
        parts.append("stdout:\n" + stdout.rstrip("\n"))
    if stderr:
        parts.append("stderr:\n" + stderr.rstrip("\n"))
    text = "\n".join(parts)
    if len(text) > max_chars:
        keep = max_chars // 2
        text = text[:keep] + f"\n[... {len(text) - 2 * keep} chars cut ...]\n" + text[-keep:]
    return sanitize_observation(text)
