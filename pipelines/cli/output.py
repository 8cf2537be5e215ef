"""What every `t1` command shares on the terminal: one-line errors, the exit codes, progress
bars on stderr, and result tables as `table`, `csv`, `json` or `markdown`.

Exit codes (documented in the README):
  0  done;
  1  the work ran and found a failure (an invalid task, a failed campaign, a failed query,
     seeds lost to environment errors);
  2  a user error: a bad option, path, preset, pool or store (missing, read-only, or held
     by another writer), said in one line on stderr;
  130 interrupted (Ctrl-C); what was committed is kept.

Streams: data (tables, JSON, CSV) on stdout; progress, notes and errors on stderr.
"""

from __future__ import annotations

import base64
import csv
import errno
import json
import math
import os
import time as time_module
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime, time
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Any, TextIO
from uuid import UUID

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INTERRUPTED = 130


def user_error_types() -> tuple[type[Exception], ...]:
    """Exceptions that name a user's mistake (a bad task file, store, pool, preset or
    deployment, a store another writer holds): `t1` prints their message in one line and
    exits 2, never a traceback."""
    from pipelines.campaign_deployment import NoDeploymentError
    from tasks.errors import TaskFormatError
    from warehouse import WarehouseError

    return (TaskFormatError, WarehouseError, NoDeploymentError)


def validation_message(e: ValidationError, flags: Mapping[str, str] | None = None) -> str:
    """A pydantic error in one line naming the option: `--steps: Input should be greater
    than or equal to 1 (got 0)`. `flags` maps a field to its option when the names differ."""
    errors = e.errors(include_url=False)
    if not errors:
        return str(e).strip().splitlines()[0]
    first = errors[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or e.title
    flag = (flags or {}).get(field) or "--" + field.replace("_", "-")
    got = (
        f" (got {first['input']!r})"
        if "input" in first and not isinstance(first["input"], dict)
        else ""
    )
    more = f"; and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{flag}: {first['msg']}{got}{more}"


READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def write_error_message(e: OSError) -> str:
    """A file the command could not write (a read-only store), in one line."""
    where = f" {e.filename}" if e.filename else ""
    return (
        f"cannot write{where}: {e.strerror or e} (a read-only store? pass --store or set "
        "$T1_WAREHOUSE to a writable directory)"
    )


def strict_json(value: Any) -> Any:
    """`value` with every non-finite float (NaN, inf) as None: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON (`null`, never `NaN`): what every `t1` command prints as JSON."""
    return json.dumps(strict_json(json_value(value)), allow_nan=False, **kwargs)


def stderr() -> Console:
    return Console(stderr=True, soft_wrap=False)


PIPED_WIDTH = 4096


def stdout() -> Console:
    """The console for a command's data. Piped (to a file, `less`, `grep`) with no $COLUMNS
    it has no terminal to fit, so tables keep their natural width instead of rich's 80."""
    console = Console(soft_wrap=False, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPED_WIDTH
    return console


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> typer.Exit:
    """Print `error: <message>` (its first line) on stderr; raise the returned Exit."""
    from rich.markup import escape

    first = escape(str(message).strip().splitlines()[0]) if str(message).strip() else "failed"
    stderr().print(f"[red]error:[/red] {first}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(int(code))


PIPED_EVERY_S = 5.0  # piped progress: a line at most this often per phase, and at its end


def piped_lines(console: Console) -> Callable[[str, int, int | None], None]:
    """Progress where stderr is no terminal (a pipe, a log file, CI): plain lines
    `phase: done/total` on stderr, the first, then at most every PIPED_EVERY_S, and the last.
    Bars there printed nothing at all."""
    last: dict[str, float] = {}

    def line(phase: str, done: int, total: int | None) -> None:
        now = time_module.monotonic()
        end = total is not None and done >= total
        if phase in last and not end and now - last[phase] < PIPED_EVERY_S:
            return
        last[phase] = now
        of = f"/{total}" if total is not None else ""
        console.print(f"{phase}: {done}{of}", highlight=False, markup=False, soft_wrap=True)

    return line


@contextmanager
def progress(description: str, total: int | None, *, enabled: bool = True) -> Iterator[Callable]:
    """A progress bar on stderr (so stdout stays machine-readable); yields `advance(n=1)`.
    Where stderr is not a terminal, plain lines instead (`piped_lines`); disabled, nothing."""
    console = stderr()
    if not enabled:
        yield lambda n=1: None
        return
    if not console.is_terminal:
        line, done = piped_lines(console), [0]

        def advance(n: int = 1) -> None:
            done[0] += n
            line(description, done[0], total)

        yield advance
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bars:
        task = bars.add_task(description, total=total)
        yield lambda n=1: bars.advance(task, n)


@contextmanager
def phase_progress(*, enabled: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """Progress bars on stderr, one per phase; yields `update(phase, done, total)`, the
    shape the stage packages' `progress` hooks take. Where stderr is not a terminal, plain
    lines instead (`piped_lines`)."""
    console = stderr()
    if not enabled:
        yield lambda phase, done, total: None
        return
    if not console.is_terminal:
        yield piped_lines(console)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bars:
        ids: dict[str, TaskID] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in ids:
                ids[phase] = bars.add_task(phase, total=total)
            bars.update(ids[phase], completed=done, total=total)

        yield update


class TableFormat(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    MARKDOWN = "markdown"


def json_value(v: Any) -> Any:
    """A JSON-ready value: bytes as base64, times as ISO 8601, maps as objects."""
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, datetime | date | time):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, UUID):
        return str(v)
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    return v


def cell(v: Any) -> str:
    """A short display form: blobs and bundles by size, not content."""
    if v is None:
        return "NULL"
    if isinstance(v, bytes | bytearray | memoryview):
        return f"<{len(bytes(v))} bytes>"
    if isinstance(v, dict) and any(isinstance(x, bytes) for x in v.values()):
        return f"<{len(v)} files, {sum(len(x or b'') for x in v.values())} bytes>"
    if isinstance(v, datetime):
        return v.isoformat(sep=" ", timespec="seconds")
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def print_rows(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: TableFormat,
    out: TextIO,
    *,
    max_rows: int = 200,
    title: str | None = None,
) -> None:
    """Write rows as a terminal-wide table (cells cut with an ellipsis, at most `max_rows`
    rows), CSV, a JSON array of objects, or a Markdown table."""
    if fmt == TableFormat.JSON:
        objs = [dict(zip(columns, r, strict=True)) for r in rows]
        out.write(dumps(objs, ensure_ascii=False) + "\n")
    elif fmt == TableFormat.CSV:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                [
                    "" if v is None else dumps(v) if isinstance(v, dict | list) else json_value(v)
                    for v in r
                ]
            )
    elif fmt == TableFormat.MARKDOWN:

        def md(v: Any) -> str:
            return cell(v).replace("|", "\\|").replace("\n", " ")

        out.write("| " + " | ".join(columns) + " |\n")
        out.write("|" + "---|" * len(columns) + "\n")
        for r in rows:
            out.write("| " + " | ".join(md(v) for v in r) + " |\n")
    else:
        console = Console(file=out, soft_wrap=False, highlight=False)
        cells = [[cell(v) for v in r] for r in rows[:max_rows]]
        natural = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        if not console.is_terminal and not os.environ.get("COLUMNS"):
            # Piped (to a file, less, grep): no terminal to fit, so nothing is cut.
            console.width = max(console.width, sum(w + 3 for w in natural) + 1)
        shown = columns_that_fit(len(columns), console.width)
        cells = [r[:shown] for r in cells]
        natural = natural[:shown]
        table = Table(title=title, highlight=False)
        fits = sum(w + 3 for w in natural) + 1 <= console.width
        share = None if fits else max(MIN_COLUMN, (console.width - 1) // shown - 3)
        for name in columns[:shown]:  # when cut, every column gets an equal share
            table.add_column(name, overflow="ellipsis", no_wrap=True, max_width=share)
        for r in cells:
            table.add_row(*r)
        console.print(table)
        notes = []
        if len(rows) > max_rows:
            notes.append(f"{len(rows) - max_rows} more rows not shown")
        if shown < len(columns):
            notes.append(f"{len(columns) - shown} more columns ({', '.join(columns[shown:])})")
        tail = f" ({'; '.join(notes)}: use --format csv, json or markdown)" if notes else ""
        console.print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}{tail}")


MIN_COLUMN = 8


def columns_that_fit(n: int, width: int) -> int:
    """How many columns of at least MIN_COLUMN characters (plus borders) fit in `width`."""
    return max(1, min(n, (width - 1) // (MIN_COLUMN + 3)))
