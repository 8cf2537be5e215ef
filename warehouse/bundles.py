"""Stored bundles back to `Task`s: the inverse of `tasks.harbor.task_files`.

The `tasks.bundle` column holds every file of a task's Harbor bundle, so a task can be rebuilt
(and exported with `tasks.harbor.write_harbor`) without its original directory. The rebuilt
task must reproduce the stored content hash; `task_from_bundle` checks that.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import PurePosixPath

from tasks.errors import TaskFormatError
from tasks.harbor import render_toml, task_from_toml
from tasks.model import Task, bundle_hash


def _subtree(files: Mapping[str, bytes], prefix: str) -> dict[str, bytes]:
    return {p[len(prefix) :]: b for p, b in files.items() if p.startswith(prefix)}


def task_from_bundle(
    files: Mapping[str, bytes], *, expected_hash: str | None = None, task_id: str = "task"
) -> Task:
    """Rebuild a task from its bundle ({relative path: bytes}), as `load_harbor` would read it.
    `task_id` stands in for the directory name `load_harbor` takes the id (and default name)
    from when task.toml has no `[t1] id`: pass the recorded `tasks.task_id`, or an imported
    task comes back as `task`. It is not part of the content hash.

    Raises TaskFormatError when the bundle is not a Harbor task, and ValueError when the
    rebuilt task's content hash differs from `expected_hash` (a corrupt or foreign bundle).
    """
    where = f"<bundle {expected_hash[:12]}>" if expected_hash else "<bundle>"
    for path in files:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            raise ValueError(f"bundle path escapes the task directory: {path!r}")
    if "task.toml" not in files or "instruction.md" not in files:
        raise TaskFormatError(where, None, "bundle lacks task.toml or instruction.md")
    toml_text = files["task.toml"].decode("utf-8")
    try:
        doc = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(f"{where}/task.toml", None, f"invalid TOML: {e}") from e
    solution = _subtree(files, "solution/") or None
    t1 = doc.get("t1", {})
    task = task_from_toml(
        doc,
        path=f"{where}/task.toml",  # type: ignore[arg-type]  # only used in messages
        task_id=str(t1.get("id", task_id)) if isinstance(t1, dict) else task_id,
        instruction=files["instruction.md"].decode("utf-8"),
        environment_files=_subtree(files, "environment/"),
        solution=solution,
        verifier=_subtree(files, "tests/"),
    )
    # As load_harbor does: keep task.toml verbatim while the metadata is unchanged.
    task._source_toml = (render_toml(task), toml_text)
    if expected_hash is not None:
        got = task.content_hash
        if got != expected_hash:
            stored = bundle_hash(dict(files))
            raise ValueError(
                f"bundle {expected_hash!r} rebuilds to a task with hash {got!r} "
                f"(the stored files hash to {stored!r})"
            )
    return task
