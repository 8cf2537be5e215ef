"""The LLM rewrite operator: free-form rewrites proposed by any OpenAI-compatible endpoint.

Configured by environment (or explicit `LLMSettings`): T1_LLM_BASE_URL, T1_LLM_API_KEY,
T1_LLM_MODEL. Unconfigured, the operator is absent and the programmatic operators are the
offline default. The model is asked for one JSON object (`RewriteProposal`) holding the four
parts of a rewrite; the reply is parsed and validated against that schema (test code must parse
and define new `test_<tag>_*` functions). Transport failures (429, 5xx, connection errors,
timeouts) are retried with exponential backoff (honouring Retry-After, capped); malformed JSON
and schema violations are sent back to the model with the error, within the same attempt
budget. Other 4xx replies fail at once. Every failure raises `LLMError`, which the round engine
records as an `invalid_llm_output` discard.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import PurePosixPath

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from synthesis.operators.extension import (
    VERIFIER_MODULE,
    Extension,
    Operator,
    Parent,
    RewriteContext,
    RewriteError,
    runner_problem,
    test_names,
)

ENV_BASE_URL, ENV_API_KEY, ENV_MODEL = "T1_LLM_BASE_URL", "T1_LLM_API_KEY", "T1_LLM_MODEL"
MAX_PROMPT_FILE_CHARS = 6000


class LLMError(RuntimeError):
    """The endpoint gave no valid proposal within the attempt budget (or refused outright)."""


class LLMSettings(BaseModel):
    """Where the OpenAI-compatible endpoint is and how patiently to call it."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    api_key: str = "unused"
    model: str
    timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    backoff_s: float = Field(default=1.0, ge=0)
    max_backoff_s: float = Field(default=30.0, ge=0)
    temperature: float = 0.2

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> LLMSettings | None:
        """Settings from T1_LLM_* variables; None when the endpoint or model is not set."""
        env = dict(os.environ) if env is None else env
        base, model = env.get(ENV_BASE_URL, "").strip(), env.get(ENV_MODEL, "").strip()
        if not base or not model:
            return None
        return cls(base_url=base, model=model, api_key=env.get(ENV_API_KEY, "") or "unused")


class RewriteProposal(BaseModel):
    """The JSON object the model must return: the four parts of one rewrite."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=3, max_length=100)
    solution_steps: list[str] = Field(min_length=1, max_length=80)
    env_files: dict[str, str] = Field(default_factory=dict)
    setup: list[str] = Field(default_factory=list, max_length=10)
    requires: list[str] = Field(default_factory=list, max_length=20)
    tests: str = Field(min_length=20)
    instruction_section: str = Field(min_length=40)
    creates: list[str] = Field(default_factory=list)

    @field_validator("tests")
    @classmethod
    def _tests_parse(cls, v: str) -> str:
        try:
            names = test_names(v)
        except SyntaxError as e:
            raise ValueError(f"tests do not parse as Python: {e}") from e
        if not names:
            raise ValueError("tests define no top-level test_* function")
        return v

    @field_validator("env_files")
    @classmethod
    def _safe_paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            p = PurePosixPath(path)
            if p.is_absolute() or ".." in p.parts or not p.parts or path == "Dockerfile":
                raise ValueError(f"env_files path must be relative under environment/: {path!r}")
        return v


SCHEMA_TEXT = json.dumps(RewriteProposal.model_json_schema(), indent=1)

SYSTEM_PROMPT = f"""You extend terminal tasks for training agents. Given a task (instruction,
reference solution, verifier) you propose ONE rewrite that makes the workflow longer:
1. solution_steps: bash lines appended to solve.sh (run from the workdir, after the existing
   steps) doing additional, genuinely executable work with python3 stdlib and coreutils only;
2. env_files/setup/requires: environment changes the new steps need (env_files paths are
   relative to environment/; app/<path> lands at <workdir>/<path>);
3. tests: Python source of NEW top-level functions named test_<TAG>_<what>() using plain assert
   (stdlib only), each checking one thing the new steps produce;
4. instruction_section: a markdown section (starting with "## Additional requirement:") that
   states every path, format and value the new tests check.
Reply with one JSON object matching this JSON schema, and nothing else:
{SCHEMA_TEXT}"""


def _clip(text: str) -> str:
    if len(text) <= MAX_PROMPT_FILE_CHARS:
        return text
    return text[:MAX_PROMPT_FILE_CHARS] + "\n... (truncated)\n"


def rewrite_prompt(parent: Parent, tag: str) -> str:
    task = parent.task
    outputs = "\n".join(f"- {f.path} ({f.kind}, {f.size} bytes)" for f in parent.profile.outputs)
    solve = (task.solution or {}).get("solve.sh", b"").decode("utf-8", "replace")
    tests = task.verifier.get(VERIFIER_MODULE, b"").decode("utf-8", "replace")
    return (
        f"TAG: {tag}\nWORKDIR: {parent.workdir}\n\n# instruction.md\n{_clip(task.instruction)}\n"
        f"# solution/solve.sh\n{_clip(solve)}\n# tests/{VERIFIER_MODULE}\n{_clip(tests)}\n"
        f"# files the solution writes\n{outputs or '(none observed)'}\n"
        f"Name every new test function test_{tag}_<what> and every new file with the suffix "
        f"_{tag} so nothing collides with earlier rewrites."
    )


def _retry_after(e: openai.APIStatusError) -> float | None:
    try:
        value = e.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, ValueError):
        return None


class LLMClient:
    """Chat completions with bounded retries; returns validated `RewriteProposal`s."""

    def __init__(
        self,
        settings: LLMSettings,
        client: openai.OpenAI | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.sleep = sleep
        self.client = client or openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            timeout=settings.timeout_s,
            max_retries=0,  # retries are ours: bounded, logged, and shared with schema repair
        )
        self.attempts = 0  # requests sent, over this client's life (for tests and logs)

    def _backoff(self, attempt: int, hint: float | None) -> None:
        s = self.settings
        delay = s.backoff_s * (2**attempt) if hint is None else hint
        self.sleep(min(s.max_backoff_s, delay))

    def propose(self, prompt: str) -> RewriteProposal:
        s = self.settings
        messages: list[dict[str, str]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        last = "no attempt made"
        for attempt in range(s.max_attempts):
            self.attempts += 1
            try:
                resp = self.client.chat.completions.create(  # type: ignore[call-overload]
                    model=s.model,
                    messages=messages,
                    temperature=s.temperature,
                    response_format={"type": "json_object"},
                )
            except (openai.RateLimitError, openai.InternalServerError) as e:
                last = f"HTTP {e.status_code}: {e.message}"
                self._backoff(attempt, _retry_after(e))
                continue
            except (openai.APIConnectionError, openai.APITimeoutError) as e:
                last = f"{type(e).__name__}: {e}"
                self._backoff(attempt, None)
                continue
            except openai.APIStatusError as e:
                raise LLMError(f"endpoint refused the request: HTTP {e.status_code}") from e
            text = (resp.choices[0].message.content or "") if resp.choices else ""
            try:
                return RewriteProposal.model_validate(json.loads(text))
            except (json.JSONDecodeError, ValidationError) as e:
                last = f"invalid reply: {str(e)[:800]}"
                messages += [
                    {"role": "assistant", "content": text[:4000]},
                    {
                        "role": "user",
                        "content": f"That reply was invalid ({last}). Reply again with ONE "
                        "JSON object that matches the schema exactly, and nothing else.",
                    },
                ]
        raise LLMError(f"no valid proposal after {s.max_attempts} attempts; last: {last}")


class LLMRewrite(Operator):
    """Free-form rewrites of all four parts, proposed by the configured LLM endpoint."""

    name = "llm_rewrite"
    family = "llm"

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def feasible(self, parent: Parent) -> str | None:
        problem = runner_problem(parent.task)
        if problem:
            return problem
        return None if parent.profile.ok else "parent oracle did not pass when profiled"

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        try:
            p = self.client.propose(rewrite_prompt(parent, ctx.tag))
        except LLMError as e:
            raise RewriteError(f"llm_rewrite: {e}") from e
        bad = [n for n in test_names(p.tests) if not n.startswith(f"test_{ctx.tag}_")]
        if bad:
            raise RewriteError(f"llm_rewrite: test names must start with test_{ctx.tag}_: {bad}")
        return Extension(
            title=p.title,
            steps=p.solution_steps,
            tests=p.tests.strip("\n") + "\n",
            section=p.instruction_section,
            env_files={k: v.encode() for k, v in p.env_files.items()},
            setup=p.setup,
            requires=p.requires,
            creates=p.creates,
        )


def llm_operators(settings: LLMSettings | None = None) -> tuple[Operator, ...]:
    """The LLM operator when an endpoint is configured (argument or env), else nothing."""
    settings = settings or LLMSettings.from_env()
    return (LLMRewrite(LLMClient(settings)),) if settings else ()
