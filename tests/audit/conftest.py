"""Shared fixtures of the audit tests.

`llm` starts a local OpenAI-compatible HTTP server (the fake of the one true external
boundary here, a remote LLM API): it answers POST /v1/chat/completions with scripted message
contents, in order, and records every request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audit.judge_llm import LlmConfig


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
