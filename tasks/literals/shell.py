"""Literals of shell tests (`[ ]`/`test`, grep, jq, paths) and of expected-output files the
verifier compares against (see `tasks.literals`)."""

from __future__ import annotations

import json
import posixpath
import re
import shlex

from tasks.literals.conventions import shell_conventions
from tasks.literals.model import (
    NUM_TOKEN,
    SHELL_PATH_RE,
    Collector,
    Literal,
    LiteralKind,
    clean_path,
    is_path,
    is_system,
    string_kind,
)

_SHELL_OPS = frozenset({"&&", "||", ";", "|", ";;", "{", "}", "then", "do", "if", "elif", "while"})
_TEST_FILE_OPS = frozenset({"-f", "-e", "-d", "-s", "-r", "-x", "-w", "-L", "-h"})


def _shell_tokens(line: str) -> list[str]:
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:  # an unbalanced quote (a heredoc body, a continuation)
        return line.split()


def _is_regex(p: str) -> bool:
    return bool(re.search(r"[\\^$*+?{}\[\]|()]", p)) or (
        "." in p and not re.fullmatch(r"[\w ./:-]*\w", p)
    )


# A quoted argument that is itself a check (`check "name" '[ -f x ]'`, `run_test "grep -q
# ok f"`): helpers that eval their arguments are read like the lines they run.
_NESTED = re.compile(
    r"(^|[|&;]\s*|^\s*!\s*)(\[\[?\s|test\s|grep\s|egrep\s|fgrep\s|diff\s|cmp\s|jq\s)"
)


def _balanced(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return False
    return True


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each command: a quote left open on one line (a
    multi-line expected value) continues on the next ones."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, list[str]] | None = None
    for i, raw in enumerate(text.splitlines(), 1):
        if pending is not None:
            pending[1].append(raw)
            joined = "\n".join(pending[1])
            if _balanced(joined) or len(pending[1]) > 200:
                out.append((pending[0], joined.strip()))
                pending = None
            continue
        if _balanced(raw):
            out.append((i, raw.strip()))
        else:
            pending = (i, [raw])
    if pending is not None:
        out.extend((pending[0] + k, ln.strip()) for k, ln in enumerate(pending[1]))
    return out


def shell_literals(name: str, text: str, out: Collector) -> set[str]:
    """Literals of a shell verifier; returns the basenames of files it compares against."""
    compared: set[str] = set()
    lines = _logical_lines(text)
    form_lines = shell_conventions(name, lines, out)
    for i, line in lines:
        if not line or line.startswith("#"):
            continue
        if i not in form_lines:  # a mode or owner compared: read as its own kind
            _shell_line(name, i, line, out, compared, 0)
        for m in SHELL_PATH_RE.finditer(line.split(" #", 1)[0]):
            p = clean_path(m.group(1))
            if p.count("/") >= 2 and not is_system(p) and is_path(p):
                out.add(Literal(p, LiteralKind.PATH, name, i))
    return compared


def _shell_line(name: str, i: int, line: str, out: Collector, compared: set, depth: int) -> None:
    toks = _shell_tokens(line)
    segments: list[list[str]] = [[]]
    for t in toks:
        if t in _SHELL_OPS:
            segments.append([])
        else:
            segments[-1].append(t)
    for seg in segments:
        _shell_segment(name, i, seg, out, compared)
        if depth < 2:
            for t in seg[1:]:
                if " " in t and _NESTED.search(t):
                    _shell_line(name, i, t, out, compared, depth + 1)


def _shell_segment(name: str, i: int, seg: list[str], out: Collector, compared: set) -> None:
    if not seg:
        return
    negated = seg[0] == "!"
    if negated:
        seg = seg[1:]
    if not seg:
        return
    cmd = posixpath.basename(seg[0])
    if cmd in ("[", "[[", "test"):
        body = [t for t in seg[1:] if t not in ("]", "]]")]
        if body and body[0] == "!":
            negated, body = not negated, body[1:]
        for k, t in enumerate(body):
            if t in _TEST_FILE_OPS and k + 1 < len(body) and not negated:
                p = body[k + 1]
                if is_path(p) and not is_system(clean_path(p)):
                    out.add(Literal(clean_path(p), LiteralKind.PATH, name, i))
            pos = t in ("=", "==", "-eq")
            neg = t in ("!=", "-ne")
            if (pos and not negated) or (neg and negated):
                for side in (body[k - 1] if k else "", body[k + 1] if k + 1 < len(body) else ""):
                    if side and "\n" in side.strip() and not re.search(r"[$`]", side):
                        for ln in side.strip().splitlines():  # a whole expected content
                            kind = LiteralKind.NUMBER if NUM_TOKEN.fullmatch(ln) else None
                            out.add(Literal(ln.strip(), kind or LiteralKind.LINE, name, i))
                        continue
                    if side and not re.search(r"[$`()]", side):
                        kind = LiteralKind.NUMBER if t in ("-eq", "-ne") else string_kind(side)
                        if kind == LiteralKind.NUMBER:
                            try:
                                if abs(float(side)) <= 1:
                                    continue
                            except ValueError:
                                continue
                        out.add(Literal(side, kind, name, i))
        return
    if cmd in ("grep", "egrep", "fgrep") and not negated:
        fixed, ext, icase, invert, pattern = cmd == "fgrep", cmd == "egrep", False, False, None
        args = seg[1:]
        k = 0
        while k < len(args):
            a = args[k]
            if a in ("-e", "--regexp") and k + 1 < len(args):
                pattern = args[k + 1]
                k += 2
                continue
            if a.startswith("--"):
                fixed |= a == "--fixed-strings"
                icase |= a == "--ignore-case"
                invert |= a == "--invert-match"
            elif a.startswith("-") and len(a) > 1 and pattern is None:
                fixed |= "F" in a
                ext |= "E" in a or "P" in a
                icase |= "i" in a
                invert |= "v" in a
            elif pattern is None:
                pattern = a
            k += 1
        if pattern is None or invert or re.search(r"\$[{\w(]", pattern):
            return
        if fixed or not _is_regex(pattern):
            out.add(Literal(pattern, string_kind(pattern), name, i, None, icase))
        else:
            out.add(Literal(pattern, LiteralKind.FORMAT, name, i, None, icase))
        return
    if cmd in ("diff", "cmp"):
        for t in seg[1:]:
            if not t.startswith("-"):
                compared.add(posixpath.basename(t))
        return
    if cmd == "jq" and not negated:
        for t in seg[1:]:
            if t.startswith("-"):
                continue
            for m in re.finditer(r"(?<![\w\]\)])((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", t):
                for key in m.group(1).split(".")[1:]:
                    out.add(Literal(key, LiteralKind.KEY, name, i))
            for m in re.finditer(r"==\s*(\"[^\"]*\"|-?\d+(?:\.\d+)?)", t):
                v = m.group(1).strip('"')
                out.add(Literal(v, string_kind(v), name, i))
            break


# ---- expected-output files ----------------------------------------------------------------


def expected_file_literals(name: str, text: str, out: Collector) -> None:
    """An expected-output file: JSON keys and values, a CSV header, else its lines."""
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        if doc is not None:
            _json_literals(name, doc, out)
            return
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return
    if name.endswith((".csv", ".tsv")):
        out.add(Literal(lines[0].strip(), LiteralKind.HEADER, name, 1))
        return
    for k, ln in enumerate(lines[:200], 1):
        kind = LiteralKind.NUMBER if NUM_TOKEN.fullmatch(ln.strip()) else LiteralKind.LINE
        out.add(Literal(ln.strip(), kind, name, k))


def _json_literals(name: str, doc: object, out: Collector, depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(doc, dict):
        for k, v in list(doc.items())[:200]:
            out.add(Literal(str(k), LiteralKind.KEY, name, 0))
            _json_literals(name, v, out, depth + 1)
    elif isinstance(doc, list):
        for v in doc[:200]:
            _json_literals(name, v, out, depth + 1)
    elif isinstance(doc, str):
        out.add(Literal(doc, string_kind(doc), name, 0))
    elif isinstance(doc, int | float) and not isinstance(doc, bool) and abs(doc) > 1:
        out.add(Literal(repr(doc), LiteralKind.NUMBER, name, 0))
