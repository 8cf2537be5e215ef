"""The LLM judge: one versioned rubric prompt per dimension, scored through any
OpenAI-compatible endpoint, used only when configured.

Configuration comes from T1_LLM_BASE_URL, T1_LLM_API_KEY, T1_LLM_MODEL and T1_LLM_TIMEOUT_S
(`LlmConfig.from_env` returns None when the URL or model is unset: the audit then runs on the
executable judge alone). The judge sees the instruction, the environment's files with their
contents (each clipped, all bounded), the verifier and the reference solution.

Each response must be a JSON object `{"score": <0..1>, "rationale": "<text>",
"hard_reject": null | {"code": "<hard-reject code>", "quote": "<exact span>"}}`. Anything
else (not JSON, out of range, no rationale, an unknown code) is a rejected response and is
retried with backoff up to `max_retries` times; after that the judgement is a failure
(`status="invalid"` or `"error"`), never an exception.

A hard reject is evidence only when its quote can be checked (`quote_problem`): it occurs in
the task's own files (whitespace aside; never the prompt's wording), holds at least
`QUOTE_MIN_CHARS` non-whitespace characters, and lies where its defect can occur
(`QUOTE_REGIONS`: a leak in what the agent reads, a hidden requirement in the tests). A
refused quote keeps the score but drops the hard reject; it is recorded as an
`llm_quote_refused` finding.

Transport failures (timeouts, refused connections) feed one `CircuitBreaker` per client:
after `breaker_failures` in a row the client stops calling the endpoint for the rest of the
run and every later judgement is `status="unavailable"` (an `llm_unavailable` finding: the
decision is an `error`, retried by the next run, never a low score).
Valid judgements are cached by (task hash, prompt version, model): in the warehouse (`audits`
rows, judge `llm/<dimension>`) or in a directory of JSON files. Failures are never cached:
`WarehouseCache.put` records them under an error version (`<version>#error@<time>`), which no
re-audit reads as a score, so the next run asks again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.rubric import Dimension
from audit.static_checks import decode, verifier_texts, visible_texts
from audit.verdict import Code, Finding, Source, Verdict
from tasks.model import Task
from warehouse.records import AuditRecord

if TYPE_CHECKING:
    from warehouse.recording import StoreRef

PROMPT_VERSION = "v3"
LLM_JUDGE_PREFIX = "llm/"
MAX_FILE_CHARS = 6000
MAX_ENV_FILE_CHARS = 3000
MAX_ENV_CHARS = 24000
HARD_REJECT_CODES = (
    Code.HIDDEN_REQUIREMENT,
    Code.TEST_LEAKAGE,
    Code.SOLUTION_SHORTCUT,
    Code.WEAK_VERIFIER,
    Code.FLAKY_VERIFIER,
)
QUOTE_MIN_CHARS = 12
"""Non-whitespace characters a hard reject's quote must hold: a shorter span (`/app`,
`ERROR`) occurs in almost any task and proves nothing about this one."""


class Region(StrEnum):
    """Where in a task a quoted span lies."""

    INSTRUCTION = "instruction"  # instruction.md (the agent reads it)
    ENVIRONMENT = "environment"  # environment/ (the agent reads it)
    TESTS = "tests"  # the verifier (held out)
    SOLUTION = "solution"  # the reference solution (held out)


QUOTE_REGIONS: dict[Code, frozenset[Region]] = {
    # a leak is only a leak where the agent can read it
    Code.TEST_LEAKAGE: frozenset({Region.INSTRUCTION, Region.ENVIRONMENT}),
    # a hidden requirement is something the verifier checks
    Code.HIDDEN_REQUIREMENT: frozenset({Region.TESTS}),
    # a shortcut is in the reference solution
    Code.SOLUTION_SHORTCUT: frozenset({Region.SOLUTION}),
    Code.WEAK_VERIFIER: frozenset({Region.TESTS}),
    # flakiness is the verifier's, or a service of the environment it talks to
    Code.FLAKY_VERIFIER: frozenset({Region.TESTS, Region.ENVIRONMENT}),
}

SYSTEM = (
    "You audit terminal tasks used to train agents with reinforcement learning. A task has a "
    "public instruction, an environment, a held-out verifier (tests) and a reference solution "
    "the agent never sees. Judge ONE dimension. Reply with a JSON object only: "
    '{"score": <number from 0 to 1>, "rationale": "<one or two sentences>", '
    '"hard_reject": null}. Only when the task is certainly defective, set "hard_reject" to '
    '{"code": "<one of: ' + ", ".join(c.value for c in HARD_REJECT_CODES) + '>", '
    '"quote": "<the exact text of the task, copied verbatim, that proves it>"}. The quote '
    f"must be at least {QUOTE_MIN_CHARS} characters copied from the task's own files (never "
    "from these instructions) and lie where the defect is: test_leakage in the instruction or "
    "environment, hidden_requirement and weak_verifier in the verifier, solution_shortcut in "
    "the reference solution; any other quote is discarded."
)

DIMENSION_PROMPTS: dict[Dimension, str] = {
    Dimension.ALIGNMENT: (
        "Instruction-verifier alignment. Does the instruction state every path, value, format "
        "and behaviour the verifier checks? Any checked criterion the instruction never states "
        "is a hidden requirement: score it near 0. 1 means the verifier checks exactly what "
        "the instruction asks."
    ),
    Dimension.FAIRNESS: (
        "Verifier fairness. Would any correct solution pass, whatever reasonable approach it "
        "takes? Penalize checks of incidental details, dependence on wall-clock time, "
        "randomness or the network, and verdicts that could change between runs."
    ),
    Dimension.COVERAGE: (
        "Verifier coverage. Does the verifier check every requirement of the instruction, so "
        "that a partial or wrong solution fails? Penalize goals the verifier never checks."
    ),
    Dimension.CORRECTNESS: (
        "Solution correctness. Does the reference solution actually accomplish the instruction "
        "(not merely satisfy the tests)?"
    ),
    Dimension.REASONABLENESS: (
        "Solution reasonableness. Is the reference solution a reasonable workflow an expert "
        "would follow? Penalize hard-coded answers, reading the tests, or needless detours."
    ),
    Dimension.TRAINING_VALUE: (
        "Training value. Is this a realistic, non-trivial multi-step terminal task whose "
        "verifier gives a graded signal (several independent assertions)?"
    ),
}

REPAIR_SYSTEM = (
    "You repair task instructions. Rewrite the instruction so that it states every listed "
    "requirement the verifier checks, without revealing test code or computed answers and "
    "without changing the task. Reply with the full new instruction text only."
)


class LlmConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str
    api_key: str = "none"
    model: str
    max_retries: int = Field(3, ge=1)
    """Attempts per judgement (each rejected response or transport error uses one)."""
    timeout_s: float = Field(60.0, gt=0)
    """Seconds one request may take (connect and read); T1_LLM_TIMEOUT_S sets it."""
    backoff_s: float = Field(0.5, ge=0)
    breaker_failures: int = Field(3, ge=1)
    """Consecutive timeouts or connection failures (across dimensions and tasks) after which
    the client stops calling the endpoint for the rest of the run."""

    @classmethod
    def from_env(cls) -> LlmConfig | None:
        """The config from the environment; None when the URL or model is unset. A malformed
        T1_LLM_TIMEOUT_S raises ValueError naming it."""
        url, model = os.environ.get("T1_LLM_BASE_URL"), os.environ.get("T1_LLM_MODEL")
        if not url or not model:
            return None
        fields: dict[str, Any] = {"base_url": url, "model": model}
        fields["api_key"] = os.environ.get("T1_LLM_API_KEY") or "none"
        raw = os.environ.get("T1_LLM_TIMEOUT_S")
        if raw:
            fields["timeout_s"] = raw
        try:
            return cls.model_validate(fields)
        except ValidationError as e:
            err = e.errors()[0]
            name = {"timeout_s": "T1_LLM_TIMEOUT_S"}.get(str(err["loc"][0]), str(err["loc"][0]))
            raise ValueError(f"{name}: {err['msg']} (got {raw!r})") from e

    @property
    def version(self) -> str:
        """The cache/audit version of this judge: prompt version and model."""
        return f"{PROMPT_VERSION}@{self.model}"


class LlmHardReject(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: Code
    quote: str = Field(min_length=1)


class LlmScore(BaseModel):
    """The response schema."""

    model_config = ConfigDict(extra="ignore")

    score: float = Field(ge=0, le=1)
    rationale: str = Field(min_length=1)
    hard_reject: LlmHardReject | None = None


class LlmResponseError(ValueError):
    """A response that does not match the schema (not JSON, out of range, no rationale)."""


class LlmJudgement(BaseModel):
    task_hash: str
    dimension: Dimension
    version: str
    score: float | None = None
    rationale: str = ""
    hard_reject: LlmHardReject | None = None
    refused: LlmHardReject | None = None
    """A hard reject whose quote failed `quote_problem` (not evidence; recorded)."""
    refused_why: str = ""
    status: str = "ok"  # ok | cached | invalid | error | unavailable
    attempts: int = 0
    errors: list[str] = Field(default_factory=list)
    recorded: list[Finding] | None = None
    """The findings as stored, for a judgement read back from the warehouse."""

    @property
    def ok(self) -> bool:
        return self.score is not None

    def findings(self) -> list[Finding]:
        """The judgement as typed findings: its score's rationale, a quoted hard reject, or
        the failure."""
        if self.recorded is not None:
            return list(self.recorded)
        dim = self.dimension.value
        if not self.ok:
            why = self.errors[-1] if self.errors else self.status
            code = Code.LLM_UNAVAILABLE if self.status == "unavailable" else Code.LLM_ERROR
            return [Finding(code=code, source=Source.INFRA, item=dim, evidence=why)]
        out = [Finding(code=Code.LLM_SCORE, source=Source.LLM, item=dim, evidence=self.rationale)]
        if self.hard_reject is not None:
            why = f"quoted: {self.hard_reject.quote!r} ({dim}: {self.rationale})"
            out.append(
                Finding(code=self.hard_reject.code, source=Source.LLM, item=dim, evidence=why)
            )
        if self.refused is not None:
            why = f"{self.refused.code.value} quoting {self.refused.quote[:80]!r}: "
            out.append(
                Finding(
                    code=Code.LLM_QUOTE_REFUSED,
                    source=Source.LLM,
                    item=dim,
                    evidence=why + self.refused_why,
                )  # fmt: skip
            )
        return out

    def to_record(self) -> AuditRecord:
        """A scored judgement's row; a failure's row carries an error version (never read
        back as a score)."""
        version = self.version if self.ok else error_version(self.version)
        return AuditRecord(
            task_hash=self.task_hash,
            judge=f"{LLM_JUDGE_PREFIX}{self.dimension.value}",
            audit_version=version,
            scores={"score": float(self.score)} if self.score is not None else {},
            verdict=Verdict.PASS.value if self.ok else Verdict.ERROR.value,
            reasons=[self.rationale] if self.ok else list(self.errors),
            findings=[f.row() for f in self.findings()],
        )


def error_version(version: str) -> str:
    """The version a failed attempt is recorded under: unique, and never a scored version."""
    return f"{version}#error@{datetime.now(UTC).isoformat(timespec='microseconds')}"


def parse_score(text: str | None) -> LlmScore:
    """The schema-validated score in a response; LlmResponseError otherwise (a hard reject's
    quote is checked against the task by `quote_problem`)."""
    if not text:
        raise LlmResponseError("empty response")
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", body, re.S)
    if fenced:
        body = fenced.group(1)
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as e:
        raise LlmResponseError(f"not JSON: {e.msg} in {text[:80]!r}") from e
    if not isinstance(doc, dict):
        raise LlmResponseError(f"expected a JSON object, got {type(doc).__name__}")
    try:
        parsed = LlmScore.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise LlmResponseError(f"{where}: {err['msg']} (got {doc.get(where)!r})") from e
    hard = parsed.hard_reject
    if hard is not None and hard.code not in HARD_REJECT_CODES:
        raise LlmResponseError(f"hard_reject.code {hard.code.value!r} is not a hard-reject code")
    return parsed


def _flat(text: str) -> str:
    return " ".join(text.split())


def task_regions(task: Task) -> dict[Region, dict[str, str]]:
    """The task's own text by region: {region: {file: text}} (binary files left out)."""
    visible = visible_texts(task)
    solution = {f"solution/{n}": decode(b) for n, b in sorted((task.solution or {}).items())}
    return {
        Region.INSTRUCTION: {"instruction.md": visible.pop("instruction.md")},
        Region.ENVIRONMENT: visible,
        Region.TESTS: {f"tests/{n}": t for n, t in verifier_texts(task).items()},
        Region.SOLUTION: {n: t for n, t in solution.items() if t is not None},
    }


def quote_regions(task: Task, quote: str) -> set[Region]:
    """The regions of `task` whose files hold `quote` (whitespace runs aside)."""
    q = _flat(quote)
    return {
        r
        for r, files in task_regions(task).items()
        if q and any(q in _flat(text) for text in files.values())
    }


def quote_problem(task: Task, hard: LlmHardReject) -> str | None:
    """Why `hard`'s quote is not evidence against `task`, or None when it is: too short,
    found in none of the task's files (text the judge was shown by the prompt itself is not
    the task's), or found only where its defect class cannot occur (`QUOTE_REGIONS`)."""
    solid = sum(not c.isspace() for c in hard.quote)
    if solid < QUOTE_MIN_CHARS:
        return f"quote has {solid} non-whitespace characters (< {QUOTE_MIN_CHARS})"
    found = quote_regions(task, hard.quote)
    if not found:
        return "quote occurs in none of the task's files"
    allowed = QUOTE_REGIONS[hard.code]
    if not found & allowed:
        where = ", ".join(sorted(r.value for r in found))
        need = ", ".join(sorted(r.value for r in allowed))
        return f"quote lies in {where}; a {hard.code.value} can only be shown in {need}"
    return None


def _clip(text: str) -> str:
    return text if len(text) <= MAX_FILE_CHARS else text[:MAX_FILE_CHARS] + "\n[... truncated]"


def environment_listing(task: Task) -> str:
    """The environment's files with their contents: each clipped to MAX_ENV_FILE_CHARS, all
    to MAX_ENV_CHARS (later files then by name only); binary files by name and size."""
    parts, used = [], 0
    for name, data in sorted(task.environment.files.items()):
        text = decode(data)
        if text is None:
            parts.append(f"### environment/{name} (binary, {len(data)} bytes)")
            continue
        if len(text) > MAX_ENV_FILE_CHARS:
            text = text[:MAX_ENV_FILE_CHARS] + f"\n[... {len(data)} bytes in all]"
        if used + len(text) > MAX_ENV_CHARS:
            parts.append(f"### environment/{name} ({len(data)} bytes; not shown)")
            continue
        used += len(text)
        parts.append(f"### environment/{name}\n{text}")
    return "\n\n".join(parts) or "(none)"


def task_prompt(task: Task, dimension: Dimension) -> list[dict[str, str]]:
    """The chat messages judging `dimension` of `task` (PROMPT_VERSION fixes their wording)."""
    tests = "\n\n".join(f"### tests/{n}\n{_clip(t)}" for n, t in verifier_texts(task).items())
    solve = (task.solution or {}).get("solve.sh", b"").decode("utf-8", "replace")
    user = (
        f"Dimension: {DIMENSION_PROMPTS[dimension]}\n\n"
        f"## Instruction (what the agent sees)\n{_clip(task.instruction)}\n\n"
        f"## Environment (what the agent can read)\n{environment_listing(task)}\n\n"
        f"## Verifier (held out)\n{tests}\n\n"
        f"## Reference solution (held out)\n{_clip(solve)}\n\n"
        'Reply with {"score": ..., "rationale": ..., "hard_reject": ...} only.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# ---- caches ----------------------------------------------------------------------------------


class LlmCache(Protocol):
    def get(self, task_hash: str, dimension: Dimension, version: str) -> LlmJudgement | None: ...

    def put(self, judgement: LlmJudgement) -> None: ...


class DirCache:
    """Judgements as JSON files under `root`, one per (task hash, dimension, version)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _path(self, task_hash: str, dimension: Dimension, version: str) -> Path:
        key = hashlib.sha256(f"{task_hash}|{dimension.value}|{version}".encode()).hexdigest()
        return self.root / f"{key[:32]}.json"

    def get(self, task_hash: str, dimension: Dimension, version: str) -> LlmJudgement | None:
        p = self._path(task_hash, dimension, version)
        if not p.is_file():
            return None
        return LlmJudgement.model_validate_json(p.read_text(encoding="utf-8"))

    def put(self, judgement: LlmJudgement) -> None:
        if not judgement.ok:
            return  # failures are rows in the audit, never cached answers
        self.root.mkdir(parents=True, exist_ok=True)
        p = self._path(judgement.task_hash, judgement.dimension, judgement.version)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(judgement.model_dump_json(), encoding="utf-8")
        tmp.replace(p)


class WarehouseCache:
    """Judgements as `audits` rows (judge `llm/<dimension>`, version `<prompt>@<model>`)."""

    def __init__(self, store: StoreRef) -> None:
        self.store: StoreRef = store
        self._rows: dict[tuple[str, str, str], AuditRecord] | None = None

    def _load(self) -> dict[tuple[str, str, str], AuditRecord]:
        if self._rows is None:
            from warehouse.recording import writable_store
            from warehouse.snapshot import Snapshot

            st = self.store = writable_store(self.store)
            with Snapshot.open(st, with_lineage=False) as snap:
                rows = snap.rows(
                    "SELECT * FROM audits WHERE starts_with(judge, $p)", {"p": LLM_JUDGE_PREFIX}
                )
            recs = [AuditRecord.from_row(r) for r in rows]
            self._rows = {(r.task_hash, r.judge, r.audit_version): r for r in recs}
        return self._rows

    def get(self, task_hash: str, dimension: Dimension, version: str) -> LlmJudgement | None:
        rec = self._load().get((task_hash, f"{LLM_JUDGE_PREFIX}{dimension.value}", version))
        if rec is None or "score" not in rec.scores:
            return None
        found = [Finding.from_row(r) for r in rec.findings]
        rationale = next((f.evidence for f in found if f.code == Code.LLM_SCORE), "")
        return LlmJudgement(
            task_hash=task_hash,
            dimension=dimension,
            version=version,
            score=rec.scores["score"],
            rationale=rationale,
            status="cached",
            recorded=found,
        )

    def put(self, judgement: LlmJudgement) -> None:
        """Store a judgement: a score under its version, a failure under an error version."""
        from warehouse.recording import record_audits

        rec = judgement.to_record()
        record_audits(self.store, [rec])
        if judgement.ok:
            self._load()[(rec.task_hash, rec.judge, rec.audit_version)] = rec


# ---- calling the model -----------------------------------------------------------------------


class LlmUnavailable(RuntimeError):
    """The circuit breaker is open: the endpoint is not called again in this run."""


@dataclass
class CircuitBreaker:
    """Counts consecutive transport failures (timeouts, refused or dropped connections); at
    `limit` it opens for good. Any answer from the endpoint (even an HTTP error or a bad
    response) closes the count again: the endpoint is there."""

    limit: int
    failures: int = 0
    last: str = ""

    @property
    def open(self) -> bool:
        return self.failures >= self.limit

    def why(self) -> str:
        return (
            f"LLM endpoint unavailable: circuit open after {self.failures} consecutive "
            f"timeouts/connection failures (last: {self.last})"
        )


def _transport_failure(e: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(e, openai.APIConnectionError | httpx.TransportError | TimeoutError)


class LlmClient:
    """One OpenAI-compatible endpoint for one run: requests time out after `timeout_s`, and a
    `CircuitBreaker` shared by every judgement and repair made through this client."""

    def __init__(self, cfg: LlmConfig, client: Any = None) -> None:
        from openai import OpenAI

        self.cfg = cfg
        self.breaker = CircuitBreaker(cfg.breaker_failures)
        self.raw: Any = client or OpenAI(
            base_url=cfg.base_url, api_key=cfg.api_key, max_retries=0, timeout=cfg.timeout_s
        )

    def complete(self, messages: list[dict[str, str]]) -> str | None:
        """The answer's text; LlmUnavailable once the breaker is open, else what the endpoint
        raised."""
        if self.breaker.open:
            raise LlmUnavailable(self.breaker.why())
        try:
            resp = self.raw.chat.completions.create(
                model=self.cfg.model, messages=messages, temperature=0
            )
        except Exception as e:
            if _transport_failure(e):
                self.breaker.failures += 1
                self.breaker.last = f"{type(e).__name__}: {str(e)[:120]}"
            else:
                self.breaker.failures = 0
            raise
        self.breaker.failures = 0
        return resp.choices[0].message.content if resp.choices else None


def make_client(cfg: LlmConfig, client: Any = None) -> LlmClient:
    """The client of one run (build it once per run: its breaker spans tasks): `client` when
    it already is one, else a new one over `client` (an OpenAI client) or the endpoint."""
    if isinstance(client, LlmClient):
        return client
    return LlmClient(cfg, client)


def judge_dimension(
    task: Task,
    dimension: Dimension,
    cfg: LlmConfig,
    *,
    client: Any = None,
    cache: LlmCache | None = None,
) -> LlmJudgement:
    """One dimension's judgement: cached, or asked for with bounded retries; never raises for
    a bad or failed response (the result then has `score=None` and the errors). A hard
    reject whose quote fails `quote_problem` is kept as `refused`, not as evidence."""
    h = task.content_hash
    if cache is not None:
        hit = cache.get(h, dimension, cfg.version)
        if hit is not None:
            return hit
    llm = make_client(cfg, client)
    out = LlmJudgement(task_hash=h, dimension=dimension, version=cfg.version)
    messages = task_prompt(task, dimension)
    for attempt in range(1, cfg.max_retries + 1):
        if llm.breaker.open:
            out.errors.append(llm.breaker.why())
            out.status = "unavailable"
            break
        out.attempts = attempt
        try:
            parsed = parse_score(llm.complete(messages))
        except LlmResponseError as e:
            out.errors.append(f"attempt {attempt}: rejected response: {e}")
            out.status = "invalid"
        except Exception as e:  # noqa: BLE001 - transport failures are retried, then a row
            if isinstance(e, KeyboardInterrupt):
                raise
            out.errors.append(f"attempt {attempt}: {type(e).__name__}: {str(e)[:200]}")
            out.status = "error"
        else:
            out.score, out.rationale, out.status = parsed.score, parsed.rationale, "ok"
            hard = parsed.hard_reject
            problem = quote_problem(task, hard) if hard is not None else None
            if problem is None:
                out.hard_reject = hard
            else:
                out.refused, out.refused_why = hard, problem
            if cache is not None:
                cache.put(out)
            return out
        if attempt < cfg.max_retries and not llm.breaker.open:
            time.sleep(cfg.backoff_s * 2 ** (attempt - 1))
    if llm.breaker.open:
        out.status = "unavailable"
        if not out.errors or out.errors[-1] != llm.breaker.why():
            out.errors.append(llm.breaker.why())
    if cache is not None and out.status != "unavailable":
        cache.put(out)  # recorded as a failure; never read back as a score
    return out


def judge_task(
    task: Task, cfg: LlmConfig, *, client: Any = None, cache: LlmCache | None = None
) -> dict[Dimension, LlmJudgement]:
    """All six dimensions of one task (one client, so one breaker, across them)."""
    llm = make_client(cfg, client)
    return {d: judge_dimension(task, d, cfg, client=llm, cache=cache) for d in Dimension}


def repair_instruction_llm(
    task: Task, requirements: list[str], cfg: LlmConfig, *, client: Any = None
) -> str | None:
    """An LLM rewrite of the instruction stating `requirements`; None when the call fails
    (or the breaker is open)."""
    llm = make_client(cfg, client)
    listed = "\n".join(f"- {r}" for r in requirements)
    messages = [
        {"role": "system", "content": REPAIR_SYSTEM},
        {"role": "user", "content": f"Instruction:\n{task.instruction}\n\nState:\n{listed}"},
    ]
    for attempt in range(cfg.max_retries):
        if llm.breaker.open:
            return None
        try:
            text = llm.complete(messages)
        except Exception as e:  # noqa: BLE001 - a failed repair falls back to the programmatic one
            if isinstance(e, KeyboardInterrupt):
                raise
            text = None
        if text and text.strip():
            return text.strip() + "\n"
        time.sleep(cfg.backoff_s * 2**attempt)
    return None
