"""Difficulty beyond line counts: distinct tools, files touched, dependency depth.

- `distinct_tools`: the programs the reference solution invokes (first word of every simple
  command of solve.sh, through pipes, `&&`, `;`, `$(...)` and `xargs`/`env` prefixes; heredoc
  bodies belong to the command that reads them; shell keywords and builtins are not tools, and
  neither are the task's own scripts, named by path inside the working directory).
- `files_touched`: files the reference solution creates or changes under the workdir (observed
  by the profiling oracle, not read from the script).
- `dependency_depth`: the longest chain of stages each consuming what an earlier one produced
  (`synthesis.instruction.dependency_depth`); a seed is depth 1.

The reference agent's pass rate, the fourth measure, comes from trials (`synthesis.reference`).
"""

from __future__ import annotations

import posixpath
import re
import shlex

from synthesis.profile import TaskProfile

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Shell keywords and builtins: control flow and shell state, not tools.
NOT_TOOLS = frozenset(
    "if then else elif fi for while until do done case esac in function select time ! [[ ]] "
    "cd export set unset local read source . : true false return exit shift declare typeset "
    "readonly eval exec trap wait umask alias pushd popd shopt let test [ echo printf builtin "
    "command type hash continue break".split()
)
# Prefixes that run the next word as the command.
WRAPPERS = frozenset({"sudo", "env", "nice", "nohup", "timeout", "xargs", "exec", "command"})
# Keywords after which the next word is a command (`if grep -q ...`, `! test ...`).
LEADING = frozenset({"if", "elif", "while", "until", "then", "do", "else", "!", "time", "{"})


def _closed(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
        return True
    except ValueError:
        return False


def _code_lines(script: str) -> list[str]:
    """Logical lines of `script`: heredoc bodies dropped, comment lines skipped, backslash
    continuations and multi-line quoted strings joined."""
    out: list[str] = []
    lines = script.splitlines()
    i = 0
    buf = ""
    while i < len(lines):
        line = lines[i]
        i += 1
        if not buf and line.lstrip().startswith("#"):
            continue
        m = _HEREDOC.search(line)
        if m:
            while i < len(lines) and lines[i].strip() != m.group(2):
                i += 1
            i += 1
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if _closed(buf) or i >= len(lines):
            out.append(buf)
            buf = ""
        else:
            buf += "\n"
    return out


_OPERATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", "|&", ";;", "{", "}"})
_SUBST = re.compile(r"\$\(|`")
_REDIRECT = re.compile(r"\d*[<>]&\d*-?|&>>?")


def _commands(line: str) -> list[list[str]]:
    """Simple commands of one line: words between control operators (quotes respected;
    `$(...)` and backticks open a command of their own, inside double quotes too)."""
    lexer = shlex.shlex(
        _SUBST.sub(" ( ", _REDIRECT.sub(" ", line)), posix=True, punctuation_chars="|&;()"
    )
    lexer.whitespace_split = True
    lexer.commenters = "#"
    out: list[list[str]] = [[]]
    try:
        for tok in lexer:
            if tok in _OPERATORS or set(tok) <= set("|&;()"):
                out.append([])
            else:
                out[-1].append(tok)
    except ValueError:  # unbalanced quotes: take what was read
        pass
    return [c for c in out if c]


def _tool(words: list[str]) -> str | None:
    skip = WRAPPERS | LEADING
    while words and (_ASSIGN.match(words[0]) or words[0] in skip or words[0].startswith("-")):
        words = words[1:]
    return words[0] if words else None


def distinct_tools(script: str, workdir: str = "/app") -> list[str]:
    """Sorted names of the programs `script` invokes (see the module docstring)."""
    tools: set[str] = set()
    wd = workdir.rstrip("/") + "/"
    for line in _code_lines(script):
        for words in _commands(_HEREDOC.sub(" ", line)):
            word = _tool(words)
            if not word or word in NOT_TOOLS or not re.match(r"^[\w./+-]+$", word):
                continue
            if "/" in word:
                if word.startswith(wd) or not word.startswith(("/usr/", "/bin/", "/sbin/")):
                    continue
                word = posixpath.basename(word)
            tools.add(word)
    return sorted(tools)


def files_touched(profile: TaskProfile) -> int:
    """Files the reference solution created or changed under the workdir."""
    return len(profile.outputs)
