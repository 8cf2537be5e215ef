"""Read a Dockerfile into instructions, and Docker's word expansion (quotes, `$VAR`, `${VAR:-x}`).

Pure: no file system, no network. `parse` handles the parser directive `# escape=`, comments,
line continuations, heredocs (`RUN <<EOF`, `RUN cat > f <<'EOF'`, `COPY <<EOF /dest`), the
shell and JSON (exec) forms and `--flag=value` options; `expand`/`expand_words` do the
substitution Docker applies to ENV, ARG, FROM, COPY, ADD, WORKDIR, USER, LABEL, EXPOSE,
VOLUME and STOPSIGNAL (never to RUN, CMD or ENTRYPOINT: the shell expands those at run time).
What each instruction means for an image is `sandbox.stages`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

KEYWORDS = frozenset(
    {
        "FROM", "RUN", "CMD", "ENTRYPOINT", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER",
        "SHELL", "LABEL", "EXPOSE", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "MAINTAINER",
        "ONBUILD",
    }
)  # fmt: skip
_HEREDOC_KEYWORDS = frozenset({"RUN", "COPY", "ADD"})
# `<<EOF`, `<<-EOF`, `<<'EOF'`, `<< "EOF"` (not `<<<`, the here-string)
HEREDOC = re.compile(r"(?<!<)<<(-?)[ \t]*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_DIRECTIVE = re.compile(r"^#\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(.*?)\s*$")


class DockerfileError(ValueError):
    """A Dockerfile the builder cannot take: names the file, the line and the instruction."""

    def __init__(self, path: str, line: int, instruction: str, message: str) -> None:
        self.path, self.line, self.instruction, self.message = path, line, instruction, message
        where = f"{path}:{line}" + (f": {instruction}" if instruction else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Heredoc:
    name: str
    body: str  # lines up to (not including) the terminator, each ending in "\n"
    expand: bool  # unquoted delimiter: the body is subject to expansion


@dataclass(frozen=True)
class Instruction:
    """One instruction as written. `args` is the text after the keyword and the flags (line
    continuations joined); `exec_form` is the parsed JSON array when the instruction used
    one."""

    keyword: str
    args: str
    line: int
    flags: dict[str, str] = field(default_factory=dict)
    exec_form: tuple[str, ...] | None = None
    heredocs: tuple[Heredoc, ...] = ()
    original: str = ""


@dataclass(frozen=True)
class Dockerfile:
    instructions: tuple[Instruction, ...]
    escape: str = "\\"


def parse(text: str, path: str = "Dockerfile") -> Dockerfile:
    """All instructions of a Dockerfile, in order. Raises DockerfileError naming the line."""
    lines = text.splitlines()
    escape = "\\"
    i = 0
    # Parser directives: leading `# key=value` comments, before anything else.
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i].strip())
        if not m:
            break
        if m.group(1).lower() == "escape":
            if m.group(2) not in ("\\", "`"):
                raise DockerfileError(path, i + 1, "", f"invalid escape {m.group(2)!r}")
            escape = m.group(2)
        i += 1
    out: list[Instruction] = []
    continuation = re.compile(re.escape(escape) + r"[ \t]*$")
    while i < len(lines):
        raw = lines[i]
        start = i
        i += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        logical = raw.lstrip()
        while continuation.search(logical) and i < len(lines):
            logical = continuation.sub("", logical)
            # Comments and blank lines inside a continued instruction vanish.
            while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
                i += 1
            if i < len(lines):
                logical += lines[i]
                i += 1
        logical = continuation.sub("", logical)
        keyword, _, rest = logical.partition(" ") if " " in logical else (logical, "", "")
        if "\t" in keyword:
            keyword, _, more = keyword.partition("\t")
            rest = more + " " + rest
        keyword = keyword.upper()
        if keyword not in KEYWORDS:
            raise DockerfileError(path, start + 1, keyword, "unknown instruction")
        rest = rest.strip()
        heredocs: list[Heredoc] = []
        if keyword in _HEREDOC_KEYWORDS:
            for m in HEREDOC.finditer(rest):
                strip_tabs, quote, name = m.group(1) == "-", m.group(2), m.group(3)
                body: list[str] = []
                while True:
                    if i >= len(lines):
                        raise DockerfileError(
                            path, start + 1, keyword, f"heredoc {name!r} never terminated"
                        )
                    line = lines[i]
                    i += 1
                    if strip_tabs:
                        line = line.lstrip("\t")
                    if line == name:
                        break
                    body.append(line + "\n")
                heredocs.append(Heredoc(name, "".join(body), expand=not quote))
        flags, rest = _split_flags(rest, path, start + 1, keyword)
        exec_form = _json_array(rest) if keyword in ("RUN", "CMD", "ENTRYPOINT", "SHELL") else None
        if keyword in ("COPY", "ADD", "VOLUME") and not heredocs:
            exec_form = _json_array(rest)
        out.append(
            Instruction(keyword, rest, start + 1, flags, exec_form, tuple(heredocs), logical)
        )
    return Dockerfile(tuple(out), escape)


def _split_flags(rest: str, path: str, line: int, keyword: str) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        word, _, remainder = rest.partition(" ")
        name, eq, value = word[2:].partition("=")
        if not name:
            raise DockerfileError(path, line, keyword, f"malformed flag {word!r}")
        flags[name.lower()] = value if eq else "true"
        rest = remainder.lstrip()
    return flags, rest


def _json_array(rest: str) -> tuple[str, ...] | None:
    if not rest.startswith("["):
        return None
    try:
        value = json.loads(rest)
    except json.JSONDecodeError:
        return None  # Docker falls back to the shell form
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(value)


# -- word expansion (Docker's shell lexer, the subset Dockerfiles use) ----------------------
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ExpansionError(ValueError):
    """`${VAR:?message}` on an unset variable, or a malformed `${...}`."""


def expand(word: str, env: Mapping[str, str], escape: str = "\\") -> str:
    """One word with quotes removed, escapes processed and variables substituted."""
    words = _lex(word, env, escape, split=False)
    return words[0] if words else ""


def expand_words(text: str, env: Mapping[str, str], escape: str = "\\") -> list[str]:
    """Split on unquoted whitespace, then expand each word (COPY/ADD sources, EXPOSE ...)."""
    return _lex(text, env, escape, split=True)


def _lex(text: str, env: Mapping[str, str], escape: str, *, split: bool) -> list[str]:
    words: list[str] = []
    cur: list[str] = []
    started = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if split and c in " \t\n":
            if started:
                words.append("".join(cur))
                cur, started = [], False
            i += 1
            continue
        started = True
        if c == escape and i + 1 < n:
            cur.append(text[i + 1])
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            cur.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == escape and i + 1 < n and text[i + 1] in ('"', escape, "$"):
                    cur.append(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    value, i = _variable(text, i, env, escape)
                    cur.append(value)
                else:
                    cur.append(text[i])
                    i += 1
            i += 1
        elif c == "$":
            value, i = _variable(text, i, env, escape)
            cur.append(value)
        else:
            cur.append(c)
            i += 1
    if started:
        words.append("".join(cur))
    return words


def _variable(text: str, i: int, env: Mapping[str, str], escape: str) -> tuple[str, int]:
    """Expand the `$...` starting at text[i]; returns (value, index after it)."""
    if i + 1 < len(text) and text[i + 1] == "{":
        end = _matching_brace(text, i + 2)
        if end < 0:
            raise ExpansionError(f"missing '}}' in {text[i:]!r}")
        inner = text[i + 2 : end]
        m = _NAME.match(inner)
        if not m:
            raise ExpansionError(f"bad substitution ${{{inner}}}")
        name, op = m.group(0), inner[m.end() :]
        value = env.get(name)
        if not op:
            return value or "", end + 1
        for prefix in (":-", ":+", ":?", "-", "+", "?"):
            if op.startswith(prefix):
                word = expand(op[len(prefix) :], env, escape)
                unset = value is None or (prefix.startswith(":") and value == "")
                if prefix.endswith("-"):
                    return (word if unset else value or ""), end + 1
                if prefix.endswith("+"):
                    return ("" if unset else word), end + 1
                if unset:
                    raise ExpansionError(f"{name}: {word or 'parameter not set'}")
                return value or "", end + 1
        raise ExpansionError(f"unsupported substitution ${{{inner}}}")
    m = _NAME.match(text, i + 1)
    if not m:
        return "$", i + 1
    return env.get(m.group(0), ""), m.end()


def _matching_brace(text: str, i: int) -> int:
    depth = 1
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def final_workdir(text: str) -> str | None:
    """The last stage's WORKDIR as written (ENV/ARG defaults substituted), or None when the
    Dockerfile sets none (the base image's then) or cannot be read. A static reading for
    task metadata; the built image's config is the authority (sandbox.stages)."""
    try:
        instructions = parse(text).instructions
    except DockerfileError:
        return None
    stages: list[tuple[str | None, list[Instruction]]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.args.split()
            name = words[2].lower() if len(words) == 3 and words[1].lower() == "as" else None
            stages.append((name, [ins]))
        elif stages:
            stages[-1][1].append(ins)
    chain: list[Instruction] = []
    index = len(stages) - 1
    while index >= 0:
        chain = stages[index][1][1:] + chain
        parent = stages[index][1][0].args.split()[0].lower()
        index = next((i for i, (n, _) in enumerate(stages[:index]) if n == parent), -1)
    env: dict[str, str] = {}
    workdir: str | None = None
    try:
        for ins in chain:
            if ins.keyword == "ARG":
                for word in ins.args.split():
                    name, _, value = word.partition("=")
                    env.setdefault(name, expand(value, env))
            elif ins.keyword == "ENV" and "=" in ins.args.split(None, 1)[0]:
                for word in expand_words(ins.args, env):
                    name, _, value = word.partition("=")
                    env[name] = value
            elif ins.keyword == "WORKDIR":
                path = expand(ins.args, env)
                base = workdir or "/"
                workdir = "/" + posixpath.normpath(posixpath.join(base, path)).lstrip("/")
    except ExpansionError:
        return None
    return workdir
