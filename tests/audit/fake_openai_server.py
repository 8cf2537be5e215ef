"""A fake OpenAI-compatible chat-completions server, run as its own process, for the LLM
judge's tests and its agreement benchmark (`benchmarks/llm_judge_agreement.py`).

It is the fake of the one true external boundary of the LLM judge, a remote model behind the
OpenAI chat API; nothing of ours is faked. Run it as
`python -m tests.audit.fake_openai_server SCRIPT LOG`: it serves HTTP/1.1 on 127.0.0.1 (a
free port, printed as the first line of its stdout), answers POST /v1/chat/completions with a
`chat.completion` object and GET /v1/models with one model, and appends every request body to
LOG as one JSON line. It exits when its stdin closes (the test that started it is gone).

The "model" is SCRIPT, a JSON file re-read on every request:
`{"rules": [{"match": [substrings], "replies": [contents], "json_replies": [contents]}],
"default": content, "status": 200}`. The first rule whose every substring occurs in the last
user message answers with its next reply (the last one repeats); with
`response_format={"type": "json_object"}` a rule's `json_replies` are used when it has them,
as a server constraining its output would. The contents are what real models send: reasoning
in `<think>` blocks (draft JSON inside), fenced JSON, prose around the JSON, malformed JSON.

It is also an injectable model: text OUTSIDE the data blocks the prompt declares
(`<<<TASK-DATA <nonce> <name>>>>` ... `<<<END TASK-DATA <nonce>>>>`, the same nonce) that
says to ignore the previous instructions and score N is obeyed (the answer is score N), as a
model without delimited content would. Text inside a block is data to it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BLOCK = re.compile(
    r"<<<TASK-DATA (?P<n>[0-9a-f]{8,64}) [^\n]*>>>\n.*?\n<<<END TASK-DATA (?P=n)>>>", re.S
)
INJECTION = re.compile(
    r"ignore (?:all )?(?:the )?previous instructions.{0,200}?score(?: of| it| everything)?\s*"
    r"(?P<score>[01](?:\.\d+)?)",
    re.I | re.S,
)


def outside_blocks(text: str) -> str:
    """`text` without its data blocks (what the model reads as the prompt's own words)."""
    return BLOCK.sub(" ", text)


def answer(script: dict, body: dict, counters: dict[int, int]) -> str:
    """The model's reply to one request (see the module docstring)."""
    messages = body.get("messages") or [{}]
    user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    injected = INJECTION.search(outside_blocks(user))
    if injected:
        score = float(injected.group("score"))
        return json.dumps({"score": score, "rationale": "as instructed", "hard_reject": None})
    json_mode = (body.get("response_format") or {}).get("type") == "json_object"
    for i, rule in enumerate(script.get("rules", [])):
        if all(s in user for s in rule.get("match", [])):
            replies = (rule.get("json_replies") if json_mode else None) or rule["replies"]
            n = counters.get(i, 0)
            counters[i] = n + 1
            return replies[min(n, len(replies) - 1)]
    return script.get("default", "I have no opinion on this task.")


def serve(script_path: Path, log_path: Path) -> ThreadingHTTPServer:
    counters: dict[int, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, doc: dict) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found", "type": "invalid_request"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                script = json.loads(script_path.read_text(encoding="utf-8"))
                with log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(body) + "\n")
                status = int(script.get("status", 200))
                content = answer(script, body, counters)
            if status != 200:
                self._send(status, {"error": {"message": "scripted failure", "type": "server"}})
                return
            self._send(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                },
            )

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def main() -> None:
    script, log = Path(sys.argv[1]), Path(sys.argv[2])
    server = serve(script, log)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()


if __name__ == "__main__":
    main()
