"""The per-epoch seeded permutation every consumer of a quality-ranked pool must apply.

Pools are materialized in quality-rank order (rank 1 best), so reading one in order would
drift the reward distribution as an epoch proceeds. `epoch_permutation(n, seed, epoch)` is a
pure function: the same (n, seed, epoch) always gives the same order, on any machine and
Python version (a SHA-256 counter stream drives an unbiased Fisher-Yates shuffle; nothing
depends on `random`'s implementation), and different epochs give different orders.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def _stream(seed: int, epoch: int) -> Iterator[int]:
    """64-bit words: SHA-256 of (seed, epoch, counter), 4 words per block."""
    counter = 0
    while True:
        block = hashlib.sha256(f"t1-epoch-permutation|{seed}|{epoch}|{counter}".encode()).digest()
        for k in range(0, 32, 8):
            yield int.from_bytes(block[k : k + 8], "big")
        counter += 1


def _below(words: Iterator[int], bound: int) -> int:
    """An unbiased integer in [0, bound) by rejection sampling."""
    limit = (1 << 64) - (1 << 64) % bound
    while True:
        w = next(words)
        if w < limit:
            return w % bound


def epoch_permutation(n: int, seed: int, epoch: int) -> list[int]:
    """A permutation of range(n) determined by (seed, epoch)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch!r}")
    order = list(range(n))
    words = _stream(seed, epoch)
    for i in range(n - 1, 0, -1):
        j = _below(words, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def permute(items: Sequence[T], seed: int, epoch: int) -> list[T]:
    """`items` in the order of `epoch_permutation(len(items), seed, epoch)`."""
    return [items[i] for i in epoch_permutation(len(items), seed, epoch)]
