"""The durable store: immutable Parquet parts per table, committed by one atomic manifest.

Layout under the store root::

    _meta.json            the manifest: schema version, generation, committed parts per table
    _write.lock           flock(2) target; held by writers only, never by readers
    <table>/part-*.parquet   committed (or retired, or orphaned) immutable parts
    <table>/.tmp-*.parquet   a part being written (or left by a killed writer)

Contracts:
- **Commit.** A writer takes the write lock, writes its parts (temp name, fsync, rename), then
  replaces `_meta.json` atomically (temp, fsync, rename, fsync dir). A part is visible only once
  the manifest names it, so a writer killed at any point leaves nothing half-written visible;
  a later compaction deletes what it left. One commit may span tables (a pool and its tasks).
- **Readers never lock.** A reader reads the manifest once and queries exactly those parts
  (`warehouse.snapshot`), so it sees one consistent generation however writers proceed.
- **Idempotence: the first write wins.** Rows whose key (see `warehouse.schema`) is already
  stored, or repeated earlier in the same batch, are dropped at write time; the store never
  holds two rows with one key and views need no dedupe. Stored rows are facts: to correct one,
  write a new version (a new audit version, a new pool version).
- **Compaction** merges small parts into one under the lock and retires the inputs; retired
  parts stay on disk for `retire_grace_s` so that snapshots opened before the compaction keep
  working, then a later compaction deletes them.

A store at an `s3://bucket/prefix` URL (`Store.open` picks the class registered in
`OBJECT_STORES`: `warehouse.objectstore.S3Store`)
keeps the same parts and manifest content on object storage, with no lock: each commit is a
conditional put of manifest version generation + 1, and a writer that loses the race re-reads
and rebuilds its commit (`commit` retries on `CommitConflict`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

import warehouse.keyhashes as keyhashes
import warehouse.schema as schema
from warehouse.schema import TableSpec, table_spec
from warehouse.views import CATALOG_FILE, parquet_list_sql, write_catalog

ENV_VAR = "T1_WAREHOUSE"
DEFAULT_STORE = Path("data/warehouse")
META_FILE = "_meta.json"
LOCK_FILE = "_write.lock"
FORMAT = "t1-forge-warehouse"
ROW_GROUP_ROWS = 122_880
DEFAULT_RETIRE_GRACE_S = 3600.0
# Parts an automatic compaction retires stay this long: a campaign compacts every few minutes,
# and each retired part is an entry of the manifest every commit reads and rewrites until it
# expires (an hour's worth of them made the manifest of a 38k-candidate campaign ~1 MB).
AUTO_RETIRE_GRACE_S = 900.0
DEFAULT_SMALL_PART_BYTES = 64 * 1024 * 1024
DEFAULT_TARGET_PART_BYTES = 512 * 1024 * 1024
# Automatic compaction: a commit that leaves a table with more than `max_parts` parts merges
# that table's small parts by size tier (parts within a factor of COMPACT_FANOUT of each other
# merge together), so part counts stay near the number of tiers and each row is rewritten
# about log(rows) times over a campaign; every commit's duplicate check reads every part
# (~4 ms per part), which is what made commits grow with the campaign.
DEFAULT_MAX_PARTS = 24
COMPACT_FANOUT = 8
TIER_BASE_BYTES = 64 * 1024
MAX_PARTS_ENV = "T1_WAREHOUSE_MAX_PARTS"
JOURNAL_DIR = "_journal"  # durable staging of batched commits (`warehouse.journal`)
COMMIT_ATTEMPTS = 100  # optimistic commits (object storage) retried this often on conflict
COMMIT_BACKOFF_S = (0.005, 0.25)  # first and largest backoff between attempts (jittered)
OBJECT_URL_SCHEMES = ("s3",)


class WarehouseError(ValueError):
    """Base of the warehouse's failure modes."""


class StoreNotFoundError(WarehouseError):
    """No warehouse at the path (a reader never creates one)."""


class SchemaVersionError(WarehouseError):
    """The store's schema version is not the one this code reads; the message says what to do."""


class CommitConflict(WarehouseError):
    """Another writer committed this generation first (object storage): re-read and retry."""


class CommitConflictError(WarehouseError):
    """A commit lost the race to other writers `COMMIT_ATTEMPTS` times in a row."""


class PartInfo(BaseModel):
    file: str
    rows: int = Field(ge=0)
    bytes: int = Field(ge=0)


class RetiredPart(BaseModel):
    table: str
    file: str
    retired_at: datetime


class Manifest(BaseModel):
    """The content of `_meta.json`: everything a reader needs to see one consistent store."""

    format: str = FORMAT
    schema_version: int
    generation: int = 0
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    tables: dict[str, list[PartInfo]] = Field(default_factory=dict)
    retired: list[RetiredPart] = Field(default_factory=list)

    def parts(self, table: str) -> list[PartInfo]:
        return self.tables.get(table, [])


@dataclass
class WriteResult:
    """Rows offered and rows actually added per table by one commit (duplicates dropped)."""

    generation: int
    attempts: int = 1  # > 1: lost the race to other writers (object storage) and rebuilt
    offered: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)


@dataclass
class CompactionResult:
    generation: int
    merged: dict[str, int] = field(default_factory=dict)  # table -> parts merged
    deleted_files: list[str] = field(default_factory=list)


def resolve_store_path(path: Path | str | None = None) -> Path:
    """`path` if given, else $T1_WAREHOUSE, else ./data/warehouse (relative to the cwd).

    An object-storage URL comes back as a Path too (`Path("s3://b/p")` reads `s3:/b/p`);
    `Store.open` and `object_store_url` recognise both spellings."""
    if path is not None and str(path) != "":
        return Path(path)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else DEFAULT_STORE


# Checks run before any manifest write to a store location, by location then owner id: a job
# lease registers one that raises when the lease was lost (`warehouse.locks`).
COMMIT_GUARDS: dict[str, dict[int, Callable[[], None]]] = {}

# Stores on object storage, by URL scheme. warehouse.objectstore registers `s3` when the
# package is imported (warehouse/__init__.py), so this module never imports it.
OBJECT_STORES: dict[str, Callable[[str], Store]] = {}


def object_store_url(path: Path | str | None) -> str | None:
    """`s3://bucket/prefix` when `path` names a store on object storage, else None.

    Accepts the URL itself and the form a `Path` makes of it (one slash after the scheme), so
    a URL that went through a `--store` option typed as a Path still opens the object store.
    """
    if path is None:
        return None
    text = str(path)
    for scheme in OBJECT_URL_SCHEMES:
        if text == f"{scheme}:" or text.startswith(f"{scheme}:/"):
            rest = text[len(scheme) + 1 :].lstrip("/").rstrip("/")
            if not rest:
                raise WarehouseError(f"store URL {text!r} names no bucket (want {scheme}://bucket)")
            return f"{scheme}://{rest}"
    return None


def journal_stream(stream: str) -> str:
    """A journal stream's name as a file or key name; ValueError for anything else."""
    if not stream or not all(c.isalnum() or c in "._-" for c in stream) or stream[0] == ".":
        raise ValueError(
            f"journal stream must be [A-Za-z0-9._-]+ (not starting with '.'), got {stream!r}"
        )
    return stream


def default_max_parts() -> int | None:
    """$T1_WAREHOUSE_MAX_PARTS (0: no automatic compaction), else DEFAULT_MAX_PARTS."""
    text = os.environ.get(MAX_PARTS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_PARTS
    try:
        value = int(text)
    except ValueError:
        raise WarehouseError(f"${MAX_PARTS_ENV} must be an integer, got {text!r}") from None
    if value < 0:
        raise WarehouseError(f"${MAX_PARTS_ENV} must be >= 0, got {value}")
    return value or None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex}{path.suffix}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class Store:
    """A warehouse on disk. Cheap to construct; every method re-reads the manifest it needs.

    Open with `Store.open(path)`; writers pass `create=True`. Methods that write take the write
    lock for their whole duration, so writers serialize; readers (`snapshot`) never wait.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        # Compact a table automatically once a commit leaves it with more parts than this
        # (None: never; `T1_WAREHOUSE_MAX_PARTS`, 0 meaning never, sets the default).
        self.max_parts: int | None = default_max_parts()
        # Run automatic compaction in a thread of its own (merging without the write lock;
        # see `auto_compact`), so that no commit waits for it; False: inside `commit`.
        self.compact_in_background = True
        self.auto_compactions = 0  # automatic compactions run (for tests and benchmarks)
        self.compaction_errors: list[str] = []  # background compactions that failed
        self.compaction_retries = 0  # automatic compactions' swaps that lost a race, retried
        self._compact_lock = threading.Lock()
        self._compact_due: set[str] = set()
        self._compactor: threading.Thread | None = None

    # False: job locks are flock files under `root` (one machine); True (object stores):
    # leases written conditionally into the store itself (`warehouse.locks`).
    shared_leases = False

    @property
    def location(self) -> str:
        """Where the store lives, for messages: its directory or its object-storage URL."""
        return str(self.root)

    @classmethod
    def at(cls, path: Path | str | None = None) -> Store:
        """The store object for `path` (see `resolve_store_path`), without reading anything:
        an `S3Store` for an `s3://` URL, a store on local disk otherwise."""
        resolved = resolve_store_path(path)
        url = object_store_url(resolved)
        if url is not None:
            scheme = url.split("://", 1)[0]
            factory = OBJECT_STORES.get(scheme)
            if factory is None:
                raise WarehouseError(f"{url}: no object store is registered for {scheme}://")
            return factory(url)
        return cls(resolved)

    # ---- opening and the manifest -------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str | None = None, *, create: bool = False) -> Store:
        """Open the store at `path` (see `resolve_store_path`).

        Raises StoreNotFoundError when there is none and `create` is false, SchemaVersionError
        when its schema version is not this code's (`warehouse.migrations.migrate` brings an
        older store forward).
        """
        store = cls.at(path)
        if not store._manifest_exists():
            if not create:
                raise StoreNotFoundError(
                    f"no warehouse at {store.location!r} (no {META_FILE}); pass a store path, "
                    f"set ${ENV_VAR}, or record something first"
                )
            store._initialize()
        store.read_manifest()  # version check
        return store

    @property
    def meta_path(self) -> Path:
        return self.root / META_FILE

    def part_path(self, table: str, file: str) -> Path:
        return self.root / table / file

    def _initialize(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise WarehouseError(f"store path {str(self.root)!r} exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if not self.meta_path.exists():
                self._write_manifest(Manifest(schema_version=schema.SCHEMA_VERSION))

    def _manifest_exists(self) -> bool:
        return self.meta_path.exists()

    def _read_manifest_text(self) -> tuple[str, str]:
        """(the committed manifest's JSON, where it was read from); StoreNotFoundError."""
        try:
            return self.meta_path.read_text(encoding="utf-8"), str(self.meta_path)
        except FileNotFoundError:
            raise StoreNotFoundError(f"no warehouse at {self.location!r}") from None

    def read_manifest(self, *, check_version: bool = True) -> Manifest:
        """The committed manifest; SchemaVersionError when its version is not ours."""
        text, where = self._read_manifest_text()
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise WarehouseError(f"{where!r} is not valid JSON: {e}") from e
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise WarehouseError(
                f"{where!r} is not a T1 Forge warehouse manifest (format {found!r})"
            )
        manifest = Manifest.model_validate(raw)
        if check_version:
            self._check_version(manifest.schema_version)
        return manifest

    def _check_version(self, found: int) -> None:
        ours = schema.SCHEMA_VERSION
        if found == ours:
            return
        where = self.location
        if found > ours:
            raise SchemaVersionError(
                f"warehouse {where!r} has schema version {found}, newer than this t1-forge "
                f"reads ({ours}); upgrade t1-forge to read it"
            )
        raise SchemaVersionError(
            f"warehouse {where!r} has schema version {found}, older than this t1-forge "
            f"({ours}); run `t1 warehouse migrate --store {where}` to migrate it in place "
            "(readers of the old version keep working until the migration commits)"
        )

    def _write_manifest(self, manifest: Manifest) -> None:
        """Commit `manifest` (its generation already advanced by the caller).

        On local disk the caller holds the write lock, so this cannot conflict; an object
        store raises CommitConflict when another writer committed that generation first.
        First, every guard registered for this store's location (a job lease this process
        holds on it, `warehouse.locks`) may refuse: a process whose lease was taken over
        commits nothing more."""
        for guard in list(COMMIT_GUARDS.get(self.location, {}).values()):
            guard()
        manifest.updated_at = datetime.now(UTC)
        self._put_manifest(manifest, manifest.model_dump_json())
        if self.catalog_path.exists():  # kept current once created (`t1 warehouse catalog`)
            self._write_catalog(manifest)

    def _put_manifest(self, manifest: Manifest, text: str) -> None:
        _write_json_atomic(self.meta_path, text)

    @property
    def catalog_path(self) -> Path:
        return self.root / CATALOG_FILE

    def part_files(self, manifest: Manifest) -> dict[str, list[Path]]:
        """table -> the files of its committed parts in `manifest`."""
        return {
            t: [self.part_path(t, p.file) for p in parts] for t, parts in manifest.tables.items()
        }

    def table_files(self, manifest: Manifest, table: str) -> list[Path]:
        """The files of `table`'s committed parts in `manifest`."""
        return [self.part_path(table, p.file) for p in manifest.parts(table)]

    def write_catalog(self) -> Path:
        """Create (or refresh) `catalog.duckdb`, the store's views for external DuckDB clients
        (see `warehouse.views`); from then on every commit refreshes it."""
        with self._locked():
            return self._write_catalog(self.read_manifest())

    def _write_catalog(self, manifest: Manifest) -> Path:
        return write_catalog(self.root, self.part_files(manifest))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The exclusive write lock; the kernel releases it if the holder dies."""
        with open(self.root / LOCK_FILE, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    # ---- writing ------------------------------------------------------------------------

    def append(self, tables: Mapping[str, pa.Table]) -> WriteResult:
        """Add rows to one or more tables in one atomic commit; duplicate keys are dropped."""
        return self.commit(lambda _manifest: tables)

    def commit(self, build: Callable[[Manifest], Mapping[str, pa.Table]]) -> WriteResult:
        """Under the write lock: `build(current manifest)` gives the rows to add; commit them.

        `build` runs with the lock held, so it may read the store (e.g. to pick the next pool
        version) without racing another writer.

        On object storage there is no lock: a commit that loses the race to another writer
        runs `build` again on the newer manifest (so `build` must depend on nothing but the
        manifest and the store), dropping the parts it wrote, up to `COMMIT_ATTEMPTS` times.

        Then, outside the lock, a table the commit left with more than `max_parts` parts is
        compacted (`auto_compact`), so a long campaign's commits do not slow down with it.
        """
        result, manifest = self._commit(build)
        if result.written and any(result.written.values()):
            self._after_commit(manifest)
            self._compact_if_due([t for t, n in result.written.items() if n], manifest)
        return result

    def _compact_if_due(self, tables: list[str], manifest: Manifest) -> None:
        """Start automatic compaction of the `tables` past `max_parts` in `manifest`."""
        if self.max_parts is None:
            return
        due = [t for t in tables if len(manifest.parts(t)) > self.max_parts]
        if not due:
            return
        if not self.compact_in_background:
            self.auto_compact(due, manifest)
            return
        with self._compact_lock:
            self._compact_due.update(due)
            if self._compactor is None:
                self._compactor = threading.Thread(
                    target=self._compact_loop, name="warehouse-compaction", daemon=True
                )
                self._compactor.start()

    def _compact_loop(self) -> None:
        while True:
            with self._compact_lock:
                due = sorted(self._compact_due)
                self._compact_due.clear()
                if not due:
                    self._compactor = None
                    return
            try:
                self.auto_compact(due)
            except Exception as e:  # noqa: BLE001 - the next commit asks again; data is safe
                self.compaction_errors.append(f"{type(e).__name__}: {e}"[:500])

    def wait_for_compaction(self, timeout_s: float | None = None) -> None:
        """Wait until no background compaction is running (tests, benchmarks, shutdown)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._compact_lock:
                thread = self._compactor
            if thread is None:
                return
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
            if deadline is not None and time.monotonic() >= deadline:
                return

    def _after_commit(self, manifest: Manifest) -> None:
        """Called after each commit that added rows (object stores collect old manifests)."""

    def auto_compact(
        self, tables: list[str] | None = None, manifest: Manifest | None = None
    ) -> CompactionResult | None:
        """Compact the tables (of `tables`) that have more than `max_parts` parts in
        `manifest` (default: the committed one), merging their small parts by size tier
        (`tiered_groups`); None when none needs it.

        Unlike `compact`, it merges without holding the write lock (commits go on meanwhile)
        and takes it only to swap the merged parts into the newest manifest, planning again
        if another compaction got there first; and it deletes no unnamed file (one may be
        another compaction's merge in flight): only retired parts past their grace, which is
        `AUTO_RETIRE_GRACE_S` (15 minutes) here: a snapshot held longer than that while a
        campaign writes should be reopened."""
        if self.max_parts is None:
            return None
        limit = self.max_parts
        manifest = manifest if manifest is not None else self.read_manifest()
        due = [t for t in tables or list(manifest.tables) if len(manifest.parts(t)) > limit]
        if not due:
            return None
        self.auto_compactions += 1
        return self._merge_unlocked(
            due,
            lambda parts: tiered_groups(parts, max_parts=limit),
            retire_grace_s=AUTO_RETIRE_GRACE_S,
        )

    def _merge_unlocked(
        self,
        names: list[str],
        groups_of: Callable[[list[PartInfo]], list[list[PartInfo]]],
        *,
        retire_grace_s: float,
    ) -> CompactionResult:
        """See `auto_compact`.

        The merged parts are written once and kept while their swap is retried: a swap that
        loses the race to a commit (object storage) is applied again to the newer manifest,
        which still names every merged input (a commit only adds parts). Only when another
        compaction retired some of the inputs first are the merged parts dropped and the merge
        planned again."""
        merges: list[tuple[str, list[PartInfo], PartInfo]] | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            if merges is None:
                base = self.read_manifest()
                merges = []
                for name in names:
                    spec = table_spec(name)
                    for group in groups_of(base.parts(name)):
                        merged = self._merged(name, spec, group)
                        part = self._write_part(spec, merged, base.generation + 1)
                        merges.append((name, group, part))
            with self._locked():
                manifest = self.read_manifest()
                named = {t: {p.file for p in parts} for t, parts in manifest.tables.items()}
                if any(
                    p.file not in named.get(name, set()) for name, group, _ in merges for p in group
                ):  # another compaction merged some of these parts first: plan again
                    self._discard_parts([(name, part) for name, _, part in merges])
                    merges = None
                    continue
                result = CompactionResult(generation=manifest.generation)
                now = datetime.now(UTC)
                for name, group, part in merges:
                    files = {p.file for p in group}
                    manifest.tables[name] = [
                        p for p in manifest.parts(name) if p.file not in files
                    ] + [part]
                    manifest.retired.extend(
                        RetiredPart(table=name, file=f, retired_at=now) for f in sorted(files)
                    )
                    result.merged[name] = result.merged.get(name, 0) + len(group)
                manifest.retired, expired = _split_expired(manifest.retired, now, retire_grace_s)
                if not merges and not expired:
                    return result
                manifest.generation += 1
                try:
                    self._write_manifest(manifest)
                except CommitConflict:  # keep the merged parts: swap them into the newer one
                    self.compaction_retries += 1
                    _backoff(attempt)
                    continue
            for name, group, part in merges:  # the merged part's key hashes, when known
                known = [keyhashes.known(self.location, name, p.file) for p in group]
                if all(h is not None for h in known):
                    hashes = np.sort(np.concatenate([h for h in known if h is not None]))
                    keyhashes.remember(self.location, name, part.file, hashes)
            self._discard_parts(
                [(r.table, PartInfo(file=r.file, rows=0, bytes=0)) for r in expired]
            )
            result.generation = manifest.generation
            result.deleted_files = sorted(f"{r.table}/{r.file}" for r in expired)
            self._after_compaction(manifest)
            return result
        if merges:  # named by no manifest: drop them now rather than as orphans in an hour
            self._discard_parts([(name, part) for name, _, part in merges])
        raise CommitConflictError(
            f"warehouse {self.location!r}: compaction lost to other writers {COMMIT_ATTEMPTS} "
            "times in a row; nothing of it was committed, run it again"
        )

    def _commit(
        self, build: Callable[[Manifest], Mapping[str, pa.Table]]
    ) -> tuple[WriteResult, Manifest]:
        for attempt in range(COMMIT_ATTEMPTS):
            with self._locked():
                manifest = self.read_manifest()
                tables = dict(build(manifest))
                for name in tables:
                    table_spec(name)
                result = WriteResult(generation=manifest.generation, attempts=attempt + 1)
                new_parts: dict[str, PartInfo] = {}
                hashes: dict[str, np.ndarray] = {}
                try:
                    with contextlib.nullcontext(_writer_connection()) as con:
                        for name, table in tables.items():
                            spec = table_spec(name)
                            table = conform(table, spec)
                            result.offered[name] = table.num_rows
                            fresh = self._new_rows(con, spec, table, manifest)
                            result.written[name] = fresh.num_rows
                            if fresh.num_rows:
                                new_parts[name] = self._write_part(
                                    spec, fresh, manifest.generation + 1
                                )
                                con.register("_fresh", fresh)
                                hashes[name] = keyhashes.sorted_hashes(con, spec, "_fresh")
                                con.unregister("_fresh")
                    if not new_parts:
                        return result, manifest
                    manifest.generation += 1
                    for name, part in new_parts.items():
                        manifest.tables.setdefault(name, []).append(part)
                    self._write_manifest(manifest)
                except CommitConflict:
                    self._discard_parts(list(new_parts.items()))
                    _backoff(attempt)
                    continue
                result.generation = manifest.generation
                for name, part in new_parts.items():
                    keyhashes.remember(self.location, name, part.file, hashes[name])
                return result, manifest
        raise CommitConflictError(
            f"warehouse {self.location!r}: commit lost to other writers {COMMIT_ATTEMPTS} times "
            "in a row; nothing of it was committed, run it again"
        )

    def _discard_parts(self, parts: list[tuple[str, PartInfo]]) -> None:
        """Delete parts written for a commit that lost its race (no manifest names them)."""
        for table, part in parts:
            (self.root / table / part.file).unlink(missing_ok=True)

    def _new_rows(
        self, con: duckdb.DuckDBPyConnection, spec: TableSpec, table: pa.Table, manifest: Manifest
    ) -> pa.Table:
        """Rows of `table` whose key is neither stored nor repeated earlier in the batch.

        Only the parts that hold one of the batch's key hashes are read (`warehouse.
        keyhashes`): usually none, so the check costs the batch, not the store."""
        if table.num_rows == 0:
            return table
        keys = ", ".join(f'"{k}"' for k in spec.key)
        batch = table.select(list(spec.key)).append_column(
            "_i", pa.array(range(table.num_rows), pa.int64())
        )
        con.register("_batch", batch)
        probe = keyhashes.sorted_hashes(con, spec, "_batch")
        files = []
        for part in manifest.parts(spec.name):
            stored = keyhashes.part_hashes(
                con,
                spec,
                self.location,
                part.file,
                lambda part=part: self.part_path(spec.name, part.file),  # type: ignore[misc]
            )
            if keyhashes.contains(stored, probe).any():
                files.append(self.part_path(spec.name, part.file))
        if files:
            query = f"""
                WITH seen AS (
                    SELECT {keys} FROM read_parquet({parquet_list_sql(files)}, union_by_name=true)
                    SEMI JOIN _batch USING ({keys})
                )
                SELECT min(_i) AS i FROM _batch ANTI JOIN seen USING ({keys})
                GROUP BY {keys} ORDER BY i
            """
        else:
            query = f"SELECT min(_i) AS i FROM _batch GROUP BY {keys} ORDER BY i"
        keep = con.sql(query).to_arrow_table().column("i")
        con.unregister("_batch")
        if len(keep) == table.num_rows:
            return table
        return table.take(keep)

    def _merged(self, name: str, spec: TableSpec, group: list[PartInfo]) -> pa.Table:
        """The rows of `group`'s parts of table `name`, in order, conformed to `spec`."""
        return pa.concat_tables(
            [conform(pq.read_table(self.part_path(name, p.file)), spec) for p in group]
        )

    def _write_part(self, spec: TableSpec, table: pa.Table, generation: int) -> PartInfo:
        directory = self.root / spec.name
        directory.mkdir(exist_ok=True)
        token = uuid.uuid4().hex[:12]
        name = f"part-{generation:010d}-{token}.parquet"
        tmp = directory / f".tmp-{os.getpid()}-{token}.parquet"
        with open(tmp, "wb") as f:
            pq.write_table(table, f, compression="zstd", row_group_size=ROW_GROUP_ROWS)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / name)
        _fsync_dir(directory)
        return PartInfo(file=name, rows=table.num_rows, bytes=(directory / name).stat().st_size)

    def replace_parts(
        self,
        manifest: Manifest,
        table: str,
        old: list[PartInfo],
        new_table: pa.Table | None,
    ) -> Manifest:
        """Swap `old` parts of `table` for one part holding `new_table` in `manifest`.

        For compaction and migrations, which hold the write lock and commit the manifest
        themselves. The old parts are retired, not deleted (see `retire_grace_s`).
        """
        spec = table_spec(table)
        old_files = {p.file for p in old}
        kept = [p for p in manifest.parts(table) if p.file not in old_files]
        if new_table is not None and new_table.num_rows:
            kept.append(self._write_part(spec, conform(new_table, spec), manifest.generation + 1))
        manifest.tables[table] = kept
        now = datetime.now(UTC)
        manifest.retired.extend(RetiredPart(table=table, file=f, retired_at=now) for f in old_files)
        return manifest

    # ---- the journal: durable staging of batched commits (`warehouse.journal`) ----------

    def _journal_dir(self, stream: str) -> Path:
        return self.root / JOURNAL_DIR / journal_stream(stream)

    def journal_put(self, stream: str, name: str, data: bytes) -> None:
        """Store `data` as entry `name` of journal `stream`, durably and whole (temp file,
        fsync, rename, fsync dir): a writer killed mid-put leaves no entry."""
        directory = self._journal_dir(stream)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / name)
        _fsync_dir(directory)

    def journal_names(self, stream: str) -> list[str]:
        """The entries of journal `stream`, oldest first (names sort by time)."""
        directory = self._journal_dir(stream)
        if not directory.is_dir():
            return []
        return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))

    def journal_get(self, stream: str, name: str) -> bytes:
        return (self._journal_dir(stream) / name).read_bytes()

    def journal_drop(self, stream: str, names: list[str]) -> None:
        """Delete committed entries (a missing one is fine: a replay may have dropped it)."""
        directory = self._journal_dir(stream)
        for name in names:
            (directory / name).unlink(missing_ok=True)
        if names and directory.is_dir():
            _fsync_dir(directory)

    # ---- maintenance --------------------------------------------------------------------

    def compact(
        self,
        tables: list[str] | None = None,
        *,
        small_part_bytes: int = DEFAULT_SMALL_PART_BYTES,
        target_part_bytes: int = DEFAULT_TARGET_PART_BYTES,
        retire_grace_s: float = DEFAULT_RETIRE_GRACE_S,
    ) -> CompactionResult:
        """Merge each table's parts under `small_part_bytes` into parts of about
        `target_part_bytes` (greedily, in commit order), in one atomic commit.

        Then delete retired parts older than `retire_grace_s` and whatever killed writers left
        (temp files, parts no manifest names): under the lock no write is in flight, so any
        unnamed file is an orphan. (On object storage, where writers take no lock, an unnamed
        part is deleted only once it is older than the store's `orphan_age_s`.)
        """
        if retire_grace_s < 0:
            raise ValueError(f"retire_grace_s must be >= 0, got {retire_grace_s!r}")
        if small_part_bytes <= 0 or target_part_bytes < small_part_bytes:
            raise ValueError(
                "need 0 < small_part_bytes <= target_part_bytes, got "
                f"{small_part_bytes!r}, {target_part_bytes!r}"
            )
        names = tables if tables is not None else list(schema.TABLES)
        return self._compact(
            names,
            lambda parts: _merge_groups(parts, small_part_bytes, target_part_bytes),
            retire_grace_s=retire_grace_s,
        )

    def _compact(
        self,
        names: list[str],
        groups_of: Callable[[list[PartInfo]], list[list[PartInfo]]],
        *,
        retire_grace_s: float,
    ) -> CompactionResult:
        """Merge each group `groups_of(parts)` of each table into one part, in one commit;
        then delete expired retired parts and orphans (see `compact`)."""
        for name in names:
            table_spec(name)
        for attempt in range(COMMIT_ATTEMPTS):
            with self._locked():
                manifest = self.read_manifest()
                result = CompactionResult(generation=manifest.generation)
                before = {t: {p.file for p in parts} for t, parts in manifest.tables.items()}
                changed = False
                for name in names:
                    spec = table_spec(name)
                    for group in groups_of(manifest.parts(name)):
                        merged = self._merged(name, spec, group)
                        manifest = self.replace_parts(manifest, name, group, merged)
                        merged_hashes = [
                            keyhashes.known(self.location, name, p.file) for p in group
                        ]
                        if all(h is not None for h in merged_hashes):  # the merged part's own
                            keyhashes.remember(
                                self.location,
                                name,
                                manifest.parts(name)[-1].file,
                                np.sort(
                                    np.concatenate([h for h in merged_hashes if h is not None])
                                ),
                            )
                        result.merged[name] = result.merged.get(name, 0) + len(group)
                        changed = True
                now = datetime.now(UTC)
                manifest.retired, expired = _split_expired(manifest.retired, now, retire_grace_s)
                if expired:
                    changed = True
                if changed:
                    manifest.generation += 1
                    try:
                        self._write_manifest(manifest)
                    except CommitConflict:
                        self._discard_parts(
                            [
                                (t, p)
                                for t, parts in manifest.tables.items()
                                for p in parts
                                if p.file not in before.get(t, set())
                            ]
                        )
                        _backoff(attempt)
                        continue
                result.generation = manifest.generation
                result.deleted_files = self._delete_unreferenced(manifest)
                self._after_compaction(manifest)
                return result
        raise CommitConflictError(
            f"warehouse {self.location!r}: compaction lost to other writers {COMMIT_ATTEMPTS} "
            "times in a row; nothing of it was committed, run it again"
        )

    def _after_compaction(self, manifest: Manifest) -> None:
        """Called after each compaction (object stores collect old manifest versions)."""

    def _delete_unreferenced(self, manifest: Manifest) -> list[str]:
        """Delete files under table directories that the manifest neither uses nor retires."""
        referenced = {(t, p.file) for t, parts in manifest.tables.items() for p in parts}
        referenced |= {(r.table, r.file) for r in manifest.retired}
        deleted = []
        for name in schema.TABLES:
            directory = self.root / name
            if not directory.is_dir():
                continue
            for path in directory.iterdir():
                if path.suffix == ".parquet" and (name, path.name) not in referenced:
                    path.unlink(missing_ok=True)
                    deleted.append(f"{name}/{path.name}")
        for tmp in self.root.glob(".tmp-*"):  # a manifest temp file of a killed writer
            tmp.unlink(missing_ok=True)
            deleted.append(tmp.name)
        return sorted(deleted)


_writer = threading.local()


def _writer_connection() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection for commits' duplicate checks: made once, one DuckDB
    thread (a commit's queries are small; a fresh connection per commit, with a pool of
    threads to start and wake, cost more than the queries on a loaded machine)."""
    con = getattr(_writer, "con", None)
    if con is None:
        con = _writer.con = duckdb.connect(config={"threads": 1})
    return con


def _split_expired(
    retired: list[RetiredPart], now: datetime, grace_s: float
) -> tuple[list[RetiredPart], list[RetiredPart]]:
    """(retired parts still within `grace_s`, those past it), in one pass.

    It was `[r for r in retired if r not in expired]`: a pydantic comparison per pair, ~1 s
    of CPU (GIL and, on S3, the writer lock held) for 75 expired among 10,000 retired, which
    every automatic compaction paid once its first retirements passed the 15-minute grace."""
    kept: list[RetiredPart] = []
    expired: list[RetiredPart] = []
    for r in retired:
        (expired if (now - r.retired_at).total_seconds() >= grace_s else kept).append(r)
    return kept, expired


def _backoff(attempt: int) -> None:
    """Sleep before retry `attempt + 1` of a lost commit: exponential, capped, full jitter (so
    two writers that collided do not collide again in lockstep)."""
    first, cap = COMMIT_BACKOFF_S
    time.sleep(random.uniform(0, min(cap, first * 2**attempt)))


def tiered_groups(
    parts: list[PartInfo],
    *,
    max_parts: int,
    fanout: int = COMPACT_FANOUT,
    small: int = DEFAULT_SMALL_PART_BYTES,
    target: int = DEFAULT_TARGET_PART_BYTES,
    base: int = TIER_BASE_BYTES,
) -> list[list[PartInfo]]:
    """What automatic compaction merges (pure): nothing while there are at most `max_parts`
    parts; else the parts under `small` bytes by size tier (tier k holds parts of
    base * fanout**k up to base * fanout**(k+1) bytes), every tier of two or more parts one
    group (split so that no group exceeds `target` bytes), in commit order.

    A merged part lands in a higher tier, so a row is rewritten about log_fanout(rows) times
    over a store's life while the part count falls back to about the number of tiers after
    each compaction."""
    if len(parts) <= max_parts:
        return []
    tiers: dict[int, list[PartInfo]] = {}
    for part in parts:
        if part.bytes >= small:
            continue
        tier = 0 if part.bytes <= base else int(math.log(part.bytes / base, fanout))
        tiers.setdefault(tier, []).append(part)
    groups: list[list[PartInfo]] = []
    for _, members in sorted(tiers.items()):
        run: list[PartInfo] = []
        total = 0
        for part in members:
            if run and total + part.bytes > target:
                groups.append(run)
                run, total = [], 0
            run.append(part)
            total += part.bytes
        groups.append(run)
    return [g for g in groups if len(g) > 1]


def _merge_groups(parts: list[PartInfo], small: int, target: int) -> list[list[PartInfo]]:
    """Runs of consecutive small parts, each run's total at most `target`; runs of one dropped."""
    groups: list[list[PartInfo]] = []
    run: list[PartInfo] = []
    total = 0
    for part in parts:
        if part.bytes >= small or total + part.bytes > target:
            if len(run) > 1:
                groups.append(run)
            run, total = [], 0
        if part.bytes < small:
            run.append(part)
            total += part.bytes
    if len(run) > 1:
        groups.append(run)
    return groups


def conform(table: pa.Table, spec: TableSpec) -> pa.Table:
    """`table` with exactly `spec.schema` (column order, types); ValueError on a mismatch.

    Nulls in a non-nullable column and missing columns are rejected, naming the column.
    """
    missing = [n for n in spec.schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in spec.schema.names]
    if missing or extra:
        raise ValueError(
            f"rows for table {spec.name!r} do not match its schema: missing {missing!r}, "
            f"unexpected {extra!r}"
        )
    table = table.select(spec.schema.names)
    for f in spec.schema:
        if not f.nullable and table.column(f.name).null_count:
            raise ValueError(f"table {spec.name!r}: column {f.name!r} is not nullable, got nulls")
    if table.schema != spec.schema:
        try:
            table = table.cast(spec.schema)
        except (ValueError, TypeError, pa.ArrowNotImplementedError) as e:
            raise ValueError(f"rows for table {spec.name!r} have the wrong types: {e}") from e
    return table
