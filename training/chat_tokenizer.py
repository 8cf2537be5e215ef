"""A byte-level BPE tokenizer trained locally with `tokenizers`, wrapped for `transformers`.

Nothing is downloaded: the merges are learned from text this repo generates (seed tasks, the
built-in trajectories and rendered chats). Byte-level BPE makes encoding canonical and decoding
many-to-one, which is the first drift behaviour TITO has to handle: a sampled split such as
`ec` + `ho` decodes to the same text as the canonical `echo` but re-encodes to different ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from training.chat_format import CHAT_TEMPLATE, END_OF_TEXT, IM_END, MARKUP_TOKENS, SPECIAL_TOKENS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast


def train_chat_tokenizer(texts: Iterable[str], *, vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and return it with the chat template installed.

    Deterministic for the same texts and vocab size. Raises ValueError on a vocab too small to
    hold the 256 byte symbols plus the control and markup tokens.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    floor = 256 + len(SPECIAL_TOKENS) + len(MARKUP_TOKENS)
    if vocab_size <= floor:
        raise ValueError(f"vocab_size must exceed {floor}, got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(MARKUP_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (IM_END, END_OF_TEXT)],
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def save_chat_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and the chat template under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(directory))


def load_chat_tokenizer(directory: Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved by `save_chat_tokenizer` (or any local HF tokenizer directory).

    Raises FileNotFoundError when `directory` has no tokenizer, instead of reaching the Hub.
    """
    from transformers import AutoTokenizer

    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(f"no tokenizer.json under {directory}")
    tok = cast(
        "PreTrainedTokenizerFast",
        AutoTokenizer.from_pretrained(str(directory), local_files_only=True),
    )
    if not tok.chat_template:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def encode_text(tokenizer: PreTrainedTokenizerFast, text: str) -> list[int]:
    """Canonical encoding of `text` (no BOS/EOS added); control tokens in `text` are honoured."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def decode_ids(tokenizer: PreTrainedTokenizerFast, ids: list[int]) -> str:
    """Decode ids keeping control and markup tokens, without cleanup of spaces."""
    text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return cast(str, text)
