"""The records of `tasks.literals` (a literal, its kind, a coverage verdict) and the small
helpers its readers share: path tests, kinds of values, a deduplicating collector."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum


class LiteralKind(StrEnum):
    PATH = "path"  # a file or directory the verifier opens or tests
    KEY = "key"  # a JSON/dict key or column it reads
    HEADER = "header"  # a header line or column list it compares
    LINE = "line"  # a whole line (of an expected-output file, or compared to a line)
    STRING = "string"  # a string it compares or searches for
    NAME = "name"  # a single identifier-like word (a status, a user, a function)
    NUMBER = "number"  # a number it expects
    FORMAT = "format"  # a regular expression the output must match
    MODE = "mode"  # a file's permission bits, canonical octal (`640`)
    OWNER = "owner"  # a file's user and/or group (`app`, `1000`, `app:staff`)
    ORDER = "order"  # the order of a list's lines (`ascending`, `descending`)
    ENCODING = "encoding"  # a file's encoding or line endings (`utf-16`, `crlf`)


# Requirements on a file's form (see `tasks.literals.conventions`).
FORM_KINDS = frozenset({LiteralKind.MODE, LiteralKind.OWNER, LiteralKind.ORDER,
                        LiteralKind.ENCODING})  # fmt: skip
# Kinds an agent cannot compute from data: they are conventions the task must state.
CONVENTION_KINDS = frozenset({LiteralKind.PATH, LiteralKind.KEY, LiteralKind.HEADER}) | FORM_KINDS

HOLE = "\u2026"  # marks a computed part (an f-string field) inside a literal's value


@dataclass(frozen=True)
class Literal:
    """One constant a verifier asserts on. `group` ties alternatives: any one suffices."""

    value: str
    kind: LiteralKind
    file: str
    line: int
    group: int | None = None
    ignore_case: bool = False

    @property
    def where(self) -> str:
        return f"tests/{self.file}:{self.line}"


@dataclass(frozen=True)
class CoverageVerdict:
    """Whether one literal is stated, and where: `instruction.md`, `environment/<file>`, or
    (for alternatives) the member that is. `near` quotes text that almost states it (another
    case or spacing), so a reader sees why an uncovered literal is uncovered."""

    literal: Literal
    covered: bool
    where: str | None = None
    near: str | None = None
    how: str = ""  # exact | number | template | example | fragments | path | alternative


SYSTEM_PREFIXES = (
    "/dev", "/proc", "/sys", "/tests", "/logs", "/bin", "/sbin", "/lib", "/lib64", "/usr/bin",
    "/usr/sbin", "/usr/lib", "/usr/local/bin", "/usr/local/lib", "/usr/share", "/usr/include",
    "/etc/os-release", "/solution", "/setup", "/run", "/var/run",
)  # fmt: skip
PATH_RE = re.compile(r"^/[A-Za-z0-9_.@+~\-]+(/[A-Za-z0-9_.@+~\-*]*)*$")
SHELL_PATH_RE = re.compile(r"(?<![\w$.{}/-])(/[A-Za-z0-9_.@+~\-]+(?:/[A-Za-z0-9_.@+~\-]+)*/?)")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
NUM_TOKEN = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w]|\.\d)")
CODE_SUFFIXES = (".py", ".sh", ".bash", ".bats", ".pl", ".rb", ".js", ".go", ".c", ".java")
DATA_SUFFIXES = (".txt", ".json", ".csv", ".tsv", ".out", ".expected", ".log", ".yaml", ".yml")
RUNNER = "run_checks.py"  # the shared assertion runner (tasks/checkrunner.py): boilerplate


def decode(data: bytes) -> str | None:
    if b"\0" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_path(s: str) -> bool:
    return len(s) > 1 and bool(PATH_RE.match(s)) and not s.startswith("//")


def clean_path(s: str) -> str:
    parts = []
    for p in s.rstrip("/").split("/"):
        if "*" in p or HOLE in p:
            break
        parts.append(p)
    return posixpath.normpath("/".join(parts) or "/")


def is_system(path: str) -> bool:
    return path == "/" or any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)


def string_kind(value: str) -> LiteralKind:
    v = value.strip()
    if is_path(v):
        return LiteralKind.PATH
    if NUM_TOKEN.fullmatch(v):
        return LiteralKind.NUMBER
    if IDENT_RE.match(v):
        return LiteralKind.NAME
    return LiteralKind.STRING


class Collector:
    """Accumulates literals, deduplicated by (value, kind, group), first place wins."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, LiteralKind, int | None], Literal] = {}
        self.next_group = 1

    def group(self) -> int:
        self.next_group += 1
        return self.next_group

    def drop_group(self, group: int) -> None:
        """Forget the alternatives of `group` (none of them is demanded)."""
        self.items = {k: v for k, v in self.items.items() if v.group != group}

    def add(self, lit: Literal) -> None:
        v = lit.value
        if lit.kind != LiteralKind.NUMBER:
            if not v.strip() or (len(v.strip()) == 1 and not v.strip().isalnum()):
                return
            if not v.replace(HOLE, "").strip():
                return
        self.items.setdefault((v, lit.kind, lit.group), lit)
