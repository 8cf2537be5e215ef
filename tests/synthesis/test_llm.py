"""The LLM operator at the protocol level, against a local OpenAI-compatible HTTP server.

The server (started per test on 127.0.0.1) is the fake of the one true external boundary here,
a remote chat-completions endpoint: it replays scripted replies (valid JSON, malformed JSON,
schema violations, 429 and 500 errors) and records each request it received.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from synthesis.llm import LLMClient, LLMError, LLMRewrite, LLMSettings, llm_operators
from synthesis.operators import Parent, RewriteContext, RewriteError, build_child
from synthesis.validate import ValidationConfig, Verdict, validate
from tests.synthesis.tiny import tiny_parent as make_tiny_parent

VALID = {
    "title": "word count of the greeting",
    "solution_steps": ["wc -w < /app/out.txt | tr -d ' ' > /app/words_r1.txt"],
    "env_files": {},
    "setup": [],
    "requires": ["wc"],
    "tests": "def test_r1_word_count():\n    assert open('/app/words_r1.txt').read() == '1\\n'\n",
    "instruction_section": "## Additional requirement: word count\n\nWrite the number of "
    "words in `/app/out.txt` followed by a newline to `/app/words_r1.txt`.",
    "creates": ["/app/words_r1.txt"],
}


class FakeEndpoint:
    """Scripted chat-completions server: each reply is (status, content-or-body, headers)."""

    def __init__(self, replies: list[tuple[int, object, dict[str, str]]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                endpoint.requests.append(
                    {"path": self.path, "body": json.loads(self.rfile.read(length))}
                )
                status, payload, headers = (
                    endpoint.replies.pop(0) if endpoint.replies else (500, "exhausted", {})
                )
                if status == 200:
                    body = {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": payload},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                else:
                    body = {"error": {"message": str(payload), "type": "error"}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def ok(content: object) -> tuple[int, object, dict[str, str]]:
    return 200, content if isinstance(content, str) else json.dumps(content), {}


def client_for(server: FakeEndpoint, sleeps: list[float], attempts: int = 4) -> LLMClient:
    settings = LLMSettings(
        base_url=server.url, model="fake-model", api_key="k", max_attempts=attempts,
        backoff_s=0.5, timeout_s=10,
    )  # fmt: skip
    return LLMClient(settings, sleep=sleeps.append)


def tiny_parent() -> Parent:
    return make_tiny_parent("tiny-llm")


def test_valid_reply_becomes_a_child() -> None:
    with FakeEndpoint([ok(VALID)]) as server:
        sleeps: list[float] = []
        op = LLMRewrite(client_for(server, sleeps))
        parent = tiny_parent()
        child = build_child(
            parent, op.name, op.family, 1, op.extend(parent, RewriteContext(1, random.Random(0)))
        )
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["model"] == "fake-model"
    assert req["body"]["response_format"] == {"type": "json_object"}
    assert "TAG: r1" in req["body"]["messages"][1]["content"]
    assert sleeps == []
    assert child.lineage.operator == "llm_rewrite" and child.lineage.family == "llm"
    assert "/app/words_r1.txt" in child.instruction
    assert child.solution["solve.sh"].decode().rstrip().endswith("/app/words_r1.txt")


def test_malformed_json_is_sent_back_and_retried() -> None:
    with FakeEndpoint([ok("{not json"), ok(VALID)]) as server:
        sleeps: list[float] = []
        proposal = client_for(server, sleeps).propose("prompt")
    assert proposal.title == VALID["title"]
    second = server.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": "{not json"}
    assert "invalid" in second[-1]["content"]
    assert sleeps == []  # a bad reply is not a transport error: no backoff


@pytest.mark.parametrize(
    "bad",
    [
        {k: v for k, v in VALID.items() if k != "tests"},  # missing field
        VALID | {"tests": "def helper():\n    pass\n"},  # no test_ function
        VALID | {"tests": "def test_r1_x(:\n"},  # does not parse
        VALID | {"env_files": {"../escape.sh": "x"}},  # unsafe path
        VALID | {"surprise": 1},  # extra field
    ],
    ids=["missing", "no-tests", "syntax", "unsafe-path", "extra-field"],
)
def test_schema_violations_are_retried(bad) -> None:
    with FakeEndpoint([ok(bad), ok(VALID)]) as server:
        proposal = client_for(server, []).propose("prompt")
    assert proposal.tests == VALID["tests"] and len(server.requests) == 2


def test_429_and_500_are_retried_with_backoff() -> None:
    replies = [(429, "slow down", {"retry-after": "0.25"}), (500, "boom", {}), ok(VALID)]
    with FakeEndpoint(replies) as server:
        sleeps: list[float] = []
        proposal = client_for(server, sleeps).propose("prompt")
    assert proposal.title == VALID["title"]
    assert len(server.requests) == 3
    assert sleeps == [0.25, 1.0]  # Retry-After honoured, then backoff_s * 2**attempt


def test_gives_up_after_max_attempts() -> None:
    with FakeEndpoint([(500, "down", {})] * 3) as server:
        sleeps: list[float] = []
        client = client_for(server, sleeps, attempts=3)
        with pytest.raises(LLMError, match="after 3 attempts.*HTTP 500"):
            client.propose("prompt")
    assert len(server.requests) == 3 and len(sleeps) == 3


def test_client_error_fails_at_once() -> None:
    with FakeEndpoint([(400, "bad request", {}), ok(VALID)]) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            client_for(server, []).propose("prompt")
    assert len(server.requests) == 1


def test_operator_turns_llm_failure_into_rewrite_error() -> None:
    with FakeEndpoint([ok("[]")] * 2) as server:
        op = LLMRewrite(client_for(server, [], attempts=2))
        with pytest.raises(RewriteError, match="llm_rewrite"):
            op.extend(tiny_parent(), RewriteContext(1, random.Random(0)))


def test_wrongly_named_tests_are_refused() -> None:
    reply = VALID | {"tests": "def test_word_count():\n    assert True\n"}
    with FakeEndpoint([ok(reply)]) as server:
        op = LLMRewrite(client_for(server, []))
        with pytest.raises(RewriteError, match="test_r1_"):
            op.extend(tiny_parent(), RewriteContext(1, random.Random(0)))


def test_settings_from_env() -> None:
    assert LLMSettings.from_env({}) is None
    assert llm_operators(None) == () or LLMSettings.from_env() is not None
    s = LLMSettings.from_env({"T1_LLM_BASE_URL": "http://x/v1", "T1_LLM_MODEL": "m"})
    assert s is not None and s.model == "m" and s.api_key == "unused"


@pytest.mark.sandbox
def test_llm_child_validates_in_the_sandbox() -> None:
    with FakeEndpoint([ok(VALID)]) as server:
        op = LLMRewrite(client_for(server, []))
        parent = tiny_parent()
        ext = op.extend(parent, RewriteContext(1, random.Random(0)))
    child = build_child(parent, op.name, op.family, 1, ext)
    v = validate(child, parent, ValidationConfig(reruns=1, max_repairs=0))
    assert v.verdict == Verdict.ACCEPTED, v.detail
    assert v.new_assertions == ["test_r1_word_count"]
