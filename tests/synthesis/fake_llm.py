"""A scripted OpenAI-compatible chat-completions server over real HTTP, for synthesis tests.

It is the fake of one true external boundary, a remote LLM API (POST /v1/chat/completions):
each request takes the next scripted reply, which is (status, content or error body, headers),
or a function of the request body returning the content (a reply written from what the
request shows, as a model would). Every request is recorded. The server binds a free port in
this area's test range (18100-18199) on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PORTS = range(18100, 18200)
Reply = tuple[int, Any, dict[str, str]]


def ok(content: object) -> Reply:
    """A 200 reply: a JSON object (serialized), raw text, or a function of the request."""
    if callable(content) or isinstance(content, str):
        return 200, content, {}
    return 200, json.dumps(content), {}


class FakeEndpoint:
    """Scripted chat-completions server (see the module docstring)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                endpoint.requests.append({"path": self.path, "body": body})
                status, payload, headers = (
                    endpoint.replies.pop(0) if endpoint.replies else (500, "exhausted", {})
                )
                if callable(payload):
                    payload = payload(body)
                    payload = payload if isinstance(payload, str) else json.dumps(payload)
                if status == 200:
                    doc = {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": payload},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                else:
                    doc = {"error": {"message": str(payload), "type": "error"}}
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = _bind(Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def last_user_message(self, i: int) -> str:
        return self.requests[i]["body"]["messages"][-1]["content"]

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _bind(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    last: OSError | None = None
    for port in PORTS:
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as e:  # in use: try the next port of the range
            last = e
    raise RuntimeError(f"no free port in {PORTS.start}-{PORTS.stop - 1}") from last
