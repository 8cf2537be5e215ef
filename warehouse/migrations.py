"""Schema migrations: each step brings a store from version v to v + 1, in place.

A step runs under the write lock with the current manifest and returns the new one; it may
rewrite parts with `Store.replace_parts` (old parts are retired, so open snapshots keep
working). `migrate` commits the new manifest and version together, so a migration killed midway
leaves the store at its old version with nothing half-visible. A change that only adds nullable
columns needs no rewrite (readers fill absent columns with NULL): its step returns the manifest.
"""

from __future__ import annotations

from collections.abc import Callable

import warehouse.schema as schema
from warehouse.store import Manifest, SchemaVersionError, Store

MigrationStep = Callable[[Store, Manifest], Manifest]


def _add_nullable_columns(store: Store, manifest: Manifest) -> Manifest:
    """A step that only adds nullable columns: readers fill them with NULL, nothing rewritten."""
    return manifest


# from-version -> the step to from-version + 1. Version 1 is the first released schema.
MIGRATIONS: dict[int, MigrationStep] = {
    1: _add_nullable_columns,  # 2: audits.findings, tasks.source (audit v2)
}


def migrate(store: Store) -> tuple[int, int]:
    """Migrate `store` to `schema.SCHEMA_VERSION`; returns (from version, to version).

    SchemaVersionError when the store is newer than this code or a step is missing.
    """
    target = schema.SCHEMA_VERSION
    with store._locked():
        manifest = store.read_manifest(check_version=False)
        start = manifest.schema_version
        if start > target:
            store._check_version(start)  # raises with the upgrade message
        for v in range(start, target):
            step = MIGRATIONS.get(v)
            if step is None:
                raise SchemaVersionError(
                    f"no migration from warehouse schema version {v} to {v + 1}; "
                    f"export what you need with an older t1-forge and re-record it"
                )
            manifest = step(store, manifest)
            manifest.schema_version = v + 1
        if start != target:
            manifest.generation += 1
            store._write_manifest(manifest)
    return start, target
