"""Batched commits that lose nothing on a crash: a journal of entries, committed N at a time.

A commit costs a manifest write and a duplicate check over the table's parts, whatever it
holds, so a campaign that commits each candidate on its own pays that per candidate. A
`BatchedWriter` commits many candidates at once instead:

- `add(records)` writes the rows as one journal entry of the writer's stream (`Store.
  journal_put`: a file renamed into place after fsync on local disk, one object on S3), so
  once `add` returns the rows survive a crash of this process, and buffers them;
- `flush()` commits every buffered entry in ONE commit, then drops their journal entries. It
  runs when `every` entries are buffered or the oldest has waited `interval_s` (`due`), and
  at the end of a job;
- `replay()` (at the start of a job, under its lock) commits what a killed writer journaled
  and never committed. Commits are idempotent (the first write of a key wins), so an entry
  committed just before the kill, and not yet dropped, adds nothing when replayed.

An entry is only ever committed whole: its rows of every table in the same commit, so the
one-commit-per-candidate contract of `record_synthesis` holds for each candidate.
"""

from __future__ import annotations

import io
import os
import struct
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from warehouse.recording import tables_of
from warehouse.records import Record
from warehouse.store import Store, WarehouseError, WriteResult

MAGIC = b"T1J1"
DEFAULT_EVERY = 16
DEFAULT_INTERVAL_S = 2.0


class JournalError(WarehouseError):
    """A journal entry that cannot be read back (not written by this code, or damaged)."""


def encode_entry(tables: dict[str, pa.Table]) -> bytes:
    """One entry's tables as bytes: MAGIC, then per table its name and an Arrow IPC stream."""
    out = io.BytesIO()
    out.write(MAGIC)
    for name, table in tables.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        label = name.encode()
        out.write(struct.pack("<I", len(label)))
        out.write(label)
        out.write(struct.pack("<Q", len(data)))
        out.write(data)
    return out.getvalue()


def decode_entry(data: bytes, where: str = "journal entry") -> dict[str, pa.Table]:
    """The tables of an entry written by `encode_entry`; JournalError naming `where`."""
    if not data.startswith(MAGIC):
        raise JournalError(f"{where}: not a warehouse journal entry")
    tables: dict[str, pa.Table] = {}
    pos = len(MAGIC)
    try:
        while pos < len(data):
            (n,) = struct.unpack_from("<I", data, pos)
            name = data[pos + 4 : pos + 4 + n].decode()
            pos += 4 + n
            (size,) = struct.unpack_from("<Q", data, pos)
            pos += 8
            if pos + size > len(data):
                raise JournalError(f"{where}: table {name!r} is cut short")
            with pa.ipc.open_stream(data[pos : pos + size]) as reader:
                tables[name] = reader.read_all()
            pos += size
    except (struct.error, UnicodeDecodeError, pa.ArrowInvalid) as e:
        raise JournalError(f"{where}: damaged ({e})") from e
    return tables


def merge_entries(entries: list[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """Tables of several entries as one commit's tables (rows in entry order)."""
    by_table: dict[str, list[pa.Table]] = {}
    for entry in entries:
        for name, table in entry.items():
            by_table.setdefault(name, []).append(table)
    return {name: pa.concat_tables(parts) for name, parts in by_table.items()}


@dataclass
class FlushStats:
    """What a writer's commits cost: one row per commit (seconds, entries, rows)."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # this process's, all threads
    entries: list[int] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)  # > 1: lost a race and was rebuilt


class BatchedWriter:
    """Journal-backed batching of one job's commits (see the module docstring).

    `stream` names the journal (one per job: e.g. `synthesis-<campaign>`); only one writer
    per stream may run at a time, which the job's lock (`warehouse.locks`) guarantees.
    `on_commit(tags)` hears, after each commit, the tags given to `add` for what it committed.
    """

    def __init__(
        self,
        store: Store,
        stream: str,
        *,
        every: int = DEFAULT_EVERY,
        interval_s: float = DEFAULT_INTERVAL_S,
        on_commit: Callable[[list[object]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every!r}")
        if interval_s < 0:
            raise ValueError(f"interval_s must be >= 0, got {interval_s!r}")
        self.store, self.stream = store, stream
        self.every, self.interval_s = every, interval_s
        self.on_commit = on_commit
        self.clock = clock
        self._pending: list[tuple[str, dict[str, pa.Table], object]] = []
        self._oldest: float | None = None
        self.stats = FlushStats()

    def replay(self) -> WriteResult | None:
        """Commit, in one commit, whatever the journal holds from a writer that was killed;
        then drop it. None when the journal is empty."""
        names = self.store.journal_names(self.stream)
        if not names:
            return None
        entries = [
            decode_entry(self.store.journal_get(self.stream, n), f"{self.stream}/{n}")
            for n in names
        ]
        result = self.store.append(merge_entries(entries))
        self.store.journal_drop(self.stream, names)
        return result

    def add(self, records: Iterable[Record], tag: object = None) -> None:
        """Journal `records` durably as one entry and buffer them for the next commit."""
        self.add_tables(tables_of(records), tag)

    def add_tables(self, tables: dict[str, pa.Table], tag: object = None) -> None:
        """`add` for rows already in their tables' Arrow schemas."""
        if not tables:
            return
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.store.journal_put(self.stream, name, encode_entry(tables))
        self._pending.append((name, tables, tag))
        if self._oldest is None:
            self._oldest = self.clock()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def wait_s(self) -> float | None:
        """Seconds until the buffered entries are due by age (None: nothing buffered)."""
        if self._oldest is None:
            return None
        return max(0.0, self._oldest + self.interval_s - self.clock())

    def due(self) -> bool:
        return bool(self._pending) and (
            len(self._pending) >= self.every or (self.wait_s() or 0.0) <= 0.0
        )

    def flush(self) -> WriteResult | None:
        """Commit every buffered entry in one commit and drop their journal entries."""
        if not self._pending:
            return None
        batch, self._pending, self._oldest = self._pending, [], None
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            result = self.store.append(merge_entries([tables for _, tables, _ in batch]))
        except BaseException:
            self._pending = batch + self._pending  # still journaled: the next flush retries
            self._oldest = self._oldest if self._oldest is not None else self.clock()
            raise
        self.stats.seconds.append(time.perf_counter() - t0)
        self.stats.cpu_seconds.append(time.process_time() - c0)
        self.stats.entries.append(len(batch))
        self.stats.attempts.append(result.attempts)
        self.store.journal_drop(self.stream, [name for name, _, _ in batch])
        if self.on_commit is not None:
            self.on_commit([tag for _, _, tag in batch])
        return result

    def maybe_flush(self) -> WriteResult | None:
        """`flush()` when due, else nothing."""
        return self.flush() if self.due() else None
