"""The warehouse on object storage: `T1_WAREHOUSE=s3://bucket/prefix` (or `--store` the same).

Layout under the prefix (the same parts as on local disk, the manifest versioned)::

    _manifest/<generation, 20 digits>.json   one object per committed generation
    <table>/part-*.parquet                   immutable parts, named once and never rewritten

The commit protocol (there is no lock across machines):

1. read the newest manifest: list `_manifest/`, take the highest generation N, read it;
2. build the commit against N (duplicate keys are checked against N's parts), upload its
   parts under fresh names;
3. put `_manifest/<N + 1>.json` with `If-None-Match: *`. S3 creates the object only if no
   object has that key, atomically, so of two writers racing for N + 1 exactly one wins;
4. the loser (HTTP 412, or 409 while the winner's put is in flight) deletes the parts it
   uploaded, backs off with jitter, and starts again at 1 with the newer manifest.

A PUT is all-or-nothing, so a listed manifest version is always complete, and every part it
names was uploaded before it: a reader that takes the highest version sees exactly one whole
commit. Manifest versions are kept (each is one small JSON object); a generation number is
never reused, which is what makes the conditional put a compare-and-swap: deleting old
versions would let a writer holding a stale manifest create a number that had existed.

Parts are read through a local cache (`T1_WAREHOUSE_CACHE`, default
`$XDG_CACHE_HOME/t1-forge/warehouse`, one directory per bucket and prefix): a snapshot downloads
the parts its manifest names that the cache lacks, then DuckDB reads local files, so the views,
the lineage macros and the external catalog (`catalog.duckdb` in the cache directory) work as
on local disk. Parts never change once named, so a cached part is never stale. DuckDB's own
S3 reader (the httpfs extension) is not used: no build of it for this DuckDB is installable
from the package index.

Connection settings come from the environment, as for any AWS client: the endpoint from
`T1_S3_ENDPOINT`, else `AWS_ENDPOINT_URL` (unset: AWS itself); credentials and region from
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION` or
the usual AWS config files. The client is `s3fs` (fsspec), imported only when an S3 store is
opened.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

import warehouse.schema as schema
from warehouse.schema import TableSpec
from warehouse.store import (
    JOURNAL_DIR,
    OBJECT_STORES,
    CommitConflict,
    Manifest,
    PartInfo,
    Store,
    StoreNotFoundError,
    WarehouseError,
    journal_stream,
)

ENDPOINT_ENV = "T1_S3_ENDPOINT"
AWS_ENDPOINT_ENV = "AWS_ENDPOINT_URL"
CACHE_ENV = "T1_WAREHOUSE_CACHE"
MANIFEST_DIR = "_manifest"
VERSION_DIGITS = 20
DEFAULT_ORPHAN_AGE_S = 3600.0
# Manifest versions kept (the newest N); older ones are deleted by `collect_manifests`, which
# runs after every compaction and every N/2 commits. `T1_WAREHOUSE_MANIFEST_HISTORY` sets it
# (0: keep every version, as before).
DEFAULT_MANIFEST_HISTORY = 200
HISTORY_ENV = "T1_WAREHOUSE_MANIFEST_HISTORY"
# The lowest generation `collect_manifests` keeps, raised before it deletes anything below.
FLOOR_KEY = f"{MANIFEST_DIR}/floor.json"
LEASE_DIR = "_locks"  # job leases (`warehouse.locks`): one object per job
# S3 answers 409 ConditionalRequestConflict when another conditional put of the same key is
# in flight; like a 412 it means "someone else is committing this generation": retry.
CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})


class ObjectStoreError(WarehouseError):
    """The object store refused or failed a request (bucket missing, no access, no client)."""


class LeaseConflict(WarehouseError):
    """A conditional lease write found the lease changed (someone else wrote it first)."""


@dataclass(frozen=True)
class LeaseObject:
    """A lease as stored: its bytes, the ETag a conditional write must match, and its age by
    the object store's own clock (its `Date` minus the object's `Last-Modified`), so that
    machines whose clocks disagree agree on whether it expired."""

    data: bytes
    etag: str
    age_s: float


def default_cache_dir() -> Path:
    """$T1_WAREHOUSE_CACHE, else $XDG_CACHE_HOME/t1-forge/warehouse, else ~/.cache/..."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "t1-forge" / "warehouse"


def endpoint_url() -> str | None:
    """The S3 endpoint: $T1_S3_ENDPOINT, else $AWS_ENDPOINT_URL, else None (AWS)."""
    return os.environ.get(ENDPOINT_ENV) or os.environ.get(AWS_ENDPOINT_ENV) or None


def manifest_key(generation: int) -> str:
    """The object name of a generation's manifest, relative to the store prefix."""
    if generation < 0:
        raise ValueError(f"generation must be >= 0, got {generation!r}")
    return f"{MANIFEST_DIR}/{generation:0{VERSION_DIGITS}d}.json"


def parse_manifest_key(name: str) -> int | None:
    """The generation a manifest object name stands for; None for any other object."""
    stem, dot, ext = name.rpartition("/")[2].partition(".")
    if dot and ext == "json" and len(stem) == VERSION_DIGITS and stem.isdigit():
        return int(stem)
    return None


def default_manifest_history() -> int:
    """$T1_WAREHOUSE_MANIFEST_HISTORY, else DEFAULT_MANIFEST_HISTORY (0: keep all)."""
    text = os.environ.get(HISTORY_ENV, "").strip()
    if not text:
        return DEFAULT_MANIFEST_HISTORY
    try:
        value = int(text)
    except ValueError:
        raise WarehouseError(f"${HISTORY_ENV} must be an integer, got {text!r}") from None
    if value < 0:
        raise WarehouseError(f"${HISTORY_ENV} must be >= 0, got {value}")
    return value


def _client_error_code(e: BaseException) -> str | None:
    """The S3 error code behind an s3fs exception (s3fs chains the botocore ClientError)."""
    for err in (e, e.__cause__, e.__context__):
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            return str(code) if code is not None else None
    return None


_CLIENTS: dict[tuple[Any, ...], Any] = {}
CLIENT_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)


def _filesystem(url: str) -> Any:
    """One s3fs filesystem per process and client settings (making one loads botocore's
    service models, ~0.3 s, so every store opened in a process shares it)."""
    key = (os.getpid(), endpoint_url(), *(os.environ.get(v) for v in CLIENT_ENV))
    fs = _CLIENTS.get(key)
    if fs is None:
        try:
            import s3fs
        except ImportError as e:
            raise ObjectStoreError(
                f"warehouse {url!r} is on S3, which needs the s3fs package (pip install s3fs)"
            ) from e
        fs = s3fs.S3FileSystem(
            endpoint_url=endpoint_url(), skip_instance_cache=True, use_listings_cache=False
        )
        _CLIENTS[key] = fs
    return fs


class S3Store(Store):
    """A store under `s3://bucket/prefix`; `root` is its local cache directory.

    Writers take no lock across processes: `Store.commit` and `Store.compact` retry on the
    `CommitConflict` that `_put_manifest` raises when the generation was taken. Within one
    process the writers of one store object (its commits and its own background compaction)
    take turns, as on local disk (see `_locked`).
    """

    def __init__(
        self,
        url: str,
        *,
        cache_dir: Path | None = None,
        orphan_age_s: float = DEFAULT_ORPHAN_AGE_S,
        manifest_history: int | None = None,
    ) -> None:
        if not url.startswith("s3://"):
            raise WarehouseError(f"not an S3 store URL: {url!r} (want s3://bucket/prefix)")
        bucket, _, prefix = url[len("s3://") :].strip("/").partition("/")
        if not bucket:
            raise WarehouseError(f"store URL {url!r} names no bucket")
        self.url = f"s3://{bucket}/{prefix}".rstrip("/")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.orphan_age_s = orphan_age_s
        self.manifest_history = (
            default_manifest_history() if manifest_history is None else manifest_history
        )
        if self.manifest_history < 0:
            raise WarehouseError(f"manifest_history must be >= 0, got {self.manifest_history}")
        cache = cache_dir if cache_dir is not None else default_cache_dir()
        super().__init__(cache / "s3" / bucket / (self.prefix or "_root"))
        self._fs: Any = None
        self._fs_pid = -1
        self._latest_seen = -1  # highest generation listed so far: later listings start there
        self._writer_lock = threading.RLock()
        self._writer_lock_pid = os.getpid()

    @property
    def location(self) -> str:
        return self.url

    # ---- the client -----------------------------------------------------------------------

    @property
    def fs(self) -> Any:
        """The s3fs filesystem, made per process (its event loop does not survive a fork)."""
        if self._fs is None or self._fs_pid != os.getpid():
            self._fs = _filesystem(self.url)
            self._fs_pid = os.getpid()
        return self._fs

    def _path(self, key: str) -> str:
        """bucket/prefix/key, the form s3fs takes."""
        return "/".join(x for x in (self.bucket, self.prefix, key) if x)

    def _key(self, key: str) -> str:
        """prefix/key, the form the S3 API takes."""
        return f"{self.prefix}/{key}" if self.prefix else key

    @contextlib.contextmanager
    def _requests(self, what: str) -> Iterator[None]:
        """Turn the client's failures into one-line ObjectStoreErrors naming the store."""
        try:
            yield
        except WarehouseError:
            raise
        except (OSError, ValueError) as e:
            if _client_error_code(e) == "NoSuchBucket":
                raise self._no_bucket() from e
            raise ObjectStoreError(f"warehouse {self.url!r}: {what} failed: {e}") from e

    def _no_bucket(self) -> ObjectStoreError:
        return ObjectStoreError(
            f"warehouse {self.url!r}: bucket {self.bucket!r} does not exist (or is not visible "
            "with these credentials); create it first"
        )

    def _list(self, key_prefix: str, start_after: str | None = None) -> list[dict[str, Any]]:
        """Every object under `key_prefix` (relative to the store prefix), paging through."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self._key(key_prefix)}
        if start_after is not None:
            kwargs["StartAfter"] = self._key(start_after)
        out: list[dict[str, Any]] = []
        with self._requests(f"listing {key_prefix!r}"):
            while True:
                page = self.fs.call_s3("list_objects_v2", **kwargs)
                out.extend(page.get("Contents", []))
                if not page.get("IsTruncated"):
                    return out
                kwargs["ContinuationToken"] = page["NextContinuationToken"]

    # ---- the manifest ---------------------------------------------------------------------

    def latest_generation(self) -> int | None:
        """The highest committed generation, or None when there is no manifest yet."""
        start = manifest_key(self._latest_seen) if self._latest_seen >= 0 else None
        found = [parse_manifest_key(o["Key"]) for o in self._list(f"{MANIFEST_DIR}/", start)]
        versions = [v for v in found if v is not None]
        if versions:
            self._latest_seen = max(self._latest_seen, *versions)
        return self._latest_seen if self._latest_seen >= 0 else None

    def _manifest_exists(self) -> bool:
        return self.latest_generation() is not None

    def _read_manifest_text(self) -> tuple[str, str]:
        generation = self.latest_generation()
        if generation is None:
            raise StoreNotFoundError(f"no warehouse at {self.url!r} (no {MANIFEST_DIR}/)")
        key = manifest_key(generation)
        with self._requests(f"reading {key}"):
            data = self.fs.cat_file(self._path(key))
        return data.decode("utf-8"), f"{self.url}/{key}"

    def _put_manifest(self, manifest: Manifest, text: str) -> None:
        """Create `_manifest/<generation>.json` only if absent: the atomic commit point.

        A refusal is a lost race unless the object there is byte for byte ours: the client
        retries a put whose answer it did not get (a timeout), and the retry of a put that had
        succeeded is refused too. Taking that for a loss would delete parts we committed."""
        key = manifest_key(manifest.generation)
        data = text.encode("utf-8")
        try:
            self.fs.pipe_file(self._path(key), data, mode="create")
        except OSError as e:
            conflict = isinstance(e, FileExistsError) or _client_error_code(e) in CONFLICT_CODES
            if not conflict:
                raise ObjectStoreError(f"warehouse {self.url!r}: writing {key} failed: {e}") from e
            if self._stored(key) != data:
                raise CommitConflict(f"{self.url}: generation {manifest.generation} taken") from e
        if manifest.generation < self.manifest_floor():
            # The generation had existed and `collect_manifests` deleted it: our manifest was
            # stale (newer versions exist, the newest of them is kept), so this put created
            # a version no reader takes for the newest. Take it back and lose the race.
            with self._requests(f"deleting stale {key}"):
                self.fs.rm(self._path(key))
            raise CommitConflict(
                f"{self.url}: generation {manifest.generation} is below the kept history"
            )
        self._latest_seen = max(self._latest_seen, manifest.generation)

    def _stored(self, key: str) -> bytes | None:
        """The object at `key`, or None if there is none (yet: a put may be in flight)."""
        try:
            return bytes(self.fs.cat_file(self._path(key)))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ObjectStoreError(f"warehouse {self.url!r}: reading {key} failed: {e}") from e

    # ---- manifest history ---------------------------------------------------------------

    def manifest_floor(self) -> int:
        """The lowest generation `collect_manifests` keeps (0 when it never ran).

        Why a commit reads it: a generation number must never be created twice. A writer
        holding a stale manifest N puts N + 1 only if absent; once old versions are deleted,
        N + 1 may be absent because it was deleted. The collector writes the floor before
        deleting anything below it, so a put that succeeded for a generation under the floor
        it reads afterwards may have re-created a deleted number, and is withdrawn."""
        raw = self._stored(FLOOR_KEY)
        if raw is None:
            return 0
        try:
            return int(json.loads(raw)["floor"])
        except (ValueError, KeyError, TypeError) as e:
            raise WarehouseError(f"{self.url}/{FLOOR_KEY} is not a manifest floor: {e}") from e

    def manifest_versions(self) -> list[int]:
        """Every manifest generation stored, ascending."""
        found = [parse_manifest_key(o["Key"]) for o in self._list(f"{MANIFEST_DIR}/")]
        return sorted(v for v in found if v is not None)

    def collect_manifests(self, keep: int | None = None) -> list[int]:
        """Delete all but the newest `keep` (default `manifest_history`; 0: none deleted)
        manifest versions; returns the generations deleted. The floor is raised first (see
        `manifest_floor`), so a stale writer cannot re-create a deleted generation."""
        keep = self.manifest_history if keep is None else keep
        if keep <= 0:
            return []
        versions = self.manifest_versions()
        if len(versions) <= keep:
            return []
        floor = versions[-keep]
        if floor > self.manifest_floor():
            with self._requests(f"writing {FLOOR_KEY}"):
                self.fs.pipe_file(self._path(FLOOR_KEY), json.dumps({"floor": floor}).encode())
        doomed = [v for v in versions if v < floor]
        with self._requests(f"deleting {len(doomed)} old manifest versions"):
            self.fs.rm([self._path(manifest_key(v)) for v in doomed])
        return doomed

    def _after_commit(self, manifest: Manifest) -> None:
        every = max(1, self.manifest_history // 2)
        if self.manifest_history and manifest.generation % every == 0:
            self.collect_manifests()

    def _after_compaction(self, manifest: Manifest) -> None:
        if self.manifest_history:
            self.collect_manifests()

    # ---- the journal (see Store.journal_put) ---------------------------------------------

    def _journal_key(self, stream: str, name: str = "") -> str:
        return f"{JOURNAL_DIR}/{journal_stream(stream)}/{name}"

    def journal_put(self, stream: str, name: str, data: bytes) -> None:
        """One object per entry: a PUT is all-or-nothing, so an entry is whole or absent."""
        key = self._journal_key(stream, name)
        with self._requests(f"writing {key}"):
            self.fs.pipe_file(self._path(key), data)

    def journal_names(self, stream: str) -> list[str]:
        prefix = self._journal_key(stream)
        return sorted(o["Key"].rpartition("/")[2] for o in self._list(prefix))

    def journal_get(self, stream: str, name: str) -> bytes:
        key = self._journal_key(stream, name)
        with self._requests(f"reading {key}"):
            return bytes(self.fs.cat_file(self._path(key)))

    def journal_drop(self, stream: str, names: list[str]) -> None:
        if names:
            with self._requests(f"deleting {len(names)} journal entries"):
                self.fs.rm([self._path(self._journal_key(stream, n)) for n in names])

    # ---- job leases (`warehouse.locks`): conditional writes on one object per job ------

    shared_leases = True

    def _lease_key(self, name: str) -> str:
        return f"{LEASE_DIR}/{journal_stream(name)}.json"

    def lease_url(self, name: str) -> str:
        return f"{self.url}/{self._lease_key(name)}"

    def lease_get(self, name: str) -> LeaseObject | None:
        """The lease object `name` (None when there is none)."""
        from fsspec.asyn import sync

        key = self._key(self._lease_key(name))

        async def get() -> tuple[dict[str, Any], bytes]:
            resp = await self.fs._call_s3("get_object", Bucket=self.bucket, Key=key)
            try:
                return resp, await resp["Body"].read()
            finally:
                resp["Body"].close()

        try:
            with self._requests(f"reading lease {name!r}"):
                resp, data = sync(self.fs.loop, get)
        except ObjectStoreError as e:
            if isinstance(e.__cause__, FileNotFoundError):
                return None
            raise
        modified = resp.get("LastModified")
        date = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        now = parsedate_to_datetime(date) if date else datetime.now(UTC)
        age = (now - modified).total_seconds() if isinstance(modified, datetime) else 0.0
        return LeaseObject(data=data, etag=str(resp.get("ETag", "")), age_s=max(0.0, age))

    def lease_put(self, name: str, data: bytes, *, etag: str | None) -> str:
        """Write lease `name` only if it is absent (`etag` None: `If-None-Match: *`) or still
        the version `etag` names (`If-Match`); returns the new ETag. LeaseConflict when the
        condition fails: another process wrote the lease first."""
        key = self._key(self._lease_key(name))
        condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
        try:
            resp = self.fs.call_s3(
                "put_object", Bucket=self.bucket, Key=key, Body=data, **condition
            )
        except (OSError, ValueError) as e:
            code = _client_error_code(e)
            lost = isinstance(e, (FileExistsError, FileNotFoundError))
            if lost or code in CONFLICT_CODES or code in ("NoSuchKey", "404"):
                raise LeaseConflict(f"{self.lease_url(name)} changed meanwhile") from e
            raise ObjectStoreError(f"warehouse {self.url!r}: writing lease {name!r}: {e}") from e
        return str(resp.get("ETag", ""))

    def _initialize(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with self._requests(f"checking bucket {self.bucket!r}"):
            if not self.fs.exists(self.bucket):
                raise self._no_bucket()
        with contextlib.suppress(CommitConflict):  # another writer initialized it first
            self._write_manifest(Manifest(schema_version=schema.SCHEMA_VERSION))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """No lock across processes (commits are optimistic, see the module docstring), but
        one across this store object's threads: a commit and the store's own background
        compaction (`Store.auto_compact`, which merges unlocked and takes the lock only to swap
        its parts in) then take turns, as the write lock makes them on local disk.

        Without it they raced for the same generation: the compaction's short swap (read the
        manifest, put the next version) landed inside a commit's much longer build (duplicate
        check, part uploads), so that commit lost and was rebuilt whole, and a swap that lost
        to a commit threw its merge away (`benchmarks/warehouse_campaign.py --s3`, 16k
        candidates on moto: 61 of 1,000 commits rebuilt so, and 9 merges redone)."""
        if self._writer_lock_pid != os.getpid():  # a forked child: no thread of ours holds it
            self._writer_lock, self._writer_lock_pid = threading.RLock(), os.getpid()
        with self._writer_lock:
            yield

    # ---- parts ------------------------------------------------------------------------------

    def _fetch(self, wanted: list[tuple[str, str]]) -> None:
        """Download the (table, file) parts the cache lacks, each to a temporary name first,
        so that a cached file is always a whole part (processes may share a cache)."""
        missing = [(t, f) for t, f in wanted if not (self.root / t / f).exists()]
        if not missing:
            return
        tmp = []
        for table, file in missing:
            (self.root / table).mkdir(parents=True, exist_ok=True)
            tmp.append(self.root / table / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{file}")
        try:
            with self._requests(f"downloading {len(missing)} parts"):
                self.fs.get([self._path(f"{t}/{f}") for t, f in missing], [str(p) for p in tmp])
            for (table, file), path in zip(missing, tmp, strict=True):
                os.replace(path, self.root / table / file)
        finally:
            for path in tmp:
                path.unlink(missing_ok=True)

    def part_path(self, table: str, file: str) -> Path:
        """The part's file in the local cache, downloaded first if missing."""
        self._fetch([(table, file)])
        return super().part_path(table, file)

    def table_files(self, manifest: Manifest, table: str) -> list[Path]:
        """The cached files of `table`'s parts in `manifest` (missing ones downloaded)."""
        self._fetch([(table, p.file) for p in manifest.parts(table)])
        return [self.root / table / p.file for p in manifest.parts(table)]

    def part_files(self, manifest: Manifest) -> dict[str, list[Path]]:
        """table -> the cached files of its parts in `manifest` (missing ones downloaded)."""
        self._fetch([(t, p.file) for t, parts in manifest.tables.items() for p in parts])
        return {t: [self.root / t / p.file for p in parts] for t, parts in manifest.tables.items()}

    def _write_part(self, spec: TableSpec, table: pa.Table, generation: int) -> PartInfo:
        """Write the part into the cache (as on local disk), then upload it under its name."""
        (self.root / spec.name).mkdir(parents=True, exist_ok=True)
        part = super()._write_part(spec, table, generation)
        key = f"{spec.name}/{part.file}"
        with self._requests(f"uploading {key}"):
            self.fs.put_file(str(self.root / spec.name / part.file), self._path(key))
        return part

    def _discard_parts(self, parts: list[tuple[str, PartInfo]]) -> None:
        """Delete the uploads of a commit that lost its race (best effort: a part left behind
        is named by no manifest, and a later compaction deletes it once old enough)."""
        super()._discard_parts(parts)
        if parts:
            with contextlib.suppress(OSError):
                self.fs.rm([self._path(f"{t}/{p.file}") for t, p in parts])

    def _delete_unreferenced(self, manifest: Manifest) -> list[str]:
        """Delete parts no manifest names or retires, once older than `orphan_age_s`.

        Unlike on local disk, another writer may have uploaded a part that its commit will
        name in a moment, so a young unnamed part is left alone."""
        referenced = {(t, p.file) for t, parts in manifest.tables.items() for p in parts}
        referenced |= {(r.table, r.file) for r in manifest.retired}
        now = datetime.now(UTC)
        doomed: list[str] = []
        for name in schema.TABLES:
            for obj in self._list(f"{name}/"):
                file = obj["Key"].rpartition("/")[2]
                if not file.endswith(".parquet") or (name, file) in referenced:
                    continue
                modified = obj.get("LastModified")
                age = (now - modified).total_seconds() if isinstance(modified, datetime) else 0.0
                if age >= self.orphan_age_s:
                    doomed.append(f"{name}/{file}")
        if doomed:
            with self._requests(f"deleting {len(doomed)} unreferenced parts"):
                self.fs.rm([self._path(k) for k in doomed])
            for key in doomed:
                (self.root / key).unlink(missing_ok=True)
        return sorted(doomed)


OBJECT_STORES["s3"] = S3Store
