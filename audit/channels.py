"""What an agent can read in files that are not plain UTF-8 text: archive members, git
history, serialized and compiled files, other encodings. Each is turned into *views*, text
an answer can be searched in, named `file!member` so the leakage checks judge them in
context (a member named like an answer, a labelled line, a whole expected value).

- archives: tar (any compression `tarfile` reads), zip and single gzip/bz2/xz files are
  unpacked in memory (never to disk), members read up to `ChannelLimits.member_bytes`,
  nested archives to `max_depth`;
- git: a repository's objects, loose (zlib) and packed, every commit, tree, blob and tag,
  reachable or dangling, read with the host's `git cat-file --batch-all-objects` over a
  copy of `objects/` only (no config, hooks or work tree: nothing of the task's runs); a
  blob is named by the tree paths that hold it (`.git!blob:answers/expected.txt`), commit
  messages are views too;
- serialized and compiled: pickle by its opcodes (`pickletools`, never unpickled), SQLite
  by its rows (`sqlite3.deserialize`, in memory), `.pyc` by its code objects' constants
  (`marshal`, only for this interpreter's magic number);
- other encodings: UTF-16 (BOM or the NUL pattern of ASCII text), Latin-1 of text that is
  not UTF-8, base64 runs inside any text or binary, and the printable runs of other binary
  files (`strings`).

Everything is bounded: total bytes decoded, member count, depth and a wall-clock budget per
task (`ChannelLimits`); what is cut is counted, never an error. Pure over bytes except the
git reader, which runs `git` on a private temporary copy.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import importlib.util
import io
import lzma
import marshal
import os
import pickletools
import posixpath
import re
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import CodeType

from pydantic import BaseModel, ConfigDict, Field

from tasks.literals.model import decode


class ChannelLimits(BaseModel):
    """How much of a task's non-text files is decoded (per task)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_bytes: int = Field(64_000_000, ge=0)
    """Decoded bytes in all (archive members, git objects, decompressed data)."""
    member_bytes: int = Field(4_000_000, ge=0)
    """One member, object or decompressed file is read up to this many bytes."""
    max_members: int = Field(2000, ge=0)
    """Archive members and git objects read in all."""
    max_depth: int = Field(3, ge=0)
    """Archives inside archives."""
    view_chars: int = Field(200_000, ge=0)
    """One view keeps at most this many characters."""
    budget_s: float = Field(10.0, gt=0)
    """Wall-clock budget for one task's files."""


@dataclass
class _Budget:
    limits: ChannelLimits
    start: float = field(default_factory=time.monotonic)
    bytes_used: int = 0
    members: int = 0
    cut: list[str] = field(default_factory=list)

    def take(self, n: int, what: str) -> bool:
        if time.monotonic() - self.start > self.limits.budget_s:
            self.cut.append(f"{what}: time budget spent")
            return False
        if self.bytes_used + n > self.limits.total_bytes:
            self.cut.append(f"{what}: byte budget spent")
            return False
        self.bytes_used += n
        return True

    def member(self, what: str) -> bool:
        self.members += 1
        if self.members > self.limits.max_members:
            self.cut.append(f"{what}: member budget spent")
            return False
        return True


@dataclass
class ChannelViews:
    """The views of one task's files: {`file!member` name: text}, and what was cut."""

    views: dict[str, str] = field(default_factory=dict)
    cut: list[str] = field(default_factory=list)


_B64 = re.compile(rb"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=])")
_PRINTABLE = re.compile(rb"[\t\n\r\x20-\x7e]{4,}")


def _printable(text: str) -> bool:
    if not text:
        return False
    good = sum(ch.isprintable() or ch in "\t\n\r" for ch in text)
    return good >= 0.95 * len(text)


def utf16(data: bytes) -> str | None:
    """UTF-16 text: a byte-order mark, or ASCII text with every other byte NUL."""
    head = data[:2]
    if head in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    sample = data[:4096]
    if len(sample) >= 8 and len(sample) % 2 == 0:
        for codec, zeros in (("utf-16-le", sample[1::2]), ("utf-16-be", sample[0::2])):
            if zeros.count(0) >= 0.9 * len(zeros):
                try:
                    text = data.decode(codec)
                except UnicodeDecodeError:
                    continue
                return text if _printable(text) else None
    return None


def base64_runs(data: bytes, limit: int = 64) -> Iterator[tuple[int, str]]:
    """(offset, decoded text) of base64 runs (>= 16 characters) that decode to text."""
    for i, m in enumerate(_B64.finditer(data)):
        if i >= limit:
            return
        run = m.group(0)
        try:
            raw = base64.b64decode(run + b"=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        text = decode(raw)
        if text is not None and _printable(text) and len(text.strip()) >= 4:
            yield m.start(), text


def strings(data: bytes, limit: int) -> str:
    """The printable ASCII runs (>= 4 bytes) of binary data, one a line."""
    out, size = [], 0
    for m in _PRINTABLE.finditer(data):
        s = m.group(0).decode("ascii")
        out.append(s)
        size += len(s) + 1
        if size >= limit:
            break
    return "\n".join(out)


_PICKLE_PLUMBING = frozenset(
    {"PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}
)


def pickle_text(data: bytes) -> str | None:
    """The constants of a pickle (strings, numbers), one a line, read from its opcodes."""
    if data[:1] != b"\x80" and data[-1:] != b".":
        return None
    out: list[str] = []
    try:
        for op, arg, _ in pickletools.genops(io.BytesIO(data)):
            if arg is None or op.name in _PICKLE_PLUMBING:
                continue
            if isinstance(arg, bytes):
                arg = arg.decode("utf-8", "replace")
            out.append(str(arg))
    except Exception:  # noqa: BLE001 - not a pickle (or a truncated one): no view
        return None
    return "\n".join(out) if out else None


def sqlite_text(data: bytes, limit: int) -> str | None:
    """The schema and rows of an SQLite database, read in memory."""
    if not data.startswith(b"SQLite format 3\0"):
        return None
    con = sqlite3.connect(":memory:")
    try:
        con.deserialize(data)
        out, size = [], 0
        tables = con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall()
        for name, sql in tables:
            out.append(str(sql))
            quoted = '"' + str(name).replace('"', '""') + '"'
            for row in con.execute(f"SELECT * FROM {quoted} LIMIT 10000"):
                cells = ["" if v is None else str(v) for v in row]  # one cell a line
                out.extend(cells)
                size += sum(len(c) for c in cells)
                if size > limit:
                    return "\n".join(out)
        return "\n".join(out)
    except (sqlite3.Error, OverflowError):
        return None
    finally:
        con.close()


def _consts(code: CodeType, out: list[str], depth: int = 0) -> None:
    if depth > 20:
        return
    for c in code.co_consts:
        if isinstance(c, CodeType):
            _consts(c, out, depth + 1)
        elif isinstance(c, str | int | float | bytes) and not isinstance(c, bool):
            out.append(c.decode("utf-8", "replace") if isinstance(c, bytes) else str(c))
        elif isinstance(c, tuple | frozenset):
            out.extend(str(x) for x in c if isinstance(x, str | int | float))
    out.extend(code.co_names)


def pyc_text(data: bytes) -> str | None:
    """The constants of a compiled module for this interpreter (its magic number)."""
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER:
        return None
    try:
        code = marshal.loads(data[16:])
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(code, CodeType):
        return None
    out: list[str] = []
    _consts(code, out)
    return "\n".join(out)


# ---- archives ---------------------------------------------------------------------------------


def _tar_members(data: bytes, b: _Budget, where: str) -> Iterator[tuple[str, bytes]]:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error):
        return
    with tf:
        try:
            for info in tf:
                if not info.isfile() or not b.member(where):
                    continue
                n = min(info.size, b.limits.member_bytes)
                if not b.take(n, where):
                    return
                f = tf.extractfile(info)
                if f is not None:
                    yield info.name, f.read(n)
        except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error):
            return


def _zip_members(data: bytes, b: _Budget, where: str) -> Iterator[tuple[str, bytes]]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    with zf:
        for info in zf.infolist():
            if info.is_dir() or not b.member(where):
                continue
            n = min(info.file_size, b.limits.member_bytes)
            if not b.take(n, where):
                return
            try:
                with zf.open(info) as f:
                    yield info.filename, f.read(n)
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, zlib.error):
                continue  # encrypted or broken: nothing readable without work


def _decompressed(data: bytes, b: _Budget, where: str) -> bytes | None:
    """A single gzip / bz2 / xz stream, bounded."""
    stream: io.BufferedIOBase
    if data[:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=io.BytesIO(data))
    elif data[:3] == b"BZh":
        stream = bz2.BZ2File(io.BytesIO(data))
    elif data[:6] == b"\xfd7zXZ\x00":
        stream = lzma.LZMAFile(io.BytesIO(data))
    else:
        return None
    try:
        with stream:
            raw = stream.read(b.limits.member_bytes)
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError):
        return None
    return raw if b.take(len(raw), where) else None


def _is_tar(data: bytes) -> bool:
    return len(data) > 262 and data[257:262] == b"ustar"


# ---- git --------------------------------------------------------------------------------------


def git_dirs(files: Mapping[str, bytes]) -> dict[str, dict[str, bytes]]:
    """{repository prefix (`app/.git`): {path under it: bytes}} for every `.git` directory
    among `files` (a bare repository is one holding `objects/` beside a `HEAD`)."""
    out: dict[str, dict[str, bytes]] = {}
    for name, data in files.items():
        parts = name.split("/")
        if ".git" in parts:
            i = parts.index(".git")
            root, rest = "/".join(parts[: i + 1]), "/".join(parts[i + 1 :])
        elif "objects" in parts:
            i = parts.index("objects")
            root, rest = "/".join(parts[:i]), "/".join(parts[i:])
            if f"{root}/HEAD".lstrip("/") not in files:
                continue
        else:
            continue
        out.setdefault(root, {})[rest] = data
    return out


_TREE_ENTRY = re.compile(rb"(\d+) ([^\0]+)\0(.{20})", re.S)


def _tree_names(tree: bytes, prefix: str) -> list[tuple[str, str, bool]]:
    """(object id, path, is a tree) of a raw tree object's entries."""
    out = []
    for m in _TREE_ENTRY.finditer(tree):
        mode, name, sha = m.group(1), m.group(2).decode("utf-8", "replace"), m.group(3).hex()
        out.append((sha, posixpath.join(prefix, name), mode.startswith(b"4")))
    return out


def git_objects(
    objects: Mapping[str, bytes], b: _Budget, where: str
) -> dict[str, tuple[str, bytes]]:
    """{object id: (type, content)} of every object (loose and packed, reachable or not),
    read by `git cat-file --batch-all-objects` over a private copy of `objects/`."""
    git = shutil.which("git")
    if git is None:
        b.cut.append(f"{where}: git is not installed on this host")
        return {}
    out: dict[str, tuple[str, bytes]] = {}
    with tempfile.TemporaryDirectory(prefix="t1-git-") as tmp:
        root = os.path.join(tmp, "repo.git")
        os.makedirs(os.path.join(root, "refs"))
        with open(os.path.join(root, "HEAD"), "w") as f:
            f.write("ref: refs/heads/main\n")
        for rel, data in objects.items():
            if not rel.startswith("objects/") or ".." in rel.split("/"):
                continue
            dest = os.path.join(root, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_DIR": root,
        }
        left = max(1.0, b.limits.budget_s - (time.monotonic() - b.start))
        try:
            r = subprocess.run(
                [git, "cat-file", "--batch-all-objects", "--batch", "--unordered"],
                capture_output=True,
                env=env,
                cwd=tmp,
                timeout=left,
                check=False,
            )
        except subprocess.TimeoutExpired:
            b.cut.append(f"{where}: git cat-file ran out of time")
            return {}
        data, pos = r.stdout, 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            head = data[pos:nl].split()
            if len(head) != 3 or not head[2].isdigit():
                break
            sha, kind, size = head[0].decode(), head[1].decode(), int(head[2])
            body = data[nl + 1 : nl + 1 + size]
            pos = nl + 1 + size + 1
            if not b.member(where) or not b.take(min(size, b.limits.member_bytes), where):
                break
            out[sha] = (kind, body[: b.limits.member_bytes])
    return out


def git_views(objects: Mapping[str, tuple[str, bytes]]) -> dict[str, bytes]:
    """{`commit <id>` / `blob:<path>` / `blob <id>`: bytes} of a repository's objects: blobs
    named by every tree path that holds them (a dangling blob by its id), commit and tag
    messages whole."""
    names: dict[str, set[str]] = {}
    for kind, body in objects.values():
        if kind == "tree":
            for child, path, _ in _tree_names(body, ""):
                names.setdefault(child, set()).add(path)
    # paths below the top: extend each tree entry's name by the trees that hold it
    for _ in range(8):
        grown = False
        for sha, (kind, body) in objects.items():
            if kind != "tree":
                continue
            for prefix in sorted(names.get(sha, set())):
                for child, path, _ in _tree_names(body, prefix):
                    if path not in names.setdefault(child, set()):
                        names[child].add(path)
                        grown = True
        if not grown:
            break
    out: dict[str, bytes] = {}
    for sha, (kind, body) in sorted(objects.items()):
        if kind in ("commit", "tag"):
            out[f"{kind} {sha[:12]}"] = body
        elif kind == "blob":
            paths = sorted(names.get(sha, set()), key=len, reverse=True)
            out[f"blob:{paths[0]}" if paths else f"blob {sha[:12]}"] = body
    return out


# ---- the walk ---------------------------------------------------------------------------------


def _views_of(name: str, data: bytes, b: _Budget, depth: int, out: dict[str, str]) -> None:
    """Add the views of one file (`name`: where it is, `file!member` inside archives)."""
    lim = b.limits
    if time.monotonic() - b.start > lim.budget_s:
        b.cut.append(f"{name}: time budget spent")
        return

    def add(key: str, text: str | None) -> None:
        if text is not None and text.strip():
            out[key] = text[: lim.view_chars]

    if depth > 0 and (text := decode(data)) is not None:
        add(name, text)  # a member that is text: searched as it is
    members: Iterator[tuple[str, bytes]] | None = None
    if depth < lim.max_depth:
        if data[:4] == b"PK\x03\x04":
            members = _zip_members(data, b, name)
        elif (
            _is_tar(data)
            or data[:2] == b"\x1f\x8b"
            or data[:3] == b"BZh"
            or data[:6] == b"\xfd7zXZ\x00"
        ):
            members = _tar_members(data, b, name) if _tar_like(data) else None
            if members is None and (raw := _decompressed(data, b, name)) is not None:
                _views_of(f"{name}!{_strip_ext(name)}", raw, b, depth + 1, out)
                return
    if members is not None:
        for member, raw in members:
            _views_of(f"{name}!{member}", raw, b, depth + 1, out)
        return
    text = decode(data)
    if text is not None:  # text: its base64 runs
        for off, decoded in base64_runs(data):
            add(f"{name}!base64@{off}", decoded)
        return
    add(f"{name}!utf-16", utf16(data))
    if data.startswith(b"SQLite format 3\0"):
        add(f"{name}!sqlite", sqlite_text(data, lim.view_chars))
        return
    if data[:4] == importlib.util.MAGIC_NUMBER:
        add(f"{name}!pyc", pyc_text(data))
        return
    if data[:1] == b"\x80" and len(data) > 2 and data[1] <= 5:
        add(f"{name}!pickle", pickle_text(data))
        return
    if f"{name}!utf-16" in out:
        return
    if b"\0" not in data[:4096]:  # text in a single-byte encoding (Latin-1, CP1252)
        add(f"{name}!latin-1", data.decode("latin-1"))
        return
    add(f"{name}!strings", strings(data, lim.view_chars))
    for off, decoded in base64_runs(data):
        add(f"{name}!base64@{off}", decoded)


def _tar_like(data: bytes) -> bool:
    """A tar stream, plain or compressed (peeked at, bounded)."""
    if _is_tar(data):
        return True
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            return tf.next() is not None
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error):
        return False


def _strip_ext(name: str) -> str:
    base = posixpath.basename(name.split("!")[-1])
    for ext in (".gz", ".bz2", ".xz", ".gzip"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def channel_views(
    files: Mapping[str, bytes], limits: ChannelLimits | None = None, prefix: str = ""
) -> ChannelViews:
    """Views of every file an agent can read that plain text search misses (see the module
    doc): `files` is {path: bytes} (an environment's build context, or files read back from
    a built sandbox); UTF-8 text files contribute only their base64 runs."""
    b = _Budget(limits or ChannelLimits())
    out: dict[str, str] = {}
    repos = git_dirs(files)
    in_repo = {f"{root}/{rel}".lstrip("/") for root, fs in repos.items() for rel in fs}
    for root, fs in sorted(repos.items()):
        objects = {rel: d for rel, d in fs.items() if rel.startswith("objects/")}
        if not objects:
            continue
        where = f"{prefix}{root}"
        for key, body in git_views(git_objects(objects, b, where)).items():
            _views_of(f"{where}!{key}", body, b, 1, out)
        for rel, data in fs.items():  # refs, packed-refs, logs: text, searched as is
            if not rel.startswith("objects/") and (text := decode(data)) is not None:
                out[f"{where}!{rel}"] = text[: b.limits.view_chars]
    for name, data in sorted(files.items()):
        if name in in_repo:
            continue
        _views_of(f"{prefix}{name}", data, b, 0, out)
    return ChannelViews(out, b.cut)
