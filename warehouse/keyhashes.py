"""The key hashes of stored parts, cached in memory: what makes a commit's duplicate check
cost the size of its batch instead of the size of the store.

Every commit drops the rows whose key is already stored (first write wins). Reading the key
columns of every part for that grew with the campaign: ~4 ms per part opened, plus the rows
(5M assertion rows at 38k candidates). Parts never change once named, so the 64-bit DuckDB
`hash` of each part's keys is computed once per process (or taken from the rows a commit
just wrote, or from the parts a compaction merged) and kept, sorted, per part file. A
batch's key hashes are looked up in them; a row whose hash no part holds is certainly new,
and only the parts holding a hash of the batch (a retried or replayed commit, or a 64-bit
collision) are read to decide exactly, by key.

The cache is bounded (`MAX_KEYS` hashes, 8 bytes each; the oldest parts are dropped first
and read again if needed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np

from warehouse.schema import TableSpec
from warehouse.views import parquet_list_sql

MAX_KEYS = 64_000_000  # 512 MB of hashes

_cache: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
_total = [0]
_lock = threading.Lock()


def hash_sql(spec: TableSpec) -> str:
    """The SQL expression of a row's key hash (the same for Arrow batches and Parquet parts:
    both are in the table's one schema)."""
    return "hash(" + ", ".join(f'"{k}"' for k in spec.key) + ")"


def remember(location: str, table: str, file: str, hashes: np.ndarray) -> None:
    """Keep the sorted key hashes of one part (evicting the oldest parts past MAX_KEYS)."""
    with _lock:
        key = (location, table, file)
        old = _cache.pop(key, None)
        if old is not None:
            _total[0] -= len(old)
        _cache[key] = hashes
        _total[0] += len(hashes)
        while _total[0] > MAX_KEYS and len(_cache) > 1:
            _, dropped = _cache.popitem(last=False)
            _total[0] -= len(dropped)


def known(location: str, table: str, file: str) -> np.ndarray | None:
    with _lock:
        hashes = _cache.get((location, table, file))
        if hashes is not None:
            _cache.move_to_end((location, table, file))
        return hashes


def forget(location: str) -> None:
    """Drop every cached part of one store (tests)."""
    with _lock:
        for key in [k for k in _cache if k[0] == location]:
            _total[0] -= len(_cache.pop(key))


def sorted_hashes(con: duckdb.DuckDBPyConnection, spec: TableSpec, source: str) -> np.ndarray:
    """Sorted uint64 key hashes of the rows of `source` (a relation name or a SQL table
    function such as `read_parquet(...)`)."""
    column = con.sql(f"SELECT {hash_sql(spec)} AS h FROM {source}").fetchnumpy()["h"]
    return np.sort(np.asarray(column, dtype=np.uint64))


def part_hashes(
    con: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    location: str,
    file: str,
    path: Callable[[], Path],
) -> np.ndarray:
    """A part's sorted key hashes: cached, else read from its file `path()` (and cached)."""
    hashes = known(location, spec.name, file)
    if hashes is None:
        hashes = sorted_hashes(con, spec, f"read_parquet({parquet_list_sql([path()])})")
        remember(location, spec.name, file, hashes)
    return hashes


def contains(sorted_hashes_: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """For each hash of `probe`, whether `sorted_hashes_` holds it."""
    if not len(sorted_hashes_) or not len(probe):
        return np.zeros(len(probe), dtype=bool)
    at = np.searchsorted(sorted_hashes_, probe)
    at[at == len(sorted_hashes_)] = 0
    return sorted_hashes_[at] == probe
