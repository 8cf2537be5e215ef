"""The LLM judge against a local OpenAI-compatible HTTP server started by the test.

The fake server is the true external boundary here (a remote LLM API): it answers
POST /v1/chat/completions with scripted message contents, in order, and counts requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audit.judge_llm import (
    DirCache,
    LlmConfig,
    LlmResponseError,
    WarehouseCache,
    judge_dimension,
    judge_task,
    parse_score,
    repair_instruction_llm,
)
from audit.rubric import Dimension
from tests.audit.planted import base_task


class FakeLlm:
    """Scripted answers; when the script runs out, the last answer repeats."""

    def __init__(self) -> None:
        self.script: list[str] = ['{"score": 0.9, "rationale": "ok"}']
        self.requests: list[dict] = []
        self.status = 200


@pytest.fixture
def llm() -> Iterator[tuple[FakeLlm, LlmConfig]]:
    fake = FakeLlm()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append(body)
            content = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
            doc = {
                "id": f"c{len(fake.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            data = json.dumps(doc).encode()
            self.send_response(fake.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cfg = LlmConfig(
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        model="judge-test",
        api_key="test",
        max_retries=3,
        backoff_s=0,
        timeout_s=10,
    )
    try:
        yield fake, cfg
    finally:
        server.shutdown()
        server.server_close()


def test_parse_score_validates_the_schema():
    assert parse_score('{"score": 0.25, "rationale": "x"}').score == 0.25
    assert parse_score('```json\n{"score": 1, "rationale": "fine"}\n```').score == 1.0
    for bad in ("not json", '{"score": 7, "rationale": "x"}', '{"score": -0.1, "rationale": "x"}',
                '{"score": 0.5}', '{"score": 0.5, "rationale": ""}', "[1, 2]", ""):  # fmt: skip
        with pytest.raises(LlmResponseError):
            parse_score(bad)


def test_valid_scores_for_every_dimension(llm):
    fake, cfg = llm
    out = judge_task(base_task(), cfg)
    assert {d: j.score for d, j in out.items()} == {d: 0.9 for d in Dimension}
    assert len(fake.requests) == 6
    assert fake.requests[0]["model"] == "judge-test"
    assert "Instruction-verifier alignment" in fake.requests[0]["messages"][1]["content"]


def test_out_of_range_and_malformed_are_rejected_then_retried(llm):
    fake, cfg = llm
    fake.script = ['{"score": 7, "rationale": "too high"}', "I think it is fine",
                   '{"score": 0.4, "rationale": "a hidden path"}']  # fmt: skip
    j = judge_dimension(base_task(), Dimension.ALIGNMENT, cfg)
    assert (j.score, j.status, j.attempts) == (0.4, "ok", 3)
    assert "score" in j.errors[0] and "not JSON" in j.errors[1]


def test_persistently_bad_responses_become_a_failure_row(llm):
    fake, cfg = llm
    fake.script = ['{"score": 1.5, "rationale": "x"}']
    j = judge_dimension(base_task(), Dimension.FAIRNESS, cfg)
    assert j.score is None and j.status == "invalid" and j.attempts == 3
    assert len(fake.requests) == 3


def test_http_errors_are_retried_then_a_failure_row(llm):
    fake, cfg = llm
    fake.status = 500
    j = judge_dimension(base_task(), Dimension.COVERAGE, cfg)
    assert j.score is None and j.status == "error" and len(j.errors) == 3


def test_cache_by_task_hash_prompt_version_and_model(llm, tmp_path):
    fake, cfg = llm
    cache = DirCache(tmp_path / "llm-cache")
    task = base_task()
    first = judge_dimension(task, Dimension.ALIGNMENT, cfg, cache=cache)
    again = judge_dimension(task, Dimension.ALIGNMENT, cfg, cache=cache)
    assert first.score == again.score == 0.9 and len(fake.requests) == 1
    other_model = cfg.model_copy(update={"model": "another"})
    judge_dimension(task, Dimension.ALIGNMENT, other_model, cache=cache)
    changed = task.model_copy(update={"instruction": task.instruction + "\nAlso be quick.\n"})
    judge_dimension(changed, Dimension.ALIGNMENT, cfg, cache=cache)
    assert len(fake.requests) == 3


def test_failures_are_not_cached(llm, tmp_path):
    fake, cfg = llm
    cache = DirCache(tmp_path / "c")
    fake.script = ["nope"]
    assert judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=cache).score is None
    fake.script = ['{"score": 0.6, "rationale": "fine now"}']
    assert judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=cache).score == 0.6


def test_warehouse_cache_survives_a_new_process_view(llm, tmp_path):
    fake, cfg = llm
    store = tmp_path / "store"
    judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=WarehouseCache(store))
    hit = judge_dimension(base_task(), Dimension.ALIGNMENT, cfg, cache=WarehouseCache(store))
    assert hit.status == "cached" and hit.score == 0.9 and len(fake.requests) == 1


def test_llm_repair_returns_the_rewritten_instruction(llm):
    fake, cfg = llm
    fake.script = ["Do the thing. Also write /app/report/summary.txt."]
    text = repair_instruction_llm(base_task(), ["path /app/report/summary.txt"], cfg)
    assert text is not None and "/app/report/summary.txt" in text


def test_unconfigured_judge_is_off(monkeypatch):
    monkeypatch.delenv("T1_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("T1_LLM_MODEL", "m")
    assert LlmConfig.from_env() is None
    monkeypatch.setenv("T1_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert LlmConfig.from_env() is not None
