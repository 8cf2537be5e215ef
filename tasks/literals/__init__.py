"""Which literals a verifier asserts on, and whether the instruction and the initial
environment state them: exactly, case-sensitively.

A *literal* is a constant the verifier demands of the agent's work: a path it opens or tests,
a key it reads, a string, line, header or name it compares, a number it expects, a format
(regex) it matches. `asserted_literals` reads them from a verifier's files:

- Python tests, by AST: positive comparisons (`==`, `in`, `startswith`, `re.match`, unittest
  `assert*`) in asserts, returns and check calls, and in the condition of an `if` whose body
  fails (with the polarity flipped); negative comparisons (`!=`, `not in`) demand nothing and
  are skipped, as are comparisons that only steer the verifier's own loops. Keys subscripted
  anywhere, paths anywhere (except what the verifier writes itself). Names bound to constants,
  f-strings, `+`, `/` and `os.path.join` are folded.
- shell tests, by tokens: `[ -f P ]`, `[ "$x" = lit ]`, `-eq N`, `grep PATTERN`, jq filters,
  absolute paths;
- expected-output files of tests/ (those it diffs against, or named expected/answer/golden
  ... and read by its code): their lines, or their header, keys and values.

`literal_coverage` says, for each literal, where it is stated: the instruction, or a file of
the environment (build context, Dockerfile included). Matching is exact and case-sensitive,
with word boundaries and whitespace runs collapsed; numbers match numerically (and as number
words up to twenty); a literal with numbers inside also matches as a template (`total: N`);
a format matches an example or its literal fragments; a path matches absolutely, relative to
the working directory, as a stated directory plus a stated name, or as a file of the
environment. Alternatives (`x in ("a", "b")`) are covered when any one of them is.

API: `asserted_literals(files) -> [Literal]`, `literal_coverage(literals, instruction,
environment_files, workdir) -> [CoverageVerdict]`, `task_literal_coverage(task)` (both for a
`Task`, its setup steps included). `CONVENTION_KINDS` (paths, keys, headers) are never
computed by an agent: uncovered, they are hidden requirements whatever else is known.

Pure functions over bytes and text; nothing here runs anything. A NUMBER (or other answer)
that is not covered may still be a value the agent computes: the caller decides with other
evidence (the reference solution), see docs/audit.md.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tasks.literals.coverage import literal_coverage
from tasks.literals.model import (
    CODE_SUFFIXES,
    CONVENTION_KINDS,
    DATA_SUFFIXES,
    RUNNER,
    SHELL_PATH_RE,
    Collector,
    CoverageVerdict,
    Literal,
    LiteralKind,
    decode,
)
from tasks.literals.python import read_python
from tasks.literals.shell import expected_file_literals, shell_literals

if TYPE_CHECKING:
    from tasks.model import Task

__all__ = [
    "CONVENTION_KINDS",
    "CoverageVerdict",
    "Literal",
    "LiteralKind",
    "asserted_literals",
    "expected_output_files",
    "literal_coverage",
    "task_literal_coverage",
]


# A data file of tests/ holds what the output must be (not an input fixture) when the verifier
# diffs against it or its name says so.
EXPECTED_NAME = re.compile(r"expect|answer|golden|reference|correct|output|result|baseline", re.I)


def _is_code(name: str, text: str) -> bool:
    return name.endswith(CODE_SUFFIXES) or text.startswith("#!")


def _texts(verifier: Mapping[str, bytes]) -> dict[str, str]:
    return {
        n: t
        for n, b in sorted(verifier.items())
        if posixpath.basename(n) != RUNNER and (t := decode(b)) is not None
    }


def _expected(texts: dict[str, str], compared: set[str]) -> list[str]:
    code = "\n".join(t for n, t in texts.items() if _is_code(n, t))
    out = []
    for name, text in texts.items():
        base = posixpath.basename(name)
        if _is_code(name, text) or base == "test.sh":
            continue
        referenced = base in compared or re.search(rf"(?<![\w-]){re.escape(base)}\b", code)
        expected = base in compared or EXPECTED_NAME.search(base)
        if referenced and expected and (name.endswith(DATA_SUFFIXES) or "." not in base):
            out.append(name)
    return out


def expected_output_files(verifier: Mapping[str, bytes]) -> list[str]:
    """The data files of tests/ that hold what an output must be (see EXPECTED_NAME)."""
    texts = _texts(verifier)
    compared: set[str] = set()
    for name, text in texts.items():
        if not name.endswith(".py") and _is_code(name, text):
            compared |= shell_literals(name, text, Collector())
    return _expected(texts, compared)


def asserted_literals(verifier: Mapping[str, bytes]) -> list[Literal]:
    """Every literal the verifier's files assert on (see the module docstring), in file
    order. A Python file that does not parse contributes its paths only."""
    out = Collector()
    texts = _texts(verifier)
    compared: set[str] = set()
    for name, text in texts.items():
        if name.endswith(".py"):
            try:
                read_python(name, text, out)
            except SyntaxError:
                shell_literals(name, "\n".join(SHELL_PATH_RE.findall(text)), out)
        elif _is_code(name, text):
            compared |= shell_literals(name, text, out)
    for name in _expected(texts, compared):
        expected_file_literals(name, texts[name], out)
    return list(out.items.values())


def task_literal_coverage(task: Task) -> list[CoverageVerdict]:
    """`literal_coverage` of a task's verifier against its instruction and environment (its
    files, and its setup steps as the Dockerfile they compile to)."""
    from tasks.environment import render_dockerfile

    env = dict(task.environment.files)
    if task.environment.setup or "Dockerfile" not in env:
        env["Dockerfile (rendered)"] = render_dockerfile(task).encode()
    lits = asserted_literals(task.verifier)
    return literal_coverage(lits, task.instruction, env, task.environment.workdir)
