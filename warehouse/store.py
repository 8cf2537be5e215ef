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
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

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
DEFAULT_SMALL_PART_BYTES = 64 * 1024 * 1024
DEFAULT_TARGET_PART_BYTES = 512 * 1024 * 1024
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
        store raises CommitConflict when another writer committed that generation first."""
        manifest.updated_at = datetime.now(UTC)
        self._put_manifest(manifest, manifest.model_dump_json(indent=1))
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
        """
        for attempt in range(COMMIT_ATTEMPTS):
            with self._locked():
                manifest = self.read_manifest()
                tables = dict(build(manifest))
                for name in tables:
                    table_spec(name)
                result = WriteResult(generation=manifest.generation, attempts=attempt + 1)
                new_parts: dict[str, PartInfo] = {}
                try:
                    with duckdb.connect() as con:
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
                    if not new_parts:
                        return result
                    manifest.generation += 1
                    for name, part in new_parts.items():
                        manifest.tables.setdefault(name, []).append(part)
                    self._write_manifest(manifest)
                except CommitConflict:
                    self._discard_parts(list(new_parts.items()))
                    _backoff(attempt)
                    continue
                result.generation = manifest.generation
                return result
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
        """Rows of `table` whose key is neither stored nor repeated earlier in the batch."""
        if table.num_rows == 0:
            return table
        keys = ", ".join(f'"{k}"' for k in spec.key)
        batch = table.select(list(spec.key)).append_column(
            "_i", pa.array(range(table.num_rows), pa.int64())
        )
        con.register("_batch", batch)
        files = self.table_files(manifest, spec.name)
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
                    for group in _merge_groups(
                        manifest.parts(name), small_part_bytes, target_part_bytes
                    ):
                        merged = pa.concat_tables(
                            [
                                conform(pq.read_table(self.part_path(name, p.file)), spec)
                                for p in group
                            ]
                        )
                        manifest = self.replace_parts(manifest, name, group, merged)
                        result.merged[name] = result.merged.get(name, 0) + len(group)
                        changed = True
                now = datetime.now(UTC)
                expired = [
                    r
                    for r in manifest.retired
                    if (now - r.retired_at).total_seconds() >= retire_grace_s
                ]
                if expired:
                    manifest.retired = [r for r in manifest.retired if r not in expired]
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
                return result
        raise CommitConflictError(
            f"warehouse {self.location!r}: compaction lost to other writers {COMMIT_ATTEMPTS} "
            "times in a row; nothing of it was committed, run it again"
        )

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


def _backoff(attempt: int) -> None:
    """Sleep before retry `attempt + 1` of a lost commit: exponential, capped, full jitter (so
    two writers that collided do not collide again in lockstep)."""
    first, cap = COMMIT_BACKOFF_S
    time.sleep(random.uniform(0, min(cap, first * 2**attempt)))


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
