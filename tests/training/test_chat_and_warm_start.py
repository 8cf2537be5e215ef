"""Chat template, turn parsing, solve.sh splitting and the warm-start recipe key."""

from __future__ import annotations

import random

import pytest

from training.chat_format import (
    IM_END,
    Message,
    ToolCall,
    format_observation,
    parse_assistant_turn,
    render_assistant_text,
)
from training.chat_tokenizer import decode_ids, encode_text
from training.harness import render_conversation
from training.policy import PolicyConfig
from training.trajectories import BUILTIN_TRAJECTORIES, render_example, solution_steps
from training.warm_start import WarmStartConfig, numerics_versions, recipe_key, weights_digest

pytestmark = pytest.mark.torch


def test_parse_assistant_turn():
    text = (
        '<think>\nlook first\n</think>\n\n<tool_call>\n{"name":"shell","arguments":'
        '{"command":"ls"}}\n</tool_call>' + IM_END
    )
    parsed = parse_assistant_turn(text)
    assert parsed.malformed_tool_call is None
    assert parsed.message.reasoning_content == "look first"
    assert parsed.message.tool_calls == [ToolCall("shell", {"command": "ls"})]
    bad = parse_assistant_turn("<tool_call>\n{not json}\n</tool_call>")
    assert bad.malformed_tool_call is not None and not bad.message.tool_calls
    done = parse_assistant_turn("Done." + IM_END)
    assert done.message.content == "Done." and not done.message.tool_calls


def test_template_prunes_reasoning_before_the_last_user_message(tokenizer):
    a = Message(
        "assistant",
        "",
        reasoning_content="first thought",
        tool_calls=[ToolCall("shell", {"command": "ls"})],
    )
    base = [Message("system", "s"), Message("user", "u"), a]
    as_tool = render_conversation(
        tokenizer, [*base, Message("tool", "out")], generation_prompt=True
    )
    as_user = render_conversation(
        tokenizer, [*base, Message("user", "out")], generation_prompt=True
    )
    assert "first thought" in as_tool and "first thought" not in as_user
    assert as_tool.endswith("<|im_start|>assistant\n")
    assert '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>' in as_tool


def test_template_matches_raw_template_style_and_tokenizer_roundtrips(tokenizer):
    call = ToolCall("shell", {"command": "grep -c x f"})
    raw = render_assistant_text(reasoning="r", content="", calls=[call], style="template")
    msg = parse_assistant_turn(raw).message
    rendered = render_conversation(tokenizer, [Message("user", "u"), msg], generation_prompt=False)
    assert raw + IM_END in rendered
    ids = encode_text(tokenizer, rendered)
    assert decode_ids(tokenizer, ids) == rendered
    assert tokenizer.convert_tokens_to_ids(IM_END) in ids


def test_observation_is_defused_and_cut():
    obs = format_observation(exit_code=1, stdout="a" * 5000 + "<|im_end|>", stderr="boom")
    assert "<|im_end|>" not in obs and len(obs) < 2100 and "chars cut" in obs


def test_solution_steps_keep_heredocs_and_compound_commands_whole():
    script = """#!/bin/bash
set -euo pipefail
# make the tool
cat > /app/t.sh <<'EOF'
echo one
echo two
EOF
for f in a b; do
  echo "$f"
done
python3 -c 'print(1)' \\
  --flag
"""
    steps = solution_steps(script)
    assert [s.command.splitlines()[0] for s in steps] == [
        "cat > /app/t.sh <<'EOF'",
        "for f in a b; do",
        "python3 -c 'print(1)' \\",
    ]
    assert steps[0].reasoning == "make the tool" and steps[0].command.endswith("EOF")
    assert steps[1].command.endswith("done")


def test_warm_start_example_puts_loss_on_assistant_text_only(tokenizer):
    ex = render_example(tokenizer, BUILTIN_TRAJECTORIES[0], random.Random(0))
    assert len(ex.token_ids) == len(ex.loss_mask)
    loss_text = decode_ids(
        tokenizer, [t for t, m in zip(ex.token_ids, ex.loss_mask, strict=True) if m]
    )
    ctx_text = decode_ids(
        tokenizer, [t for t, m in zip(ex.token_ids, ex.loss_mask, strict=True) if not m]
    )
    assert "<tool_call>" in loss_text and "<think>" in loss_text
    assert "exit_code" not in loss_text and "exit_code" in ctx_text
    assert "hello world" in loss_text and "# Tools" in ctx_text


def test_recipe_key_tracks_every_input():
    p, w = PolicyConfig(), WarmStartConfig()
    k = recipe_key(p, w, ["a"])
    assert k == recipe_key(p, w, ["a"])
    assert k != recipe_key(p.model_copy(update={"hidden_size": 96}), w, ["a"])
    assert k != recipe_key(p, w.model_copy(update={"steps": 1}), ["a"])
    assert k != recipe_key(p, w, ["b"])
    # the same recipe under other library versions builds other weights: another key
    v = numerics_versions()
    assert k == recipe_key(p, w, ["a"], v)
    assert k != recipe_key(p, w, ["a"], {**v, "transformers": "0.0.1"})


def test_weights_digest_follows_the_weights_not_the_path(tmp_path):
    for d, data in (("a", b"w" * 8), ("b", b"w" * 8), ("c", b"w" * 7 + b"v")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "model.safetensors").write_bytes(data)
    a, b, c = (weights_digest(tmp_path / d) for d in "abc")
    assert a == b != c


def test_two_callers_of_a_missing_recipe_build_it_once(tmp_path, monkeypatch):
    """Two processes (the demo and the UI, two test workers) asking for the same checkpoint at
    once: one builds it, the other waits and gets the same directory. Before: both built it
    side by side (twice the minutes, both CPUs)."""
    import json
    import threading
    import time

    import training.warm_start as ws

    monkeypatch.setenv("T1_FORGE_CACHE", str(tmp_path / "cache"))
    builds: list[str] = []

    def fake_build(policy, warm, trajectories, texts, out, **_):
        builds.append(out.name)
        time.sleep(0.5)  # long enough for the other caller to arrive meanwhile
        out.mkdir(parents=True)
        (out / "warm_start.json").write_text(json.dumps({"policy": policy.model_dump()}))

    monkeypatch.setattr(ws, "_build", fake_build)
    got: list = []
    callers = [threading.Thread(target=lambda: got.append(ws.warm_started_policy())) for _ in "ab"]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(builds) == 1, builds
    assert len(got) == 2 and got[0] == got[1] and (got[0] / "warm_start.json").is_file()
