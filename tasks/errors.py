"""One exception class per failure mode of reading or building tasks."""

from __future__ import annotations

from pathlib import Path


class TaskFormatError(ValueError):
    """A task on disk is malformed. Names the file and the field so a user can fix it."""

    def __init__(self, path: Path | str, field: str | None, message: str) -> None:
        self.path = str(path)
        self.field = field
        self.message = message
        where = f"{self.path}" + (f" [{field}]" if field else "")
        super().__init__(f"{where}: {message}")
