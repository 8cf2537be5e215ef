"""The solution-first LLM rewrite operator, over any OpenAI-compatible endpoint.

Configured by environment (or explicit `LLMSettings`): T1_LLM_BASE_URL, T1_LLM_API_KEY,
T1_LLM_MODEL. Unconfigured, the operator is absent and the programmatic operators are the
offline default. One rewrite is four requests, in the paper's order, so difficulty lands on
the executable path before the text changes:

1. `StepsProposal`: new solution steps continuing the parent's workflow, with the parent's
   output files they consume (they must be files some parent check reads, so every new test
   is guarded) and the files they create;
2. the steps run in a sandbox after the parent's solution (`synthesis.observe`); steps that
   fail go back to the model with what happened (`step_attempts` proposals at most);
3. `VerifierProposal`: tests written against the OBSERVED state;
4. `InstructionProposal`: the whole instruction rewritten last, as one statement.

After validation, `revise` sends the typed finding (verdict, detail, offending literals or
assertions, failing messages) back and takes a `RevisionProposal` (steps, tests and/or
instruction replaced); the round engine bounds the revisions by `max_repairs`.

Each reply is parsed and validated against its schema (and a check: test names, consumed
paths); an invalid reply goes back to the model with the error, within the attempt budget.
Transport failures (429, 5xx, connection errors, timeouts) are retried with exponential
backoff (honouring Retry-After, capped); other 4xx replies fail at once. Every failure raises
`LLMError`, which becomes a `RewriteError`, recorded as an `invalid_llm_output` discard.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePosixPath
from typing import TypeVar

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from synthesis.observe import Observation, observe_steps
from synthesis.operators.extension import (
    VERIFIER_MODULE,
    Extension,
    Feedback,
    Operator,
    Parent,
    RewriteContext,
    RewriteError,
    runner_problem,
    test_names,
)

ENV_BASE_URL, ENV_API_KEY, ENV_MODEL = "T1_LLM_BASE_URL", "T1_LLM_API_KEY", "T1_LLM_MODEL"
MAX_PROMPT_FILE_CHARS = 6000
M = TypeVar("M", bound=BaseModel)


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


def _check_tests(v: str) -> str:
    try:
        names = test_names(v)
    except SyntaxError as e:
        raise ValueError(f"tests do not parse as Python: {e}") from e
    if not names:
        raise ValueError("tests define no top-level test_* function")
    return v


class StepsProposal(BaseModel):
    """Step 1: new solution steps that continue the workflow from the parent's final state."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=3, max_length=100)
    solution_steps: list[str] = Field(min_length=1, max_length=80)
    consumes: list[str] = Field(min_length=1)
    creates: list[str] = Field(default_factory=list)
    env_files: dict[str, str] = Field(default_factory=dict)
    setup: list[str] = Field(default_factory=list, max_length=10)
    requires: list[str] = Field(default_factory=list, max_length=20)

    @field_validator("env_files")
    @classmethod
    def _safe_paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            p = PurePosixPath(path)
            if p.is_absolute() or ".." in p.parts or not p.parts or path == "Dockerfile":
                raise ValueError(f"env_files path must be relative under environment/: {path!r}")
        return v


class VerifierProposal(BaseModel):
    """Step 3: tests written against the observed state."""

    model_config = ConfigDict(extra="forbid")

    tests: str = Field(min_length=20)

    @field_validator("tests")
    @classmethod
    def _tests_parse(cls, v: str) -> str:
        return _check_tests(v)


class InstructionProposal(BaseModel):
    """Step 4, last: the whole task statement, rewritten as one workflow."""

    model_config = ConfigDict(extra="forbid")

    instruction: str = Field(min_length=80)


class RevisionProposal(BaseModel):
    """A repair after validation: any part may be replaced (null keeps it)."""

    model_config = ConfigDict(extra="forbid")

    solution_steps: list[str] | None = Field(default=None, min_length=1, max_length=80)
    tests: str | None = None
    instruction: str | None = Field(default=None, min_length=80)

    @field_validator("tests")
    @classmethod
    def _tests_parse(cls, v: str | None) -> str | None:
        return None if v is None else _check_tests(v)


SYSTEM_PROMPT = """You extend terminal tasks for training agents, solution first. A task has an
instruction, a reference solution (solve.sh) and a verifier (Python test functions, one
assertion each). You make it longer and harder in four steps, each its own request:
1. propose new solution steps (bash, run from the workdir after the existing solution) that
   CONTINUE the workflow: they read or change files the existing solution produces (list them
   in `consumes`); python3 stdlib and coreutils only;
2. we run them in a sandbox and show you the exact state they leave;
3. you write tests against that observed state: new top-level functions named
   test_<TAG>_<what>() with plain asserts (stdlib only), computing expectations from files
   where you can, never from chance or the clock, each able to fail;
4. you rewrite the WHOLE instruction as one coherent task statement covering the existing
   work and the new steps, stating every path, name, format and exact value the tests check.
Reply to each request with ONE JSON object matching the JSON schema it gives, nothing else."""


def _clip(text: str) -> str:
    if len(text) <= MAX_PROMPT_FILE_CHARS:
        return text
    return text[:MAX_PROMPT_FILE_CHARS] + "\n... (truncated)\n"


def _schema(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=1)


def steps_prompt(parent: Parent, tag: str) -> str:
    task = parent.task
    outputs = "\n".join(f"- {f.path} ({f.kind}, {f.size} bytes)" for f in parent.profile.outputs)
    solve = (task.solution or {}).get("solve.sh", b"").decode("utf-8", "replace")
    tests = task.verifier.get(VERIFIER_MODULE, b"").decode("utf-8", "replace")
    return (
        f"STEP 1: propose new solution steps.\nTAG: {tag}\nWORKDIR: {parent.workdir}\n\n"
        f"# instruction.md\n{_clip(task.instruction)}\n"
        f"# solution/solve.sh\n{_clip(solve)}\n# tests/{VERIFIER_MODULE}\n{_clip(tests)}\n"
        f"# files the existing solution produces (consume some of them)\n"
        f"{outputs or '(none observed)'}\n"
        f"Name every new file with the suffix _{tag}. JSON schema:\n{_schema(StepsProposal)}"
    )


def tests_prompt(tag: str, steps: StepsProposal, observed: Observation) -> str:
    return (
        "STEP 3: write the tests. We ran your steps after the existing solution:\n"
        + "\n".join(steps.solution_steps)
        + f"\n\nObserved:\n{observed.render()}\n\nWrite new test functions named "
        f"test_{tag}_<what> that check this state. JSON schema:\n{_schema(VerifierProposal)}"
    )


def instruction_prompt(parent: Parent, steps: StepsProposal, tests: str) -> str:
    return (
        "STEP 4: rewrite the whole instruction, last. The current instruction:\n"
        f"{_clip(parent.task.instruction)}\n\nThe new steps:\n"
        + "\n".join(steps.solution_steps)
        + f"\n\nThe new tests:\n{_clip(tests)}\n\nWrite ONE task statement for the whole "
        "longer workflow (not an appended section) that states every requirement of the old "
        f"and the new tests. JSON schema:\n{_schema(InstructionProposal)}"
    )


def revision_prompt(ext: Extension, feedback: Feedback) -> str:
    return (
        f"Validation rejected the task: {feedback.verdict}: {feedback.detail}\n"
        f"About: {feedback.offending}\nFailing checks: {feedback.failing}\n\n"
        "Current steps:\n" + "\n".join(ext.steps) + f"\n\nCurrent tests:\n{_clip(ext.tests)}"
        f"\n\nCurrent instruction:\n{_clip(ext.instruction or ext.text)}\n\nRevise what "
        f"the finding needs (null keeps a part). JSON schema:\n{_schema(RevisionProposal)}"
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

    def ask(
        self,
        prompt: str,
        schema: type[M],
        check: Callable[[M], str | None] | None = None,
        history: list[dict[str, str]] | None = None,
    ) -> M:
        """One request/reply exchange: the reply parsed into `schema`; a reply that does not
        parse, match the schema or pass `check` (an error message, or None) goes back to the
        model with the error, within the attempt budget. `history` (earlier exchanges of the
        same rewrite) is sent first and the exchange is appended to it."""
        s = self.settings
        history = history if history is not None else []
        messages: list[dict[str, str]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            *history,
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
                reply = schema.model_validate(json.loads(text))
                problem = check(reply) if check else None
            except (json.JSONDecodeError, ValidationError) as e:
                problem = str(e)[:800]
            if problem is None:
                history += [
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": text[:4000]},
                ]
                return reply
            last = f"invalid reply: {problem}"
            messages += [
                {"role": "assistant", "content": text[:4000]},
                {
                    "role": "user",
                    "content": f"That reply was invalid ({last}). Reply again with ONE "
                    "JSON object that matches the schema exactly, and nothing else.",
                },
            ]
        raise LLMError(f"no valid reply after {s.max_attempts} attempts; last: {last}")


class LLMRewrite(Operator):
    """Solution-first rewrites by the configured LLM endpoint (see the module docstring)."""

    name = "llm_rewrite"
    family = "llm"

    def __init__(self, client: LLMClient, step_attempts: int = 2) -> None:
        self.client = client
        self.step_attempts = step_attempts  # proposals of steps that must run cleanly

    def feasible(self, parent: Parent) -> str | None:
        problem = runner_problem(parent.task)
        if problem:
            return problem
        if not parent.profile.ok:
            return "parent oracle did not pass when profiled"
        return None if any(parent.guards.values()) else "no output a parent check reads"

    def _check_steps(self, parent: Parent, p: StepsProposal) -> str | None:
        guarded = {path for path, checks in parent.guards.items() if checks}
        bad = [c for c in p.consumes if c not in guarded]
        if bad:
            return (
                f"consumes must name files the existing solution produces {sorted(guarded)}: {bad}"
            )
        clash = sorted(set(p.creates) & parent.taken_paths())
        return f"creates would overwrite existing files: {clash}" if clash else None

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        tag = ctx.tag
        history: list[dict[str, str]] = []
        try:
            # 1-2. propose steps, run them, observe; failing steps go back to the model.
            prompt = steps_prompt(parent, tag)
            for _ in range(self.step_attempts):
                steps = self.client.ask(
                    prompt, StepsProposal, lambda p: self._check_steps(parent, p), history
                )
                draft = self._extension(steps, f"def test_{tag}_draft():\n    pass\n", "-")
                observed = observe_steps(parent, draft, ctx.round, ctx.backend)
                if observed.ok:
                    break
                prompt = (
                    f"Those steps failed when run after the existing solution:\n"
                    f"{observed.render()}\nPropose corrected steps. JSON schema:\n"
                    f"{_schema(StepsProposal)}"
                )
            else:
                raise RewriteError(f"llm_rewrite: proposed steps fail: {observed.output[-300:]}")
            # 3. tests against the observed state.
            tests = self.client.ask(
                tests_prompt(tag, steps, observed),
                VerifierProposal,
                lambda t: self._check_names(t.tests, tag),
                history,
            ).tests
            # 4. the instruction, last.
            text = self.client.ask(
                instruction_prompt(parent, steps, tests), InstructionProposal, None, history
            ).instruction
        except LLMError as e:
            raise RewriteError(f"llm_rewrite: {e}") from e
        return self._extension(steps, tests, text)

    def revise(
        self, parent: Parent, ctx: RewriteContext, ext: Extension, feedback: Feedback
    ) -> Extension | None:
        try:
            r = self.client.ask(
                revision_prompt(ext, feedback),
                RevisionProposal,
                lambda r: self._check_names(r.tests, ctx.tag) if r.tests else None,
            )
        except LLMError as e:
            raise RewriteError(f"llm_rewrite: revision: {e}") from e
        if r.solution_steps is None and r.tests is None and r.instruction is None:
            return None
        return replace(
            ext,
            steps=r.solution_steps or ext.steps,
            tests=(r.tests.strip("\n") + "\n") if r.tests else ext.tests,
            instruction=r.instruction or ext.instruction,
        )

    @staticmethod
    def _check_names(tests: str, tag: str) -> str | None:
        bad = [n for n in test_names(tests) if not n.startswith(f"test_{tag}_")]
        return f"test names must start with test_{tag}_: {bad}" if bad else None

    @staticmethod
    def _extension(p: StepsProposal, tests: str, instruction: str) -> Extension:
        return Extension(
            title=p.title,
            steps=p.solution_steps,
            tests=tests.strip("\n") + "\n",
            text="",
            consumes=p.consumes,
            env_files={k: v.encode() for k, v in p.env_files.items()},
            setup=p.setup,
            requires=p.requires,
            creates=p.creates,
            instruction=instruction,
        )


def llm_operators(settings: LLMSettings | None = None) -> tuple[Operator, ...]:
    """The LLM operator when an endpoint is configured (argument or env), else nothing."""
    settings = settings or LLMSettings.from_env()
    return (LLMRewrite(LLMClient(settings)),) if settings else ()
