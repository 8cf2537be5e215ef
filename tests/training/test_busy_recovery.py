"""benchmarks/busy_recovery.after_failure: what follows each busy observation is counted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "busy_recovery", Path(__file__).resolve().parents[2] / "benchmarks" / "busy_recovery.py"
)
busy_recovery = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_recovery)


def call(command: str) -> dict:
    args = {"command": command}
    return {"role": "assistant", "tool_calls": [{"function": {"name": "shell", "arguments": args}}]}


def test_counts_the_turn_after_each_failure():
    busy = {"role": "tool", "content": "exit_code: 1\nstdout:\nBUSY"}
    ok = {"role": "tool", "content": "exit_code: 0\nstdout:\n3 left"}
    messages = [
        {"role": "user", "content": "run ./tick"},
        call("./tick"), busy, call("./tick"), ok,   # again
        call("./tick"), busy, call("ls"), busy,     # other, then
        {"role": "assistant", "content": "Done."},  # gave up
    ]  # fmt: skip
    counts = busy_recovery.after_failure(messages, "BUSY")
    assert dict(counts) == {"again": 1, "other": 1, "gave_up": 1}
    assert not busy_recovery.after_failure(messages, "absent")
