"""The LLM judge's agreement with a labelled set of judgements, measured through a fake model
served by its own process over the OpenAI chat API (`tests.audit.fake_openai_server`).

The labelled set (`tests/fixtures/llm_judge/labelled.json`) holds 48 judgements: 8 tasks in
Harbor layout (`tests/fixtures/llm_judge/tasks/`: two clean, six with one planted defect, one
of them also carrying a prompt injection) x 6 dimensions. Each judgement has the answers a
real endpoint sends for it (reasoning in `<think>` blocks with draft JSON, fenced JSON, prose
around JSON, malformed JSON first, quotes that are spans of the wrong thing, paraphrased
quotes, plain misjudgements) and a label: the hard-reject class a correct judge of that
dimension names (or none) and whether it finds the dimension broken (a score under the
rubric's LLM minimum; 0.5 for training value). Agreement is measured on the judge's decided
outcome (the confirmed hard reject and the score), i.e. what the robustness layers make of
realistic answers; it says nothing about any real model's own accuracy. Used by
tests/audit/test_llm_agreement.py and benchmarks/llm_judge_agreement.py.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from audit.judge_exec import ExecEvidence
from audit.judge_llm import LlmConfig, judge_dimension, make_client
from audit.rubric import Dimension, load_rubric
from tasks.corpus import load_task

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "llm_judge"


class FakeModel:
    """The fake model's server process (see `tests.audit.fake_openai_server`)."""

    def __init__(self, workdir: Path) -> None:
        self.script_path = workdir / "script.json"
        self.log_path = workdir / "requests.jsonl"
        self.set_script({"rules": []})
        self.log_path.write_text("")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.audit.fake_openai_server",
             str(self.script_path), str(self.log_path)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.close()
            raise RuntimeError(f"fake model server did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{line}/v1"

    def set_script(self, script: dict) -> None:
        self.script_path.write_text(json.dumps(script), encoding="utf-8")

    def requests(self) -> list[dict]:
        return [json.loads(ln) for ln in self.log_path.read_text().splitlines() if ln]

    def config(self, **changes: object) -> LlmConfig:
        fields = {"base_url": self.url, "model": "judge-fake", "api_key": "test",
                  "backoff_s": 0, "timeout_s": 10} | changes  # fmt: skip
        return LlmConfig.model_validate(fields)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextmanager
def fake_model() -> Iterator[FakeModel]:
    with tempfile.TemporaryDirectory(prefix="t1-fake-llm-") as d:
        model = FakeModel(Path(d))
        try:
            yield model
        finally:
            model.close()


def labelled() -> dict:
    return json.loads((FIXTURE / "labelled.json").read_text(encoding="utf-8"))


def script_of(doc: dict) -> dict:
    """The fake model's rules: each judgement's answers, found by its task's marker and its
    dimension's prompt."""
    rules = [
        {"match": [doc["tasks"][j["task"]], doc["dimensions"][j["dimension"]]],
         "replies": j["replies"]}
        for j in doc["judgements"]
    ]  # fmt: skip
    return {"rules": rules, "default": "I cannot tell."}


@dataclass(frozen=True)
class Outcome:
    """One labelled judgement and what the judge decided."""

    id: str
    label_hard: str | None
    label_broken: bool
    hard: str | None
    broken: bool | None  # None: no score (an error or an abstention)
    status: str
    refused: str = ""

    @property
    def agrees(self) -> bool:
        return self.hard == self.label_hard and self.broken == self.label_broken


def broken_below(dimension: Dimension) -> float:
    """The score under which the judge finds a dimension broken: the rubric's LLM minimum
    (training value has none: 0.5)."""
    return load_rubric("t1").llm_critical_min.get(dimension, 0.5)


def judge_all(cfg: LlmConfig, doc: dict) -> list[Outcome]:
    """Every labelled judgement through `judge_dimension` (one client, no cache), with the
    executable evidence the fixture records for its task."""
    client = make_client(cfg)
    takes_evidence = "evidence" in inspect.signature(judge_dimension).parameters
    tasks = {name: load_task(FIXTURE / "tasks" / name) for name in doc["tasks"]}
    out = []
    for j in doc["judgements"]:
        task, dim = tasks[j["task"]], Dimension(j["dimension"])
        extra = {}
        if takes_evidence:
            ev = doc["evidence"].get(j["task"], {})
            extra["evidence"] = ExecEvidence(task_hash=task.content_hash, **ev)
        got = judge_dimension(task, dim, cfg, client=client, **extra)
        broken = None if got.score is None else got.score < broken_below(dim)
        out.append(
            Outcome(
                id=j["id"],
                label_hard=j["label"]["hard_reject"],
                label_broken=j["label"]["broken"],
                hard=got.hard_reject.code.value if got.hard_reject else None,
                broken=broken,
                status=got.status,
                refused=got.refused.code.value if got.refused else "",
            )
        )
    return out


@dataclass(frozen=True)
class Agreement:
    n: int
    agree: int  # both the hard reject and the broken flag as labelled
    hard_agree: int
    broken_agree: int
    false_hard: int  # a hard reject where the label has none (or another class)
    missed_hard: int  # no hard reject (of the class) where the label has one
    undecided: int  # no score

    @property
    def rate(self) -> float:
        return self.agree / self.n if self.n else 0.0


def agreement(outcomes: list[Outcome]) -> Agreement:
    return Agreement(
        n=len(outcomes),
        agree=sum(o.agrees for o in outcomes),
        hard_agree=sum(o.hard == o.label_hard for o in outcomes),
        broken_agree=sum(o.broken == o.label_broken for o in outcomes),
        false_hard=sum(o.hard is not None and o.hard != o.label_hard for o in outcomes),
        missed_hard=sum(o.label_hard is not None and o.hard != o.label_hard for o in outcomes),
        undecided=sum(o.broken is None for o in outcomes),
    )
