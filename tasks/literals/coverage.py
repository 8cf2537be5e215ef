"""Whether literals are stated, exactly and case-sensitively, in an instruction and an
environment's files (see `tasks.literals` for the rules)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tasks.literals.conventions import in_encoding, stated_forms
from tasks.literals.model import (
    FORM_KINDS,
    HOLE,
    NUM_TOKEN,
    CoverageVerdict,
    Literal,
    LiteralKind,
    decode,
)

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
# What may stand for a computed number in a stated template: a number, <count>, {n}, [N], N.
_PLACEHOLDER = (
    r"(?:[-+]?\d+(?:[.,]\d+)?|<[^<>\n]{1,24}>|\{[^{}\n]{0,24}\}|\[[^\[\]\n]{1,24}\]"
    r"|\$\{?\w{1,24}\}?|%[-0-9.]*[dfsi]|[A-Za-z_]{1,12})"
)
# A written-out date/time format (YYYY-MM-DD, HH:MM:SS.mmm): its letters stand for digits.
_FORMAT_WORD = re.compile(r"(?<![A-Za-z])[YMDHhmsS]{1,4}(?:[-:/. T][YMDHhmsSf]{1,6})+")


def _squash(text: str) -> str:
    return " ".join(text.split())


def _bounded(lit: str, text: str, flags: int = 0) -> re.Match[str] | None:
    """`lit` inside `text` with word boundaries where `lit` starts or ends with a word
    character (so `ok` is not found inside `token`)."""
    pre = r"(?<![\w])" if lit[:1].isalnum() or lit[:1] == "_" else ""
    post = r"(?![\w])" if lit[-1:].isalnum() or lit[-1:] == "_" else ""
    return re.search(pre + re.escape(lit) + post, text, flags)


@dataclass(frozen=True)
class _Text:
    where: str
    raw: str
    flat: str  # whitespace runs collapsed


class _Sources:
    """The texts a literal may be stated in, the instruction first, then the environment's
    files (build context, Dockerfile included), and the image paths of those files."""

    def __init__(self, instruction: str, environment: Mapping[str, bytes], workdir: str) -> None:
        self.workdir = workdir.rstrip("/") or "/"
        self.texts: list[_Text] = [_Text("instruction.md", instruction, _squash(instruction))]
        self.image_paths = set(image_paths(environment, workdir).values())
        for name, data in sorted(environment.items()):
            text = decode(data) if len(data) <= 5_000_000 else None
            if text is not None:
                self.texts.append(_Text(f"environment/{name}", text, _squash(text)))
        self.numbers = [(t.where, _numbers_in(t.flat)) for t in self.texts]
        self.raw = environment

    @property
    def instruction(self) -> str:
        return self.texts[0].flat

    def find(self, lit: str, ignore_case: bool = False) -> str | None:
        s = _squash(lit)
        if not s:
            return None
        for t in self.texts:
            present = s.lower() in t.flat.lower() if ignore_case else s in t.flat
            if present and _bounded(s, t.flat, re.IGNORECASE if ignore_case else 0):
                return t.where
        return None

    def near(self, lit: str) -> str | None:
        s = _squash(lit)
        if not s:
            return None
        for t in self.texts:
            if s.lower() in t.flat.lower():
                m = _bounded(s, t.flat, re.IGNORECASE)
                if m:
                    return f"{t.where}: {m.group(0)!r}"
        return None


def _numbers_in(text: str) -> set[float]:
    out = set()
    for m in NUM_TOKEN.finditer(text):
        try:
            out.add(float(m.group(0)))
        except ValueError:
            continue
    low = text.lower()
    for k, w in enumerate(_NUMBER_WORDS):
        if re.search(rf"\b{w}\b", low):
            out.add(float(k))
    return out


def image_paths(environment: Mapping[str, bytes], workdir: str = "/app") -> dict[str, str]:
    """Where each build-context file lands in the image: `app/*` under the working
    directory (the seeds' convention), else by the Dockerfile's COPY/ADD lines (after its
    WORKDIR; a file copied twice keeps its first place). Files no line copies are left out.
    Also maps `WORKDIR` dirs to themselves."""
    wd = workdir.rstrip("/") or "/"
    out = {n: posixpath.join(wd, n[4:]) for n in environment if n.startswith("app/")}
    docker = decode(environment.get("Dockerfile", b"")) or ""
    cur = "/"
    for raw in docker.replace("\\\n", " ").splitlines():
        parts = raw.strip().split()
        if not parts:
            continue
        op = parts[0].upper()
        if op == "WORKDIR" and len(parts) > 1:
            cur = posixpath.join(cur, parts[1])
            out.setdefault(cur, cur)
        if op not in ("COPY", "ADD") or len(parts) < 3:
            continue
        args = [p for p in parts[1:] if not p.startswith("--")]
        *srcs, dest = args
        dest_dir = dest.endswith("/") or len(srcs) > 1
        dest = posixpath.join(cur, dest)
        for src in srcs:
            src = "" if src in (".", "./") else src.strip("/").removeprefix("./")
            for n in environment:  # the first place a file lands is where the agent sees it
                if src and n == src:
                    where = posixpath.join(dest, posixpath.basename(n)) if dest_dir else dest
                    out.setdefault(n, where)
                elif not src or n.startswith(src + "/"):
                    out.setdefault(n, posixpath.join(dest, n[len(src) :].lstrip("/")))
    return out


def _path_covered(path: str, src: _Sources) -> tuple[str, str] | None:
    if "/.git/" in path + "/":  # a repository's internals exist by convention
        repo = path[: (path + "/").index("/.git/")]
        hit = _path_covered(repo, src) if repo else None
        return (hit[0], "path") if hit else None
    if any(p == path or p.startswith(path + "/") for p in src.image_paths):
        return "environment (image files)", "path"
    for t in src.texts:
        if path in t.flat and re.search(rf"(?<![\w.-]){re.escape(path)}(?![\w.-])", t.flat):
            return t.where, "path"
    wd = src.workdir
    if path == wd:
        return "working directory", "path"
    if path.startswith(wd + "/"):
        rel = path[len(wd) + 1 :]
        if re.search(rf"(?<![\w/.-])(\./)?{re.escape(rel)}(?![\w.-])", src.instruction):
            return "instruction.md", "path"
    parent, base = posixpath.split(path)
    if parent and base and parent != path:
        if re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-]|\.\w)", src.instruction):
            if parent in ("/", wd) or _path_covered(parent, src) is not None:
                return "instruction.md", "path"
    return None


def _template_regex(lit: str) -> str | None:
    """`total: 300` as a pattern matching `total: N` / `total: <count>` / `total: 12`, and
    `query_4` as one matching `query_1` (digits inside a word stand for digits only)."""
    pieces = NUM_TOKEN.split(lit)
    if sum(len(re.sub(r"\W", "", p)) for p in pieces) < 2:
        return None
    inner = re.compile(r"\d+")
    esc = []
    for p in pieces:
        words = [re.escape(w) for w in inner.split(re.sub(r"\s+", " ", p))]
        esc.append(r"\d+".join(words).replace(r"\ ", r"\s*"))
    if len(pieces) < 2 and not inner.search(lit):
        return None
    return _PLACEHOLDER.join(esc)


def regex_requirements(pattern: str) -> list[list[str]] | None:
    """The literal runs a regular expression demands: each requirement is a list of
    alternatives (a branch of pure literals), runs of >= 2 word characters only. None when
    the pattern does not compile."""
    from re import _constants, _parser  # type: ignore[attr-defined]

    try:
        items = _parser.parse(pattern)
    except re.error:
        return None
    reqs: list[list[str]] = []

    def literal(sub) -> str | None:
        chars = []
        for op, av in sub:
            if op is not _constants.LITERAL:
                return None
            chars.append(chr(av))
        return "".join(chars)

    def walk(seq) -> None:
        cur: list[str] = []

        def flush() -> None:
            run = "".join(cur).strip()
            if len(re.sub(r"\W", "", run)) >= 2:
                reqs.append([run])
            cur.clear()

        for op, av in seq:
            if op is _constants.LITERAL:
                cur.append(chr(av))
                continue
            flush()
            if op is _constants.SUBPATTERN:
                walk(av[-1])
            elif op is _constants.BRANCH:
                alts = [literal(b) for b in av[1]]
                if all(a is not None and len(re.sub(r"\W", "", a)) >= 2 for a in alts):
                    reqs.append([a.strip() for a in alts if a is not None])
        flush()

    walk(items)
    return reqs


def _shape(s: str) -> str:
    """Letters -> a, digits -> 9, runs collapsed: `2024-01-31` and `YYYY-MM-DD` -> 9-9-9."""
    s = _FORMAT_WORD.sub(lambda m: re.sub(r"[YMDHhmsSf]", "9", m[0]), s)
    s = re.sub(r"\d", "9", re.sub(r"[A-Za-z]", "a", s))
    return re.sub(r"(.)\1+", r"\1", s)


def _regex_sample(pattern: str) -> str | None:
    """One string the pattern matches (its first alternatives), for its shape."""
    from re import _constants, _parser  # type: ignore[attr-defined]

    def gen(items) -> str:
        out = []
        for op, av in items:
            if op is _constants.LITERAL:
                out.append(chr(av))
            elif op is _constants.IN:
                kind, val = av[0]
                if kind is _constants.CATEGORY:
                    out.append("9" if "DIGIT" in str(val) else "a")
                elif kind in (_constants.RANGE,):
                    out.append(chr(val[0]))
                elif kind is _constants.LITERAL:
                    out.append(chr(val))
                else:
                    out.append("a")
            elif op in (_constants.MAX_REPEAT, _constants.MIN_REPEAT):
                lo, _hi, sub = av
                out.append(gen(sub) * max(1, lo))
            elif op is _constants.SUBPATTERN:
                out.append(gen(av[-1]))
            elif op is _constants.BRANCH:
                out.append(gen(av[1][0]))
            elif op is _constants.ANY:
                out.append("a")
        return "".join(out)

    try:
        return gen(_parser.parse(pattern))
    except (re.error, TypeError, ValueError, IndexError):
        return None


def _format_covered(lit: Literal, src: _Sources) -> tuple[str, str] | None:
    flags = re.IGNORECASE if lit.ignore_case else 0
    for pattern in (lit.value, lit.value.lstrip("^").rstrip("$")):
        try:
            rx = re.compile(pattern, flags | re.MULTILINE)
        except re.error:
            continue
        for t in src.texts:
            if len(t.raw) <= 200_000 and rx.search(t.raw):
                return t.where, "example"
    reqs = regex_requirements(lit.value)
    if reqs:
        found = []
        for alts in reqs:
            hit = next((h for a in alts if (h := _text_covered(a, src, lit.ignore_case))), None)
            if hit is None:
                return None
            found.append(hit[0])
        return found[0], "fragments"
    sample = _regex_sample(lit.value)
    if sample is None:
        return None
    want = _shape(sample)
    if len(want) <= 2:  # a bare number or word: no format to state
        return "format", "trivial"
    for t in src.texts:
        if want in _shape(t.flat):
            return t.where, "example"
    return None


def _number_covered(lit: str, src: _Sources) -> str | None:
    try:
        value = float(lit)
    except ValueError:
        return None
    for where, nums in src.numbers:
        if value in nums:
            return where
    return None


def _text_covered(text: str, src: _Sources, ignore_case: bool = False) -> tuple[str, str] | None:
    """A string, line, key or name: exactly; else as a template whose numbers are computed
    (`total: 300` by `total: N`); else, when it is only numbers and punctuation (`2:30`),
    by every number of it being stated."""
    where = src.find(text, ignore_case)
    if where:
        return where, "exact"
    tpl = _template_regex(text)
    if tpl is not None:
        for t in src.texts:
            if re.search(tpl, t.flat, re.IGNORECASE if ignore_case else 0):
                return t.where, "template"
    nums = NUM_TOKEN.findall(text)
    if nums and len(re.sub(r"\W", "", NUM_TOKEN.sub("", text))) < 2:
        places = [_number_covered(n, src) for n in nums]
        if all(places):
            return places[0] or "", "numbers"
    return None


def _filled_covered(v: str, src: _Sources, ignore_case: bool) -> tuple[str, str] | None:
    """An f-string stated with its fields filled: `…_auc` by `setosa_auc`, `row …: ok` by
    `row 3: ok` (a field is a run of word characters, dots and dashes)."""
    rx = r"[\w.-]+".join(re.escape(p) for p in v.split(HOLE))
    rx = ("" if v.startswith(HOLE) else r"(?<!\w)") + rx + ("" if v.endswith(HOLE) else r"(?!\w)")
    for t in src.texts:
        if re.search(rx, t.flat, re.IGNORECASE if ignore_case else 0):
            return t.where, "filled"
    return None


def _form_covered(lit: Literal, src: _Sources) -> tuple[str, str] | None:
    """A mode, owner, order or encoding: any of its stated forms (words case-insensitive,
    numbers and modes with boundaries), in the instruction or an environment file."""
    if lit.kind == LiteralKind.ENCODING:  # the verifier reads a given file in its encoding
        for name, data in sorted(src.raw.items()):
            if in_encoding(data, lit.value):
                return f"environment/{name}", "encoding of a given file"
    if lit.kind in (LiteralKind.MODE, LiteralKind.OWNER):
        return _attribute_covered(lit, src)
    for form in stated_forms(lit):
        words = lit.kind in (LiteralKind.ORDER, LiteralKind.ENCODING)
        for t in src.texts:
            if words and lit.kind == LiteralKind.ORDER and t.where != "instruction.md":
                continue  # an order is asked for in the instruction, not found in data
            if _bounded(form, t.flat, re.IGNORECASE if words else 0):
                return t.where, lit.kind.value
    return None


# Words that make a number in a file a mode or an owner (not a value of the data).
_ATTRIBUTE_CONTEXT = {
    LiteralKind.MODE: r"(?:chmod|mode|perm\w*|install\s+(?:-\w+\s+)*-m|umask|mkdir\s+-m)",
    LiteralKind.OWNER: r"(?:chown|chgrp|own\w*|user\w*|group\w*|uid|gid)",
}


def _attribute_covered(lit: Literal, src: _Sources) -> tuple[str, str] | None:
    """A mode or owner: in the instruction any of its forms but a numeric id; in an
    environment file (data is full of numbers), and a numeric owner id anywhere, only after a
    word that makes it one (`chmod 640`, `mode: 0640`, `chown app:`, `uid 1000`), except a
    symbolic mode (`rw-r-----`), which is nothing else."""
    forms = stated_forms(lit)
    ctx = _ATTRIBUTE_CONTEXT[lit.kind]
    for t in src.texts:
        for k, form in enumerate(forms):
            symbolic = lit.kind == LiteralKind.MODE and k in (3, 4)
            decimal = lit.kind == LiteralKind.MODE and k == 5
            # an owner's id (`1`, `33`) is any number of the text (`1.` of a list) unless a
            # word makes it an owner, as in an environment file
            bare_id = lit.kind == LiteralKind.OWNER and form.isdigit()
            if t.where == "instruction.md" and not decimal and not bare_id or symbolic:
                if _bounded(form, t.flat):
                    return t.where, lit.kind.value
            rx = ctx + r"[^\n]{0,24}?(?<![\w.])" + re.escape(form) + r"(?![\w]|\.\d)"
            if re.search(rx, t.raw, re.IGNORECASE):
                return t.where, lit.kind.value
    return None


def _one(lit: Literal, src: _Sources) -> CoverageVerdict:
    v = lit.value
    if lit.kind in FORM_KINDS:
        hit = _form_covered(lit, src)
    elif lit.kind == LiteralKind.PATH:
        hit = _path_covered(v, src)
    elif lit.kind == LiteralKind.FORMAT:
        hit = _format_covered(lit, src)
    elif lit.kind == LiteralKind.NUMBER:
        where = _number_covered(v, src)
        hit = (where, "number") if where else None
    elif HOLE in v and (hit := _filled_covered(v, src, lit.ignore_case)):
        pass
    elif HOLE in v:  # an f-string: its constant parts must be stated
        parts = [p.strip() for p in v.split(HOLE) if len(re.sub(r"\W", "", p)) >= 2]
        hits = [h for p in parts if (h := _text_covered(p, src, lit.ignore_case))]
        hit = (hits[0][0] if hits else "format", "fragments") if len(hits) == len(parts) else None
    else:
        hit = _text_covered(v, src, lit.ignore_case)
    if hit:
        return CoverageVerdict(lit, True, hit[0], how=hit[1])
    plain = lit.kind not in (LiteralKind.NUMBER, LiteralKind.FORMAT) and lit.kind not in FORM_KINDS
    near = src.near(v) if plain else None
    return CoverageVerdict(lit, False, near=near)


def literal_coverage(
    literals: Iterable[Literal],
    instruction: str,
    environment: Mapping[str, bytes],
    workdir: str = "/app",
) -> list[CoverageVerdict]:
    """One verdict per literal, in order. A literal with alternatives is covered when any
    member of its group is (its verdict then names that member)."""
    src = _Sources(instruction, environment, workdir)
    verdicts = [_one(lit, src) for lit in literals]
    covered_groups = {
        v.literal.group: v for v in verdicts if v.covered and v.literal.group is not None
    }
    out = []
    for v in verdicts:
        g = v.literal.group
        if not v.covered and g is not None and g in covered_groups:
            other = covered_groups[g]
            where = f"alternative {other.literal.value!r} ({other.where})"
            v = CoverageVerdict(v.literal, True, where, v.near, "alternative")
        out.append(v)
    return out
