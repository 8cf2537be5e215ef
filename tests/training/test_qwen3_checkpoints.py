"""A policy from any local Qwen3 / Qwen3-MoE checkpoint directory, with its own tokenizer and chat
template: randomly initialized tiny checkpoints saved in HF layout, a tokenizer trained here and
a Qwen3-style template (tool results inside user turns, its own tools preamble), nothing
downloaded. The harness renders with the checkpoint's template, TITO keeps drift at zero with
that tokenizer, the engine serves a dense model (no routing), and a train step runs on the dense
one without R3 (R3 only for MoE)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

pytestmark = pytest.mark.torch

# The structure of Qwen3's own chat template (tools preamble, reasoning kept only after the last
# user query, tool results rendered inside a user turn), written here so nothing is downloaded.
QWEN3_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    'arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": '
    '<function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}"
    "{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}"
    "{%- if ns.multi_step_tool and message.role == 'user' and not "
    "(message.content.startswith('<tool_response>')) %}"
    "{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}"
    "{%- endfor %}"
    "{%- for message in messages %}{%- set content = message.content or '' %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set reasoning = message.reasoning_content or '' %}"
    "{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls or [] %}"
    "{%- if (loop.first and content) or (not loop.first) %}{{- '\\n' }}{%- endif %}"
    "{%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'<tool_call>\\n{"name": "\' + tool_call.name + \'", "arguments": \' }}'
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def qwen3_tokenizer():
    """A byte-level BPE trained on a few lines, with the Qwen3-style template installed."""
    from training.chat_tokenizer import train_chat_tokenizer

    texts = ["echo hi ran ok", "You may call one or more functions", "tool_response user"] * 20
    tok = train_chat_tokenizer(texts, vocab_size=400)
    tok.chat_template = QWEN3_TEMPLATE
    return tok


def _save(model, tok, out: Path) -> Path:
    from training.chat_tokenizer import save_chat_tokenizer

    model.config.eos_token_id = None  # stop on the harness's <|im_end|> only
    model.save_pretrained(str(out))
    save_chat_tokenizer(tok, out)
    return out


@pytest.fixture(scope="module")
def checkpoints(qwen3_tokenizer, tmp_path_factory):
    """{"dense": a Qwen3 directory, "moe": a Qwen3-MoE directory}, random tiny weights."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training.policy import PolicyConfig, build_policy

    torch.manual_seed(0)
    vocab = len(qwen3_tokenizer)
    dense = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=True,
        )
    )  # fmt: skip
    moe = build_policy(PolicyConfig(vocab_size=vocab, hidden_size=32, moe_intermediate_size=32))
    root = tmp_path_factory.mktemp("qwen3")
    return {
        "dense": _save(dense, qwen3_tokenizer, root / "dense"),
        "moe": _save(moe, qwen3_tokenizer, root / "moe"),
    }


def _rollout(tokenizer, layers: int, k: int, turns: int = 3):
    from tests.training.test_harness import FakeSandbox, ScriptedEngine
    from training.harness import HarnessConfig, PolicyAgent

    engine = ScriptedEngine(tokenizer, layers=layers, k=k)
    cfg = HarnessConfig(max_turns=turns, max_context_tokens=10**6, return_routed_experts=k > 0)
    agent = PolicyAgent(engine, tokenizer, cfg)
    return agent.rollout(FakeSandbox(), "t", "Say hi.", time.monotonic() + 600)


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_a_checkpoint_loads_with_its_own_template_and_tito_holds(kind, checkpoints):
    """Regression guard: `load_policy` refused anything but qwen3_moe, and the routing shape
    came from num_hidden_layers / num_experts_per_tok (a dense config has no top-k)."""
    from tests.training.test_harness import _check_tito_trajectory
    from training.chat_format import IM_END
    from training.chat_tokenizer import decode_ids, load_chat_tokenizer
    from training.policy import load_policy, routing_shape

    path = checkpoints[kind]
    model = load_policy(path)
    layers, k = routing_shape(model.config)
    assert (layers, k) == ((0, 0) if kind == "dense" else (2, 2))
    tok = load_chat_tokenizer(path)
    assert tok.chat_template == QWEN3_TEMPLATE  # its own, not the project's
    traj = _rollout(tok, layers, k)
    assert traj.stop == "turn_limit" and len(traj.turns) == 3
    sample, report = _check_tito_trajectory(traj, tok.convert_tokens_to_ids(IM_END), layers, k)
    text = decode_ids(tok, sample.token_ids.tolist())
    assert "You may call one or more functions" in text  # the checkpoint's tools preamble
    assert "<|im_start|>user\n<tool_response>\nexit_code: 0" in text  # tool results as user
    assert sample.routed_experts.shape == (len(sample), layers, k)


def test_the_local_engine_serves_a_dense_checkpoint(checkpoints):
    """A dense model has no router: a request for routed experts gets an empty record."""
    from training.engine_local import LocalEngine
    from training.engine_protocol import EngineClient, GenerateRequest, SamplingParams

    with LocalEngine(checkpoints["dense"], seed=0, skip_tokenizer_init=True) as eng:
        client = EngineClient(eng.base_url, num_layers=0, top_k=0)
        gen = client.generate(
            GenerateRequest(
                input_ids=[5, 17, 42],
                sampling_params=SamplingParams(max_new_tokens=4, temperature=1.0),
                return_logprob=True,
                return_routed_experts=True,
            )
        )
        client.close()
    assert len(gen.output_ids) == 4 and len(gen.output_logprobs) == 4
    assert gen.routed_experts is not None and gen.routed_experts.shape == (3 + 4 - 1, 0, 0)


def test_a_train_step_on_a_dense_checkpoint_runs_without_r3(checkpoints, qwen3_tokenizer, tmp_path):
    """R3 only for MoE: asked for (r3 = true), a dense policy replays nothing and its streams
    carry (n, 0, 0) records; the step trains. (The MoE path is every other campaign test's.)"""
    from tests.training.synthetic import Finish, batch_of, campaign, rollout
    from training.campaign import assemble, train_step

    c = campaign(checkpoints["dense"], tmp_path, qwen3_tokenizer, r3=True, lr=1e-3, critic_lr=1e-3)
    assert not c.r3
    trajs = [_rollout(qwen3_tokenizer, 0, 0, turns=2) for _ in range(2)]
    rollouts = [rollout(t.turns, "finished", Finish(i % 2, 1), slot=i) for i, t in enumerate(trajs)]
    samples = assemble(c, batch_of(rollouts))
    assert all(s.sample.routed_experts.shape[1:] == (0, 0) for s in samples)
    before = {n: p.detach().clone() for n, p in c.actor.named_parameters()}
    metrics = train_step(c, samples)
    assert metrics["train/actor_updated"] == 1.0 and np.isfinite(metrics["losses/policy"])
    assert any(not torch.equal(p, before[n]) for n, p in c.actor.named_parameters())
