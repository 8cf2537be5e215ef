"""TITO with a real trained BPE: each boundary case, each drift-causing harness behaviour, the
four-stream offsets, and an auditor that can fail."""

from __future__ import annotations

import numpy as np
import pytest

from training.chat_format import IM_END, Message, ToolCall, parse_assistant_turn
from training.chat_format import render_assistant_text as raw_text
from training.chat_tokenizer import decode_ids, encode_text
from training.engine_protocol import Generation
from training.harness import render_conversation, tito_next_prompt
from training.tito import (
    BoundaryCase,
    Provenance,
    RolloutSample,
    TurnRecord,
    assemble_trial,
    audit_sample,
    retokenized_sample,
)

pytestmark = pytest.mark.torch

L, K = 2, 2
OBS = "exit_code: 0\nstdout:\nhello"


def route(q: int, salt: int = 0) -> np.ndarray:
    """A routing row that names its engine position, so misplaced rows are detectable."""
    return np.array([[(q + salt) % 8, (q + salt + 3) % 8]] * L, dtype=np.int32)


def gen(prompt: list[int], out: list[int], *, start: int, salt: int = 0) -> Generation:
    rows = np.stack([route(q, salt) for q in range(start, len(prompt) + len(out) - 1)])
    return Generation(
        rid="r",
        prompt_ids=list(prompt),
        output_ids=list(out),
        output_logprobs=[-0.01 * (i + 1) for i in range(len(out))],
        finish="stop",
        weight_version="0",
        routed_experts=rows,
        routed_experts_start=start,
    )


def opening(tok) -> tuple[list[Message], list[int]]:
    msgs = [Message("system", "You are an agent."), Message("user", "List the files.")]
    return msgs, encode_text(tok, render_conversation(tok, msgs, generation_prompt=True))


def sampled(tok, text: str, *, close: bool = True) -> list[int]:
    return encode_text(tok, text + (IM_END if close else ""))


def im_end(tok) -> int:
    return tok.convert_tokens_to_ids(IM_END)


def one_boundary(tok, out_ids: list[int], *, role: str = "tool"):
    """Turn 1 samples `out_ids`; the harness parses it, adds an observation, joins turn 2."""
    msgs, prompt = opening(tok)
    stream = prompt + out_ids
    msgs.append(parse_assistant_turn(decode_ids(tok, out_ids)).message)
    msgs.append(Message(role, OBS))  # type: ignore[arg-type]
    b = tito_next_prompt(tok, msgs, stream, im_end_id=im_end(tok))
    return msgs, prompt, stream, b


def ls_call(style: str = "template", reasoning: str | None = "I list the files.") -> str:
    return raw_text(
        reasoning=reasoning,
        content="",
        calls=[ToolCall("shell", {"command": "ls -la"})],
        style=style,
    )


def test_exact_prefix_appends_only_the_new_messages(tokenizer):
    msgs, prompt, stream, b = one_boundary(tokenizer, sampled(tokenizer, ls_call()))
    assert b.case == BoundaryCase.EXACT
    rendered = encode_text(tokenizer, render_conversation(tokenizer, msgs, generation_prompt=True))
    assert rendered == stream + b.append_ids
    assert decode_ids(tokenizer, b.append_ids).startswith("\n<|im_start|>tool\n<tool_response>")


def test_bounded_repair_over_the_turn_end_suffix(tokenizer):
    # the model closes its turn with "\n<|im_end|>" where the template writes "<|im_end|>\n"
    out = encode_text(tokenizer, ls_call()) + encode_text(tokenizer, "\n" + IM_END)
    msgs, prompt, stream, b = one_boundary(tokenizer, out)
    assert b.case == BoundaryCase.REPAIR and b.repaired == 1
    rendered = encode_text(tokenizer, render_conversation(tokenizer, msgs, generation_prompt=True))
    assert decode_ids(tokenizer, stream + b.append_ids).replace("\n<|im_end|>", "<|im_end|>") == (
        decode_ids(tokenizer, rendered).replace("<|im_end|>\n<|im_end|>", "<|im_end|>")
    )


def test_repair_refuses_a_tail_that_is_not_template_suffix(tokenizer):
    out = encode_text(tokenizer, ls_call()) + encode_text(tokenizer, " x" + IM_END)
    *_, b = one_boundary(tokenizer, out)
    assert b.case == BoundaryCase.TEXT


def non_canonical(tok, ids: list[int], word: str) -> list[int]:
    """Replace the canonical token of `word` by its single characters (same text)."""
    for i, t in enumerate(ids):
        if decode_ids(tok, [t]) == word:
            chars = tok.convert_tokens_to_ids(list(word))
            return ids[:i] + chars + ids[i + 1 :]
    raise AssertionError(f"{word!r} is not a single token in this vocabulary")


def test_behaviour_non_canonical_split_is_kept_not_reencoded(tokenizer):
    canonical = sampled(tokenizer, ls_call())
    word = next(
        w for w in ("shell", "command", "list", "files") if len(encode_text(tokenizer, w)) == 1
    )
    split = non_canonical(tokenizer, canonical, word)
    assert decode_ids(tokenizer, split) == decode_ids(tokenizer, canonical) and split != canonical
    msgs, prompt, stream, b = one_boundary(tokenizer, split)
    assert b.case == BoundaryCase.TEXT
    assert (stream + b.append_ids)[: len(stream)] == stream  # the split survives
    _assert_zero_drift_and_neither_drifts(tokenizer, msgs, prompt, split, b, expect_neither=True)


def test_behaviour_reasoning_pruned_before_last_user_message(tokenizer):
    out = sampled(tokenizer, ls_call())
    msgs, prompt, stream, b = one_boundary(tokenizer, out, role="user")
    assert b.case == BoundaryCase.TEXT
    rendered = render_conversation(tokenizer, msgs, generation_prompt=True)
    assert "<think>" not in rendered  # the template pruned the sampled reasoning
    full = decode_ids(tokenizer, stream + b.append_ids)
    assert "<think>\nI list the files.\n</think>" in full  # TITO kept it
    # with observations as tool messages nothing is pruned and the prefix is exact
    assert one_boundary(tokenizer, out, role="tool")[3].case == BoundaryCase.EXACT
    _assert_zero_drift_and_neither_drifts(tokenizer, msgs, prompt, out, b, expect_neither=False)


@pytest.mark.parametrize("style", ["compact", "loose"])
def test_behaviour_tool_call_reserialized_with_other_whitespace(tokenizer, style):
    out = sampled(tokenizer, ls_call(style))
    msgs, prompt, stream, b = one_boundary(tokenizer, out)
    assert b.case == BoundaryCase.TEXT
    rendered = render_conversation(tokenizer, msgs, generation_prompt=True)
    assert decode_ids(tokenizer, out).replace(IM_END, "") not in rendered
    _assert_zero_drift_and_neither_drifts(tokenizer, msgs, prompt, out, b, expect_neither=True)


def _assert_zero_drift_and_neither_drifts(tok, msgs, prompt, out, b, *, expect_neither):
    """Assemble the two-turn trial: TITO has zero drift; re-tokenizing the text drifts."""
    stream = prompt + out
    turn2_prompt = stream + b.append_ids
    out2 = sampled(tok, raw_text(reasoning="Done now.", content="Done.", calls=[]))
    turns = [
        TurnRecord(gen(prompt, out, start=0)),
        TurnRecord(gen(turn2_prompt, out2, start=len(stream) - 1), boundary=b.case),
    ]
    sample = assemble_trial(turns, im_end_id=im_end(tok), num_layers=L, top_k=K)
    report = audit_sample(sample, turns, lambda ids: decode_ids(tok, list(ids)))
    assert report.drift_rate == 0.0 and report.span_mismatches == 0
    assert report.loss_positions == len(out) + len(out2)
    assert report.cases[b.case.value] == 1
    # "neither": the harness's final history, re-rendered and re-encoded
    final = msgs + [parse_assistant_turn(decode_ids(tok, out2)).message]
    ids, mask = _rendered_with_assistant_mask(tok, final)
    neither = audit_sample(retokenized_sample(sample, ids, mask))
    if expect_neither:
        assert neither.loss_drifted > 0 and neither.drift_rate > 0.0
    assert neither.loss_positions < report.loss_positions or neither.loss_drifted > 0


def _rendered_with_assistant_mask(tok, msgs):
    from training.harness import rendered_history

    return rendered_history(tok, msgs)


def test_four_streams_move_together_over_three_turns(tokenizer):
    tok = tokenizer
    msgs, prompt = opening(tok)
    outs = [
        sampled(tok, ls_call()),  # -> exact
        encode_text(tok, ls_call()) + encode_text(tok, "\n" + IM_END),  # -> repair
        sampled(tok, ls_call("compact")),  # -> text fallback
        sampled(tok, raw_text(reasoning=None, content="Done.", calls=[])),
    ]
    turns: list[TurnRecord] = []
    stream: list[int] = []
    cur_prompt, boundary = prompt, None
    for t, out in enumerate(outs):
        start = 0 if t == 0 else len(stream) - 1
        turns.append(TurnRecord(gen(cur_prompt, out, start=start), boundary=boundary))
        stream = cur_prompt + out
        msgs.append(parse_assistant_turn(decode_ids(tok, out)).message)
        msgs.append(Message("tool", OBS))
        b = tito_next_prompt(tok, msgs, stream, im_end_id=im_end(tok))
        cur_prompt, boundary = stream + b.append_ids, b.case
    sample = assemble_trial(turns, im_end_id=im_end(tok), num_layers=L, top_k=K)
    assert [c.value for c in sample.boundaries] == [
        "exact_prefix",
        "bounded_repair",
        "text_fallback",
    ]
    n = len(sample)
    assert n == len(stream)
    assert all(
        len(a) == n
        for a in (
            sample.loss_mask,
            sample.sampler_logprobs,
            sample.routed_experts,
            sample.provenance,
        )
    )
    for turn, (s, e) in zip(turns, sample.turn_spans, strict=True):
        assert sample.token_ids[s:e].tolist() == turn.generation.output_ids
        assert np.allclose(sample.sampler_logprobs[s:e], turn.generation.output_logprobs)
        assert sample.loss_mask[s:e].all()
    assert int(sample.loss_mask.sum()) == sum(len(o) for o in outs)
    # engine position == stream position in TITO mode, and every row sits where it was recorded
    for p in range(n - 1):
        assert np.array_equal(sample.routed_experts[p], route(p))
    assert (sample.routed_experts[n - 1] == -1).all()
    assert sample.provenance[n - 1] == Provenance.PLACEHOLDER
    assert sample.routing_conflicts == 0
    # a window moves all four streams by the same offset
    w = sample.window(5, n - 3)
    assert np.array_equal(w.token_ids, sample.token_ids[5 : n - 3])
    assert np.array_equal(w.routed_experts, sample.routed_experts[5 : n - 3])
    assert w.turn_spans[0] == (sample.turn_spans[0][0] - 5, sample.turn_spans[0][1] - 5)
    assert np.array_equal(
        w.sampler_logprobs[w.turn_spans[1][0] : w.turn_spans[1][1]],
        sample.sampler_logprobs[sample.turn_spans[1][0] : sample.turn_spans[1][1]],
    )


def test_offline_assembly_of_a_retokenizing_harness(tokenizer):
    """A harness that re-rendered text each turn: the assembler repairs the join itself."""
    tok = tokenizer
    msgs, prompt = opening(tok)
    out1 = sampled(tok, ls_call("loose"))
    msgs.append(parse_assistant_turn(decode_ids(tok, out1)).message)
    msgs.append(Message("tool", OBS))
    prompt2 = encode_text(tok, render_conversation(tok, msgs, generation_prompt=True))
    out2 = sampled(tok, raw_text(reasoning=None, content="Done.", calls=[]))
    assert prompt2[: len(prompt) + len(out1)] != prompt + out1
    turns = [
        TurnRecord(gen(prompt, out1, start=0)),
        TurnRecord(gen(prompt2, out2, start=0, salt=5)),
    ]
    sample = assemble_trial(
        turns,
        im_end_id=im_end(tok),
        num_layers=L,
        top_k=K,
        decode=lambda ids: decode_ids(tok, list(ids)),
    )
    assert sample.boundaries == [BoundaryCase.TEXT]
    report = audit_sample(sample, turns)
    assert report.drift_rate == 0.0 and report.span_mismatches == 0
    n1 = len(prompt) + len(out1)
    cut = len(prompt2) - (len(sample) - n1 - len(out2))
    assert decode_ids(tok, prompt2[cut:]).startswith("\n<|im_start|>tool")
    for p in range(n1, len(sample) - 1):
        assert np.array_equal(sample.routed_experts[p], route(p - n1 + cut, salt=5))


def test_auditor_catches_a_shifted_stream(tokenizer):
    msgs, prompt = opening(tokenizer)
    out = sampled(tokenizer, ls_call())
    turns = [TurnRecord(gen(prompt, out, start=0))]
    sample = assemble_trial(turns, im_end_id=im_end(tokenizer), num_layers=L, top_k=K)
    assert audit_sample(sample, turns).span_mismatches == 0
    s, e = sample.turn_spans[0]
    sample.sampler_logprobs[s:e] = np.roll(sample.sampler_logprobs[s:e], 1)
    assert audit_sample(sample, turns).span_mismatches == 1
    sample.provenance[s] = Provenance.RETOKENIZED
    assert audit_sample(sample).drift_rate == pytest.approx(1 / (e - s))


def test_streams_of_unequal_length_are_rejected():
    with pytest.raises(ValueError, match="differ in length"):
        RolloutSample(
            token_ids=np.zeros(3, np.int64),
            loss_mask=np.zeros(3, bool),
            sampler_logprobs=np.zeros(2, np.float32),
            routed_experts=np.zeros((3, L, K), np.int32),
            provenance=np.zeros(3, np.int8),
        )


@pytest.mark.parametrize("style", ["template", "compact"])
@pytest.mark.parametrize("role", ["tool", "user"])
def test_windowed_boundary_equals_full_rerender(tokenizer, style, role):
    """The harness re-renders only a window per turn; it must append exactly what a full
    re-render would, over several turns of history."""
    tok = tokenizer
    msgs, prompt = opening(tok)
    stream, turn_start = list(prompt), len(prompt)
    for t in range(3):
        out = sampled(tok, ls_call(style if t != 1 else "template"))
        stream = stream + out
        msgs.append(parse_assistant_turn(decode_ids(tok, out)).message)
        msgs.append(Message(role, f"{OBS} {t}"))  # type: ignore[arg-type]
        full = tito_next_prompt(tok, msgs, stream, im_end_id=im_end(tok))
        window = tito_next_prompt(tok, msgs, stream, im_end_id=im_end(tok), turn_start=turn_start)
        assert window.append_ids == full.append_ids
        if t == 0:
            assert window.case == full.case
        turn_start = len(stream) + len(window.append_ids)
        stream = stream + window.append_ids
