"""TITO (token-in, token-out): a multi-turn trial as one stream of four per-token arrays.

The stream is `RolloutSample`: token ids, loss mask, sampler logprobs and routed experts, all of
length n and moved by the same offsets by every transformation (the pipeline's central invariant).
Sampled tokens carry loss; prompts, observations and template glue are masked context.

Between turns the assembler tests progressively weaker relations between the stream so far `S`
and the canonical re-rendering `R` of the conversation (paper, Box 4.2):

- `EXACT` (Case 6): `S` is a bit-exact prefix of `R`; append `R[len(S):]`.
- `REPAIR` (Case 7): `S` and `R` agree up to a short tail that differs only inside the template's
  shared turn-end suffix (`<|im_end|>\\n`, whitespace); a bounded grid of (k dropped, r skipped)
  token counts, k, r <= `max_repair`, is searched; append `R[lcp + r:]` after all of `S`.
- `TEXT` (Case 8): the token prefix is broken beyond the suffix (a non-canonical sampled split
  re-encoded canonically, reasoning pruned before the last user message, a tool call re-serialized
  with other whitespace). Fall back to text space: keep `S` and append the canonical encoding of
  the new messages' text only, cut at a control-token boundary so it is stable under encoding.

In every case the sampled ids of earlier turns stay in the stream untouched, so no loss-bearing
position is ever re-tokenized: drift in the loss region is zero by construction, which
`audit_sample` checks rather than assumes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from enum import IntEnum, StrEnum

import numpy as np

from training.chat_format import IM_END
from training.engine_protocol import Generation


class BoundaryCase(StrEnum):
    """How a turn's prompt was joined to the stream before it (Box 4.2, Cases 6-8)."""

    EXACT = "exact_prefix"
    REPAIR = "bounded_repair"
    TEXT = "text_fallback"


class Provenance(IntEnum):
    """Where a stream position's token id came from."""

    ALIGNED = 0
    """An id the engine consumed or emitted at this place, with its records attached."""
    RETOKENIZED = 1
    """An id produced by re-encoding text; the sampler never emitted it here."""
    PLACEHOLDER = 2
    """An aligned id whose routing record is a placeholder (-1), e.g. the final sampled token."""


@dataclass
class RolloutSample:
    """The hot per-trial record: four per-token streams plus provenance, all of length n.

    token_ids (n,) int64; loss_mask (n,) bool; sampler_logprobs (n,) float32, NaN where the
    sampler gave none; routed_experts (n, L, k) int32, -1 where no row was recorded;
    provenance (n,) int8 of `Provenance`. `turn_spans[t]` is the [start, end) of turn t's sampled
    ids; `boundaries[t]` is how turn t+1's prompt joined the stream.
    """

    token_ids: np.ndarray
    loss_mask: np.ndarray
    sampler_logprobs: np.ndarray
    routed_experts: np.ndarray
    provenance: np.ndarray
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    boundaries: list[BoundaryCase] = field(default_factory=list)
    routing_conflicts: int = 0
    """Positions where a later turn's routing row disagreed with the row already kept."""

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        lengths = {
            "loss_mask": len(self.loss_mask),
            "sampler_logprobs": len(self.sampler_logprobs),
            "routed_experts": len(self.routed_experts),
            "provenance": len(self.provenance),
        }
        bad = {k: v for k, v in lengths.items() if v != n}
        if bad:
            raise ValueError(f"streams differ in length from token_ids ({n}): {bad}")
        if self.routed_experts.ndim != 3:
            raise ValueError(f"routed_experts must be (n, L, k), got {self.routed_experts.shape}")

    def __len__(self) -> int:
        return len(self.token_ids)

    def window(self, start: int, end: int) -> RolloutSample:
        """Positions [start, end) of every stream; turn spans are clipped and shifted alike."""
        if not 0 <= start <= end <= len(self):
            raise ValueError(f"window [{start}, {end}) outside a stream of {len(self)}")
        spans = [
            (max(s, start) - start, min(e, end) - start)
            for s, e in self.turn_spans
            if s < end and e > start
        ]
        return RolloutSample(
            token_ids=self.token_ids[start:end].copy(),
            loss_mask=self.loss_mask[start:end].copy(),
            sampler_logprobs=self.sampler_logprobs[start:end].copy(),
            routed_experts=self.routed_experts[start:end].copy(),
            provenance=self.provenance[start:end].copy(),
            turn_spans=spans,
            boundaries=list(self.boundaries),
            routing_conflicts=self.routing_conflicts,
        )

    def loss_positions(self) -> np.ndarray:
        """Indices carrying loss, (m,)."""
        return np.flatnonzero(self.loss_mask)


@dataclass(frozen=True)
class Boundary:
    """The resolved join between the stream so far and the next turn's prompt."""

    case: BoundaryCase
    append_ids: list[int]
    """Ids to append after the whole stream to form the next prompt (all masked context)."""
    repaired: int = 0
    """Tokens of the re-rendering skipped by a bounded repair (0 outside `REPAIR`)."""


Decode = Callable[[Sequence[int]], str]


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _suffix_only(text: str) -> bool:
    """True when `text` is made of turn-end markers and whitespace only (the shared suffix)."""
    return text.replace(IM_END, "").strip() == ""


def resolve_boundary(
    stream_ids: Sequence[int],
    rendered_ids: Sequence[int],
    delta_ids: Sequence[int],
    decode: Decode,
    *,
    max_repair: int = 4,
) -> Boundary:
    """Join the stream so far to the re-rendered conversation (Cases 6, 7, 8 in that order).

    stream_ids: every id so far (prompts, glue, sampled outputs). rendered_ids: canonical encoding
    of the whole conversation re-rendered by the template, generation prompt included.
    delta_ids: canonical encoding of just the new messages' text (plus the turn-end marker if the
    stream lacks it), used by the text fallback. `decode` maps ids to text.
    """
    if max_repair < 0:
        raise ValueError(f"max_repair must be >= 0, got {max_repair}")
    n = len(stream_ids)
    lcp = common_prefix_len(stream_ids, rendered_ids)
    if lcp == n:
        return Boundary(BoundaryCase.EXACT, list(rendered_ids[n:]))
    tail = stream_ids[lcp:]
    if len(tail) <= max_repair:
        tail_text = decode(tail)
        if _suffix_only(tail_text):
            for r in range(0, max_repair + 1):
                skipped = decode(rendered_ids[lcp : lcp + r])
                if (
                    lcp + r <= len(rendered_ids)
                    and _suffix_only(skipped)
                    and skipped.count(IM_END) == tail_text.count(IM_END)
                ):
                    return Boundary(BoundaryCase.REPAIR, list(rendered_ids[lcp + r :]), repaired=r)
    return Boundary(BoundaryCase.TEXT, list(delta_ids))


def new_messages_text(rendered_text: str, *, closed_messages: int, stream_closed: bool) -> str:
    """Text of the messages appended after the first `closed_messages` rendered blocks.

    Every message renders as `<|im_start|>...<|im_end|>\\n`, so the new text starts right after the
    `closed_messages`-th `<|im_end|>`; when the stream did not sample that `<|im_end|>` itself
    (`stream_closed` False: stopped by length or a stop string), the marker is included. Cutting at
    a control token keeps the canonical encoding of the cut text equal to the tail of the full
    encoding. Raises ValueError when the rendering has fewer blocks than `closed_messages`.
    """
    pos = -len(IM_END)
    for _ in range(closed_messages):
        pos = rendered_text.find(IM_END, pos + len(IM_END))
        if pos < 0:
            raise ValueError(f"rendering has fewer than {closed_messages} closed messages")
    return rendered_text[pos + len(IM_END) :] if stream_closed else rendered_text[pos:]


@dataclass
class TurnRecord:
    """One engine call of a trial, as the harness saw it."""

    generation: Generation
    boundary: BoundaryCase | None = None
    """How this turn's prompt joined the previous stream; None for the first turn."""


def assemble_trial(
    turns: Sequence[TurnRecord],
    *,
    im_end_id: int,
    num_layers: int,
    top_k: int,
    decode: Decode | None = None,
    max_repair: int = 4,
) -> RolloutSample:
    """Build the four-stream sample of a trial from its engine calls.

    When a turn's prompt extends the stream exactly (the TITO harness always sends such prompts)
    its tail is appended as context and the harness's recorded boundary case is kept. When it does
    not (a harness that re-rendered text), the boundary is resolved here: a bounded repair, or the
    text fallback which keeps the stream and appends the prompt from the first block after the
    previous assistant message. Routing rows are written at the stream position of the engine
    position they describe; an existing row is kept and a disagreeing one counted as a conflict.
    """
    if not turns:
        raise ValueError("a trial needs at least one turn")
    ids: list[int] = []
    mask: list[bool] = []
    logp: list[float] = []
    prov: list[int] = []
    rows: list[np.ndarray | None] = []
    spans: list[tuple[int, int]] = []
    cases: list[BoundaryCase] = []
    conflicts = 0
    empty_row = np.full((num_layers, top_k), -1, dtype=np.int32)
    for t, turn in enumerate(turns):
        gen = turn.generation
        prompt = gen.prompt_ids
        if t == 0:
            offset_in_prompt = 0  # engine position q sits at stream position q
            base = 0
            shared = 0
            ids.extend(prompt)
            mask.extend([False] * len(prompt))
            logp.extend([np.nan] * len(prompt))
            prov.extend([Provenance.ALIGNED] * len(prompt))
            rows.extend([None] * len(prompt))
        else:
            n = len(ids)
            shared = common_prefix_len(ids, prompt)  # engine q < shared is stream position q
            if shared == n:
                cut = n
                cases.append(turn.boundary or BoundaryCase.EXACT)
            else:
                if decode is None:
                    raise ValueError(f"turn {t}: prompt does not extend the stream; pass decode")
                cut, case = _offline_cut(ids, prompt, im_end_id, decode, max_repair)
                cases.append(case)
            # engine position q (>= cut) lands at stream position n + q - cut
            offset_in_prompt = cut
            base = n
            tail = prompt[cut:]
            ids.extend(tail)
            mask.extend([False] * len(tail))
            logp.extend([np.nan] * len(tail))
            prov.extend([Provenance.ALIGNED] * len(tail))
            rows.extend([None] * len(tail))
        start = len(ids)
        ids.extend(gen.output_ids)
        mask.extend([True] * len(gen.output_ids))
        if len(gen.output_logprobs) != len(gen.output_ids):
            raise ValueError(
                f"turn {t}: {len(gen.output_logprobs)} logprobs for "
                f"{len(gen.output_ids)} sampled ids"
            )
        logp.extend(gen.output_logprobs)
        prov.extend([Provenance.ALIGNED] * len(gen.output_ids))
        rows.extend([None] * len(gen.output_ids))
        spans.append((start, len(ids)))
        if gen.routed_experts is not None:
            for i, row in enumerate(gen.routed_experts):
                q = gen.routed_experts_start + i  # engine position
                if q < shared:
                    p = q  # a prefix the stream shares with this prompt
                elif q < offset_in_prompt:
                    continue  # re-rendered history the stream kept in its sampled form
                else:
                    p = base + q - offset_in_prompt
                kept = rows[p]
                if kept is None:
                    rows[p] = row
                elif not np.array_equal(kept, row):
                    conflicts += 1
    routed = np.stack([r if r is not None else empty_row for r in rows]).astype(np.int32)
    provenance = np.asarray(prov, dtype=np.int8)
    missing = (routed < 0).any(axis=(1, 2))
    provenance[missing & (provenance == Provenance.ALIGNED)] = Provenance.PLACEHOLDER
    return RolloutSample(
        token_ids=np.asarray(ids, dtype=np.int64),
        loss_mask=np.asarray(mask, dtype=bool),
        sampler_logprobs=np.asarray(logp, dtype=np.float32),
        routed_experts=routed,
        provenance=provenance,
        turn_spans=spans,
        boundaries=cases,
        routing_conflicts=conflicts,
    )


def _offline_cut(
    stream: Sequence[int], prompt: Sequence[int], im_end_id: int, decode: Decode, max_repair: int
) -> tuple[int, BoundaryCase]:
    """Where in `prompt` the new part starts, for a prompt that does not extend `stream`."""
    lcp = common_prefix_len(stream, prompt)
    tail = stream[lcp:]
    if len(tail) <= max_repair and _suffix_only(decode(tail)):
        tail_ends = decode(tail).count(IM_END)
        for r in range(0, max_repair + 1):
            skipped = decode(prompt[lcp : lcp + r])
            if _suffix_only(skipped) and skipped.count(IM_END) == tail_ends:
                return lcp + r, BoundaryCase.REPAIR
    closed = sum(1 for i in stream if i == im_end_id)
    stream_closed = bool(stream) and stream[-1] == im_end_id
    seen = 0
    for q, tok in enumerate(prompt):
        if tok == im_end_id:
            seen += 1
            if stream_closed and seen == closed:
                return q + 1, BoundaryCase.TEXT
            if not stream_closed and seen == closed + 1:
                return q, BoundaryCase.TEXT
    raise ValueError("text fallback could not locate the previous turn's end in the next prompt")


@dataclass(frozen=True)
class AuditReport:
    """Per-sample audit: position counts and the drift rate inside the loss region."""

    positions: int
    aligned: int
    retokenized: int
    placeholder: int
    loss_positions: int
    loss_drifted: int
    spans_checked: int
    span_mismatches: int
    """Turns whose sampled ids, or their decoded text, are not found at their recorded span."""
    cases: dict[str, int]

    @property
    def drift_rate(self) -> float:
        """Fraction of loss positions whose id is not the sampler's (0.0 for an empty loss)."""
        return self.loss_drifted / self.loss_positions if self.loss_positions else 0.0


def audit_sample(
    sample: RolloutSample,
    turns: Sequence[TurnRecord] | None = None,
    decode: Decode | None = None,
) -> AuditReport:
    """Count aligned / re-tokenized / placeholder positions and drift in the loss region.

    With `turns`, also re-locates each turn's sampled ids at its recorded span and checks id and
    (with `decode`) text equality, so a bug that shifts a stream is caught, not trusted.
    """
    prov = sample.provenance
    loss = sample.loss_mask
    mismatches = 0
    checked = 0
    if turns is not None:
        if len(turns) != len(sample.turn_spans):
            raise ValueError(f"{len(turns)} turns but {len(sample.turn_spans)} spans")
        for turn, (s, e) in zip(turns, sample.turn_spans, strict=True):
            checked += 1
            got = sample.token_ids[s:e].tolist()
            want = turn.generation.output_ids
            same = got == want
            if same and decode is not None:
                same = decode(got) == decode(want)
            if same:
                lp = sample.sampler_logprobs[s:e]
                same = np.allclose(lp, np.asarray(turn.generation.output_logprobs, np.float32))
            mismatches += 0 if same else 1
    cases: dict[str, int] = {c.value: 0 for c in BoundaryCase}
    for c in sample.boundaries:
        cases[c.value] += 1
    return AuditReport(
        positions=len(sample),
        aligned=int((prov == Provenance.ALIGNED).sum()),
        retokenized=int((prov == Provenance.RETOKENIZED).sum()),
        placeholder=int((prov == Provenance.PLACEHOLDER).sum()),
        loss_positions=int(loss.sum()),
        loss_drifted=int((loss & (prov == Provenance.RETOKENIZED)).sum()),
        spans_checked=checked,
        span_mismatches=mismatches,
        cases=cases,
    )


def _turn_segments(mask: np.ndarray) -> list[list[tuple[int, int]]]:
    """Split a stream into [context, assistant] pairs per turn, then [trailing context].

    A missing context (two turns back to back, or nothing after the last turn) is an empty
    range, so both streams of one trial yield the same number of pairs.
    """
    pairs: list[list[tuple[int, int]]] = []
    i, n = 0, len(mask)
    while i < n:
        j = i
        while j < n and not mask[j]:
            j += 1
        if j == n:
            break
        k = j
        while k < n and mask[k]:
            k += 1
        pairs.append([(i, j), (j, k)])
        i = k
    pairs.append([(i, n)])
    return pairs


def retokenized_sample(
    sampled: RolloutSample, rendered_ids: Sequence[int], assistant_mask: Sequence[bool]
) -> RolloutSample:
    """The stream a text pipeline trains on: the re-rendered history, re-encoded ("neither").

    rendered_ids: canonical encoding of the final conversation as the harness persisted it;
    assistant_mask: True on the assistant-message positions a text pipeline puts loss on.
    Both streams alternate context and assistant segments, turn for turn; segment i of one is
    aligned with segment i of the other (difflib matching blocks over ids, so a token is never
    paired with one from another turn). Matched positions carry the sampler's records; every
    other position is re-tokenized, with NaN logprob and -1 routing rows, and counts as drift
    where it carries loss. Raises ValueError when the two streams have different turn counts.
    """
    if len(rendered_ids) != len(assistant_mask):
        raise ValueError("rendered_ids and assistant_mask differ in length")
    n = len(rendered_ids)
    num_layers, top_k = sampled.routed_experts.shape[1:]
    mask = np.asarray(assistant_mask, dtype=bool)
    logp = np.full(n, np.nan, dtype=np.float32)
    routed = np.full((n, num_layers, top_k), -1, dtype=np.int32)
    prov = np.full(n, Provenance.RETOKENIZED, dtype=np.int8)
    src_pairs = _turn_segments(sampled.loss_mask)
    dst_pairs = _turn_segments(mask)
    if len(src_pairs) != len(dst_pairs):
        raise ValueError(
            f"sampled stream has {len(src_pairs) - 1} assistant turns, "
            f"re-rendered history has {len(dst_pairs) - 1}"
        )
    ids = list(rendered_ids)
    src_ids = sampled.token_ids.tolist()
    for src_pair, dst_pair in zip(src_pairs, dst_pairs, strict=True):
        for (a0, a1), (b0, b1) in zip(src_pair, dst_pair, strict=True):
            matcher = SequenceMatcher(None, src_ids[a0:a1], ids[b0:b1], autojunk=False)
            for block in matcher.get_matching_blocks():
                for j in range(block.size):
                    src, dst = a0 + block.a + j, b0 + block.b + j
                    routed[dst] = sampled.routed_experts[src]
                    logp[dst] = sampled.sampler_logprobs[src]
                    prov[dst] = Provenance.ALIGNED
    return RolloutSample(
        token_ids=np.asarray(rendered_ids, dtype=np.int64),
        loss_mask=mask,
        sampler_logprobs=logp,
        routed_experts=routed,
        provenance=prov,
    )
