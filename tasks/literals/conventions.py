"""Requirements on a file's form rather than its text: its mode, its owner, the order of
its lines, its encoding. A verifier states them as numbers and calls (`stat.S_IMODE(
os.stat(p).st_mode) == 0o640` folds to 416; `lines == sorted(lines, reverse=True)`;
`open(p, encoding="utf-16")`; `[ "$(stat -c %a p)" = 640 ]`), so they are read here into
literals of their own kinds, with one canonical value each:

- `mode`: octal permission bits, `640` (`4755` with special bits); stated as `640`,
  `0640`, `0o640`, `rw-r-----`, `-rw-r-----` or `u=rw,g=r,o=`;
- `owner`: a user or group name or id, `app`, `1000`, `app:staff`; stated by each part;
- `order`: `ascending` or `descending` (a list compared with its own sorted copy, `sort
  -c`); stated by words of order (sorted, ascending, alphabetical / descending, reverse,
  largest first ...);
- `encoding`: a codec's canonical name (`iso8859-1`, `utf-16`, `cp1252`) or `crlf`; stated
  by any of its names (latin-1, ISO-8859-1 / UTF-16 / CRLF, \\r\\n, Windows line endings).

UTF-8 and ASCII are every tool's default and never a requirement. Pure functions over the
AST or the text of a test file.
"""

from __future__ import annotations

import ast
import codecs
import re
import shlex

from tasks.literals.model import Collector, Literal, LiteralKind

_DEFAULT_CODECS = frozenset({"utf-8", "ascii"})
_MODE_HINTS = ("st_mode", "S_IMODE", "filemode", "S_IMODE(")
_OWNER_HINTS = ("st_uid", "st_gid", "pw_name", "gr_name", "getpwuid", "getgrgid", ".owner()",
                ".group()")  # fmt: skip
_SYMBOLIC = re.compile(r"^-?([r-][w-][xsS-])([r-][w-][xsS-])([r-][w-][xtT-])$")


def symbolic_mode(text: str) -> str | None:
    """`-rw-r-----` / `rw-r-----` -> `640` (special bits from s/S/t/T)."""
    m = _SYMBOLIC.match(text.strip())
    if m is None:
        return None
    bits, special = 0, 0
    for i, part in enumerate(m.groups()):
        bits = bits * 8 + (4 if part[0] == "r" else 0) + (2 if part[1] == "w" else 0)
        bits += 1 if part[2] in "xst" else 0
        if part[2] in "sStT":
            special |= (4, 2, 1)[i]
    return _mode_text(special * 0o1000 + bits)


def _mode_text(bits: int) -> str:
    return f"{bits:o}" if bits <= 0o777 else f"{bits:04o}"


def octal_mode(text: str) -> str | None:
    """`0o640` / `0640` / `640` -> `640` (digits 0-7 only, 3 or 4 of them)."""
    t = text.strip().lower().removeprefix("0o")
    if re.fullmatch(r"[0-7]{3,4}", t):
        return _mode_text(int(t, 8) & 0o7777)
    return None


def mode_forms(mode: str) -> list[str]:
    """The ways an instruction may state `mode` (canonical octal)."""
    bits = int(mode, 8)
    perm = "".join(
        ("r" if bits >> (6 - 3 * i) & 4 else "-")
        + ("w" if bits >> (6 - 3 * i) & 2 else "-")
        + ("x" if bits >> (6 - 3 * i) & 1 else "-")
        for i in range(3)
    )
    who = []
    for name, shift in (("u", 6), ("g", 3), ("o", 0)):
        b = bits >> shift & 7
        who.append(f"{name}=" + "r" * bool(b & 4) + "w" * bool(b & 2) + "x" * bool(b & 1))
    return [mode, f"0{mode}", f"0o{mode}", perm, ",".join(who), str(bits)]


def canonical_codec(name: str) -> str | None:
    """A codec's canonical name, None for UTF-8/ASCII (defaults) and unknown names."""
    try:
        canon = codecs.lookup(name).name
    except LookupError:
        return None
    return None if canon in _DEFAULT_CODECS else canon


_CODEC_WORDS = {
    "iso8859-1": ("latin-1", "latin1", "iso-8859-1", "iso8859-1", "iso 8859-1"),
    "utf-16": ("utf-16", "utf16", "utf-16le", "utf-16be", "ucs-2"),
    "utf-16-le": ("utf-16le", "utf-16 le", "utf-16", "little-endian utf-16"),
    "utf-16-be": ("utf-16be", "utf-16 be", "utf-16", "big-endian utf-16"),
    "cp1252": ("cp1252", "windows-1252"),
    "crlf": ("crlf", "\\r\\n", "windows line ending", "dos line ending", "carriage return"),
}
ORDER_WORDS = {
    "ascending": ("sorted", "sort", "ascending", "alphabetical", "lexicographic", "in order",
                  "byte order", "increasing", "smallest first", "oldest first", "ordered by"),
    "descending": ("descending", "reverse", "decreasing", "largest first", "highest first",
                   "most recent first", "newest first", "biggest first", "z to a",
                   "from highest", "from largest"),
}  # fmt: skip


def stated_forms(lit: Literal) -> list[str]:
    """The strings whose presence (case-insensitive where words) states `lit`."""
    if lit.kind == LiteralKind.MODE:
        return mode_forms(lit.value)
    if lit.kind == LiteralKind.ENCODING:
        return list(_CODEC_WORDS.get(lit.value, (lit.value,)))
    if lit.kind == LiteralKind.ORDER:
        return list(ORDER_WORDS.get(lit.value, (lit.value,)))
    return [p for p in lit.value.split(":") if p]


def in_encoding(data: bytes, canon: str) -> bool:
    """Is `data` (a given file) written in `canon` (a canonical codec name, or `crlf`)?"""
    if canon == "crlf":
        return b"\r\n" in data[:65536]
    if canon.startswith("utf-16"):
        sample = data[:4096]
        return data[:2] in (b"\xff\xfe", b"\xfe\xff") or (
            len(sample) >= 8 and sample[1::2].count(0) >= 0.9 * len(sample[1::2])
        )
    if canon in ("iso8859-1", "cp1252"):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return b"\0" not in data[:4096]
    return False


# ---- Python ----------------------------------------------------------------------------------


def _const_number(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return None if isinstance(node.value, bool) else node.value
    return None


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _mode_value(node: ast.AST, resolve) -> str | None:  # noqa: ANN001 - the reader's resolver
    n = _const_number(node)
    if n is None:
        num = resolve.number(node)
        n = num if isinstance(num, int) else None
    if n is not None:
        return _mode_text(n & 0o7777) if n > 1 else None
    s = resolve.string(node)
    if s is not None:
        return octal_mode(s) or symbolic_mode(s)
    return None


def python_conventions(tree: ast.AST, resolve, name: str, out: Collector,
                       asserted) -> set[int]:  # fmt: skip  # noqa: ANN001
    """Add the convention literals of one Python test; returns the ids of the comparison
    nodes consumed (their numbers are a mode, not a number to compute). `asserted(node)`
    says whether a comparison is something the verifier asserts (positively)."""
    used: set[int] = set()
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            if not isinstance(node.ops[0], ast.Eq | ast.Is) or not asserted(node):
                continue
            left, right = node.left, node.comparators[0]
            line = node.lineno
            # `(st.st_uid, st.st_gid) == (33, 33)`: each element against its own
            pairs = [(left, right)]
            if isinstance(left, ast.Tuple | ast.List) and isinstance(right, ast.Tuple | ast.List):
                if len(left.elts) == len(right.elts):
                    pairs += list(zip(left.elts, right.elts, strict=True))
            for lhs, rhs in pairs:
                lit = _attribute(lhs, rhs, resolve, name, line)
                if lit is not None:
                    out.add(lit)
                    used.add(id(node))
            order = _sorted_copy(left, right) or _sorted_copy(right, left)
            if order is not None:
                out.add(Literal(order, LiteralKind.ORDER, name, line))
                used.add(id(node))
        elif isinstance(node, ast.Call):
            codec = _call_codec(node, resolve)
            if codec is not None:
                out.add(Literal(codec, LiteralKind.ENCODING, name, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            raw = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if raw.strip(" ") in ("\r\n", "\r") and _demanded(node, parents) and asserted(node):
                out.add(Literal("crlf", LiteralKind.ENCODING, name, node.lineno))
    return used


def _source(node: ast.AST, resolve) -> str:  # noqa: ANN001
    """The source of an expression, with what each name in it bound once is bound to."""
    bound = [
        ast.unparse(resolve.consts[n.id])
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and n.id in resolve.consts
    ]
    return " ".join([ast.unparse(node), *bound])


def _demanded(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """A line ending the output must hold: `"\r\n" in text`, `text.endswith("\r\n")`
    (not `not in`, not a split or replace of the verifier's own)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Compare):
        return parent.left is node and isinstance(parent.ops[0], ast.In)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute):
        return parent.func.attr in ("endswith", "count") and node in parent.args
    return False


def _sorted_copy(listed: ast.AST, other: ast.AST) -> str | None:
    """`x == sorted(x)` (or `list(x)`): the order of x is asserted."""
    if not (isinstance(other, ast.Call) and getattr(other.func, "id", "") == "sorted"):
        return None
    if not other.args:
        return None
    inner = ast.unparse(other.args[0])
    outer = listed
    if isinstance(outer, ast.Call) and getattr(outer.func, "id", "") in ("list", "tuple"):
        outer = outer.args[0] if outer.args else outer
    if ast.unparse(outer) != inner:
        return None
    for k in other.keywords:
        if k.arg == "reverse" and isinstance(k.value, ast.Constant) and k.value.value:
            return "descending"
    return "ascending"


def _attribute(left: ast.AST, right: ast.AST, resolve, name: str, line: int) -> Literal | None:  # noqa: ANN001
    """The mode or owner one side of `left == right` demands of what the other side reads."""
    lsrc, rsrc = _source(left, resolve), _source(right, resolve)
    for other, src in ((right, lsrc), (left, rsrc)):
        if any(h in src for h in _MODE_HINTS) or "oct(" in src:
            mode = _mode_value(other, resolve)
            if mode is not None:
                return Literal(mode, LiteralKind.MODE, name, line)
        if any(h in src for h in _OWNER_HINTS):
            n = _const_number(other)
            who = str(n) if n is not None else resolve.string(other)
            if who:
                return Literal(who, LiteralKind.OWNER, name, line)
    return None


def _call_codec(node: ast.Call, resolve) -> str | None:  # noqa: ANN001
    fn = node.func
    attr = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
    names: list[str] = []
    for k in node.keywords:
        if k.arg == "encoding" and (s := resolve.string(k.value)):
            names.append(s)
    if attr in ("decode", "encode") and node.args and (s := resolve.string(node.args[0])):
        names.append(s)
    if attr == "open" and len(node.args) >= 4 and (s := resolve.string(node.args[3])):
        names.append(s)
    for n in names:
        canon = canonical_codec(n)
        if canon is not None:
            return canon
    return None


# ---- shell -------------------------------------------------------------------------------------

_STAT = re.compile(
    r"stat\s+(?:-[a-zA-Z]*c\s*|--format[= ]|--printf[= ]|-f\s*)['\"]?%([aAuUgG])"
    r"(?::%([gG]))?['\"]?"
)
_CMP_VALUE = re.compile(r"(?:!?=|==|-eq)\s*['\"]?([^\s'\"\]]+)['\"]?")
_CMP_BEFORE = re.compile(r"['\"]?([\w:-]+)['\"]?\s*(?:!?=|==|-eq)\s*['\"]?\$\(\s*$")
_FIND_PERM = re.compile(r"-perm\s+['\"]?([0-7]{3,4}|[ugoa]+[=+-][rwx]+)")
_FIND_OWNER = re.compile(r"\bfind\b[^|;&]*?\s-(?:user|group|uid|gid)\s+['\"]?([\w.-]+)")
_SORT_CHECK = re.compile(r"\bsort\s+(?:-[a-zA-Z]*\s+)*-[a-zA-Z]*[cC]|\bsort\b[^|;]*\)\"?\s*\]")
_ICONV = re.compile(r"\b(?:iconv\s+-f\s*|file\s[^|]*\|\s*grep[^|]*?)['\"]?(UTF-16\w*|ISO-8859-1|"
                    r"latin-?1|CRLF|UTF-16)", re.I)  # fmt: skip


def shell_conventions(name: str, lines: list[tuple[int, str]], out: Collector) -> set[int]:
    """Add the convention literals of a shell test (its logical lines); returns the numbers
    of the lines whose compared values are a mode or owner (not numbers to compute)."""
    used: set[int] = set()
    for i, line in lines:
        for code in _nested(line.split(" #", 1)[0]):
            if _shell_form(name, i, code, out):
                used.add(i)
    return used


def _nested(code: str) -> list[str]:
    """A line and the quoted commands inside it (`check name '[ ... ]'` evals them)."""
    try:
        lex = shlex.shlex(code, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        inner = [t for t in lex if " " in t]
    except ValueError:
        inner = []
    return [code, *inner]


def _shell_form(name: str, i: int, code: str, out: Collector) -> bool:
    """The form literals of one command; True when it compares a mode or owner."""
    used = False
    m = _STAT.search(code)
    if m:
        after = code[m.end() :]
        before = code[: m.start()]
        close = after.find(")")
        cmp_ = _CMP_VALUE.match(after[close + 1 :].lstrip("\"' ")) if close >= 0 else None
        pre = _CMP_BEFORE.search(before)
        value = cmp_.group(1) if cmp_ else pre.group(1) if pre else None
        if value is not None:
            if m.group(1) in "aA":
                mode = octal_mode(value) or symbolic_mode(value)
                if mode is not None:
                    out.add(Literal(mode, LiteralKind.MODE, name, i))
                    used = True
            elif not value.startswith("$"):
                out.add(Literal(value, LiteralKind.OWNER, name, i))
                used = True
    for f in _FIND_OWNER.finditer(code):  # `find p -user daemon`, `-gid 33`
        out.add(Literal(f.group(1), LiteralKind.OWNER, name, i))
        used = True
    for p in _FIND_PERM.finditer(code):
        mode = octal_mode(p.group(1))
        if mode is not None:
            out.add(Literal(mode, LiteralKind.MODE, name, i))
            used = True
    if _SORT_CHECK.search(code):
        desc = re.search(r"\bsort\s+(?:-\w*\s+)*-\w*r", code) is not None
        out.add(Literal("descending" if desc else "ascending", LiteralKind.ORDER, name, i))
    for e in _ICONV.finditer(code):
        word = e.group(1).lower()
        canon = "crlf" if word == "crlf" else canonical_codec(word)
        if canon is not None:
            out.add(Literal(canon, LiteralKind.ENCODING, name, i))
    if re.search(r"\$'\\r'|\\r\\n|\\r\$", code) and re.search(r"\bgrep\b|\[", code):
        out.add(Literal("crlf", LiteralKind.ENCODING, name, i))
    return used
