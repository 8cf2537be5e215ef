"""Session fixtures for the training tests: one trained tokenizer, one tiny random checkpoint
(the warm-started policy is tests/conftest.py's `warm_policy`)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "tasks" / "seeds"


@pytest.fixture(scope="session")
def tokenizer():
    """A real byte-level BPE trained on this repo's seed tasks and built-in trajectories."""
    from training.chat_tokenizer import train_chat_tokenizer
    from training.trajectories import tokenizer_corpus, training_trajectories

    texts = tokenizer_corpus(training_trajectories(SEEDS))
    return train_chat_tokenizer(texts, vocab_size=1024)


@pytest.fixture(scope="session")
def tiny_config():
    from training.policy import PolicyConfig

    return PolicyConfig(hidden_size=32, num_hidden_layers=2, moe_intermediate_size=32, seed=3)


@pytest.fixture(scope="session")
def random_checkpoint(tmp_path_factory, tokenizer, tiny_config) -> Path:
    """An untrained tiny Qwen3-MoE saved with the tokenizer (protocol tests need no skill).

    It has no eos id, so a request stops only on its own `stop_token_ids` or length, which keeps
    the timing of the pause/abort tests deterministic."""
    from training.chat_tokenizer import save_chat_tokenizer
    from training.policy import build_policy, save_policy

    out = tmp_path_factory.mktemp("random_policy")
    model = build_policy(tiny_config)
    model.config.eos_token_id = None
    save_policy(model, out)
    save_chat_tokenizer(tokenizer, out)
    return out
