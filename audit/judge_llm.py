"""The LLM judge: one versioned rubric prompt per dimension, scored through any
OpenAI-compatible endpoint, used only when configured.

Configuration comes from T1_LLM_BASE_URL, T1_LLM_API_KEY and T1_LLM_MODEL (`LlmConfig.from_env`
returns None when the URL or model is unset: the audit then runs on the executable judge
alone). The judge sees the instruction, the environment's files with their contents (each
clipped, all bounded), the verifier and the reference solution.

Each response must be a JSON object `{"score": <0..1>, "rationale": "<text>",
"hard_reject": null | {"code": "<hard-reject code>", "quote": "<exact span>"}}`; a hard reject
must quote a span that occurs in the material shown (whitespace aside), so the evidence is
checkable. Anything else (not JSON, out of range, no rationale, an unknown code, a quote
found nowhere) is a rejected response and is retried with backoff up to `max_retries` times;
after that the judgement is a failure (`status="invalid"` or `"error"`), never an exception.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.rubric import Dimension
from audit.static_checks import decode, verifier_texts
from audit.verdict import Code, Finding, Source, Verdict
from tasks.model import Task
from warehouse.records import AuditRecord

if TYPE_CHECKING:
    from warehouse.recording import StoreRef

PROMPT_VERSION = "v2"
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

SYSTEM = (
    "You audit terminal tasks used to train agents with reinforcement learning. A task has a "
    "public instruction, an environment, a held-out verifier (tests) and a reference solution "
    "the agent never sees. Judge ONE dimension. Reply with a JSON object only: "
    '{"score": <number from 0 to 1>, "rationale": "<one or two sentences>", '
    '"hard_reject": null}. Only when the task is certainly defective, set "hard_reject" to '
    '{"code": "<one of: ' + ", ".join(c.value for c in HARD_REJECT_CODES) + '>", '
    '"quote": "<the exact text of the task, copied verbatim, that proves it>"}.'
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
    backoff_s: float = Field(0.5, ge=0)

    @classmethod
    def from_env(cls) -> LlmConfig | None:
        url, model = os.environ.get("T1_LLM_BASE_URL"), os.environ.get("T1_LLM_MODEL")
        if not url or not model:
            return None
        return cls(base_url=url, model=model, api_key=os.environ.get("T1_LLM_API_KEY") or "none")

    @property
    def version(self) -> str:
        """The cache/audit version of this judge: prompt version and model."""
        return f"{PROMPT_VERSION}@{self.model}"


class LlmHardReject(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: Code
    quote: str = Field(min_length=3)


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
    status: str = "ok"  # ok | cached | invalid | error
    attempts: int = 0
    errors: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.score is not None

    def findings(self) -> list[Finding]:
        """The judgement as typed findings: its score's rationale, a quoted hard reject, or
        the failure."""
        dim = self.dimension.value
        if not self.ok:
            why = self.errors[-1] if self.errors else self.status
            return [Finding(code=Code.LLM_ERROR, source=Source.INFRA, item=dim, evidence=why)]
        out = [Finding(code=Code.LLM_SCORE, source=Source.LLM, item=dim, evidence=self.rationale)]
        if self.hard_reject is not None:
            why = f"quoted: {self.hard_reject.quote!r} ({dim}: {self.rationale})"
            out.append(
                Finding(code=self.hard_reject.code, source=Source.LLM, item=dim, evidence=why)
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


def parse_score(text: str | None, material: str | None = None) -> LlmScore:
    """The schema-validated score in a response; LlmResponseError otherwise. With
    `material` (the task text shown to the judge), a hard reject's quote must occur in it."""
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
    if hard is not None and material is not None and _flat(hard.quote) not in _flat(material):
        raise LlmResponseError(f"hard_reject.quote {hard.quote[:60]!r} occurs nowhere in the task")
    return parsed


def _flat(text: str) -> str:
    return " ".join(text.split())


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
        hard = next((f for f in found if f.code in HARD_REJECT_CODES), None)
        quote = hard.evidence if hard is not None else ""
        return LlmJudgement(
            task_hash=task_hash,
            dimension=dimension,
            version=version,
            score=rec.scores["score"],
            rationale=rationale,
            hard_reject=LlmHardReject(code=hard.code, quote=quote) if hard else None,
            status="cached",
        )

    def put(self, judgement: LlmJudgement) -> None:
        """Store a judgement: a score under its version, a failure under an error version."""
        from warehouse.recording import record_audits

        rec = judgement.to_record()
        record_audits(self.store, [rec])
        if judgement.ok:
            self._load()[(rec.task_hash, rec.judge, rec.audit_version)] = rec


# ---- calling the model -----------------------------------------------------------------------


def make_client(cfg: LlmConfig) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=cfg.base_url, api_key=cfg.api_key, max_retries=0, timeout=cfg.timeout_s)


def _complete(client: Any, cfg: LlmConfig, messages: list[dict[str, str]]) -> str | None:
    resp = client.chat.completions.create(model=cfg.model, messages=messages, temperature=0)
    return resp.choices[0].message.content if resp.choices else None


def judge_dimension(
    task: Task,
    dimension: Dimension,
    cfg: LlmConfig,
    *,
    client: Any = None,
    cache: LlmCache | None = None,
) -> LlmJudgement:
    """One dimension's judgement: cached, or asked for with bounded retries; never raises for
    a bad or failed response (the result then has `score=None` and the errors)."""
    h = task.content_hash
    if cache is not None:
        hit = cache.get(h, dimension, cfg.version)
        if hit is not None:
            return hit
    client = client or make_client(cfg)
    out = LlmJudgement(task_hash=h, dimension=dimension, version=cfg.version)
    messages = task_prompt(task, dimension)
    material = messages[1]["content"]
    for attempt in range(1, cfg.max_retries + 1):
        out.attempts = attempt
        try:
            parsed = parse_score(_complete(client, cfg, messages), material)
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
            out.hard_reject = parsed.hard_reject
            if cache is not None:
                cache.put(out)
            return out
        if attempt < cfg.max_retries:
            time.sleep(cfg.backoff_s * 2 ** (attempt - 1))
    if cache is not None:
        cache.put(out)  # recorded as a failure; never read back as a score
    return out


def judge_task(
    task: Task, cfg: LlmConfig, *, client: Any = None, cache: LlmCache | None = None
) -> dict[Dimension, LlmJudgement]:
    """All six dimensions of one task."""
    client = client or make_client(cfg)
    return {d: judge_dimension(task, d, cfg, client=client, cache=cache) for d in Dimension}


def repair_instruction_llm(
    task: Task, requirements: list[str], cfg: LlmConfig, *, client: Any = None
) -> str | None:
    """An LLM rewrite of the instruction stating `requirements`; None when the call fails."""
    client = client or make_client(cfg)
    listed = "\n".join(f"- {r}" for r in requirements)
    messages = [
        {"role": "system", "content": REPAIR_SYSTEM},
        {"role": "user", "content": f"Instruction:\n{task.instruction}\n\nState:\n{listed}"},
    ]
    for attempt in range(cfg.max_retries):
        try:
            text = _complete(client, cfg, messages)
        except Exception as e:  # noqa: BLE001 - a failed repair falls back to the programmatic one
            if isinstance(e, KeyboardInterrupt):
                raise
            text = None
        if text and text.strip():
            return text.strip() + "\n"
        time.sleep(cfg.backoff_s * 2**attempt)
    return None
