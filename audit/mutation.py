"""Mutation testing of a verifier, two ways:

- the solution's *steps*: remove each top-level command of solve.sh (a line with its
  continuations, a heredoc with its body, a whole compound block) or a heredoc body line,
  run the mutant as the agent, and count the mutants the verifier kills;
- the solution's *outputs*: after the reference solution ran, delete, empty, truncate,
  corrupt or re-pair one output the verifier names (`mutate_output`), whatever the
  solution's length.

Mutants are pure text/bytes; the sandbox runs are `run_mutants` and the judge's output-mutant
trials (`audit.trials.OutputMutantAgent`). A verifier that accepts a corrupted output, or
lets most step mutants pass, does not validate what the solution does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from audit.hashes import hash_files
from audit.perturbation import ROT13
from sandbox.base import Sandbox
from sandbox.trial import AgentOutcome, run_solution
from tasks.model import Task
from tasks.results import TrialResult

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_OPENERS = re.compile(r"(?<![\w-])(then|do)(?![\w-])|\bcase\b.*\bin\b|\{\s*$")
_CLOSERS = re.compile(r"(?<![\w-])(fi|done|esac|elif)(?![\w-])|^\s*\}")
# Lines whose deletion changes nothing a verifier could see (equivalent mutants), including
# a bare `cd`: later steps that depend on it fail loudly, and the working directory is
# usually where the solution starts anyway.
_INERT = re.compile(r"^\s*(set\s+[-+]|#|$|shopt\s|trap\s|export\s+\w+=\S*$|cd\s+\S+\s*$)")
# Self-checks and guards at the end of a solution: deleting them gives an equivalent mutant.
_SELF_CHECK = re.compile(
    r"^\s*(\./\S*(check|test)\S*|make\s+(-\S+\s+)*(test|check)\b|"
    r"python3?\s+(-m\s+unittest|\S*(validate|check|run_tests)\S*)|sha256sum\s+-c|test\s|\[\s)"
)
_PIPE_CHECK = re.compile(r"\|\s*(diff|cmp)\s")  # `... | diff - expected`: a self-check too


@dataclass(frozen=True)
class Step:
    """Lines [start, end) of the script; `kind` is 'command' or 'heredoc-line'."""

    start: int
    end: int
    text: str
    kind: str = "command"


def _depth_change(line: str) -> int:
    """Net compound-block nesting a line opens (then/do/case-in/{) minus closes (fi/done/...).

    `elif` counts as a close because its `then` opens again."""
    code = re.sub(r"'[^']*'|\"[^\"]*\"", "''", line.split(" #", 1)[0])
    if code.lstrip().startswith("#"):
        return 0
    return len(_OPENERS.findall(code)) - len(_CLOSERS.findall(code))


def _quote_state(line: str, state: str) -> str:
    """The quote ('' none, "'" or '"') still open after `line`, starting in `state`."""
    i = 0
    while i < len(line):
        c = line[i]
        if state == "'":
            state = "" if c == "'" else state
        elif c == "\\":
            i += 1
        elif state == '"':
            state = "" if c == '"' else state
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        elif c in "'\"":
            state = c
        i += 1
    return state


def solution_steps(script: str) -> tuple[list[Step], list[Step]]:
    """(top-level steps, heredoc body lines) of a bash script; inert lines are not steps."""
    lines = script.splitlines()
    steps: list[Step] = []
    heredoc: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i == 0 and line.startswith("#!") or _INERT.match(line):
            i += 1
            continue
        start, depth, quoted = i, 0, ""
        while True:
            line = lines[i]
            if not quoted:
                depth += _depth_change(line)
            quoted = _quote_state(line, quoted)
            m = _HEREDOC.search(line.split("#", 1)[0])
            i += 1
            if m:
                delim = m.group(2)
                while i < len(lines) and lines[i].strip() != delim:
                    body = lines[i]
                    if body.strip() and not body.lstrip().startswith("#"):
                        heredoc.append(Step(i, i + 1, body, "heredoc-line"))
                    i += 1
                i += 1  # the delimiter line
            cont = line.rstrip().endswith("\\") or line.rstrip().endswith(("&&", "||", "|"))
            if i >= len(lines) or (depth <= 0 and not cont and not quoted):
                break
        text = "\n".join(lines[start:i])
        if not (_SELF_CHECK.match(text) or _PIPE_CHECK.search(text)):
            steps.append(Step(start, i, text))
    return steps, heredoc


@dataclass(frozen=True)
class Mutant:
    index: int
    operator: str  # delete-step | delete-heredoc-line
    description: str
    script: str


def _spread(items: list, n: int) -> list:
    """`n` items evenly spaced over `items` (all of them when there are few)."""
    if n >= len(items):
        return list(items)
    if n <= 0:
        return []
    return [items[round(k * (len(items) - 1) / max(1, n - 1))] for k in range(n)]


def make_mutants(script: str, cap: int = 6) -> list[Mutant]:
    """Up to `cap` mutants: step deletions first, heredoc-line deletions to fill the cap."""
    if cap < 0:
        raise ValueError(f"cap must be >= 0, got {cap!r}")
    lines = script.splitlines()
    steps, heredoc = solution_steps(script)
    chosen = _spread(steps, cap) + _spread(heredoc, max(0, cap - len(steps)))
    out = []
    for k, st in enumerate(chosen):
        body = lines[: st.start] + [":"] * (st.end - st.start) + lines[st.end :]
        if st.kind == "heredoc-line":
            body = lines[: st.start] + lines[st.end :]
        op = "delete-step" if st.kind == "command" else "delete-heredoc-line"
        first = st.text.strip().splitlines()[0][:80] if st.text.strip() else ""
        out.append(Mutant(k, op, f"line {st.start + 1}: {first}", "\n".join(body) + "\n"))
    return out


class MutantAgent:
    """Runs a mutated solve.sh (with the solution's other files) exactly as the oracle would,
    then hashes the `watch` paths (the oracle's effects), so an equivalent mutant (one that
    leaves every effect as the oracle did) can be told from a survivor."""

    def __init__(
        self, mutant: Mutant, timeout_s: float | None = None, watch: list[str] | None = None
    ) -> None:
        self.mutant = mutant
        self.timeout_s = timeout_s
        self.watch = watch or []
        self.name = f"mutant-{mutant.index}"
        self.hashes: dict[str, str | None] = {}

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        import time

        if self.timeout_s is not None:  # a mutant may loop forever (a deleted `k += 1`)
            deadline = min(deadline, time.monotonic() + self.timeout_s)
        files = dict(task.solution or {}) | {"solve.sh": self.mutant.script.encode()}
        outcome = run_solution(sandbox, task, files, deadline)
        self.hashes = hash_files(sandbox, self.watch)
        return outcome


@dataclass
class MutationReport:
    total: int = 0
    killed: int = 0
    equivalent: int = 0
    """Survivors whose effects equal the oracle's: no verifier could tell them apart."""
    survivors: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def kill_rate(self) -> float | None:
        return self.killed / self.total if self.total else None


Runner = Callable[..., TrialResult]


def run_mutants(
    task: Task,
    mutants: list[Mutant],
    runner: Runner,
    workers: int = 2,
    timeout_s: float | None = None,
    baseline: dict[str, str | None] | None = None,
) -> MutationReport:
    """Run each mutant as the agent; a mutant is killed when the verifier does not resolve it.

    `timeout_s` bounds each mutant's agent phase (a timed-out mutant is verified as it is).
    `baseline` (path -> hash of the oracle's effects): a surviving mutant that leaves every
    one of them as the oracle did is equivalent (deleting a log line, a scratch copy) and is
    not counted. Trials that say nothing about the task (infrastructure failures: sandbox,
    environment, verifier never ran) are reported as errors and not counted.
    """
    watch = sorted(baseline or {})
    agents = [MutantAgent(m, timeout_s, watch) for m in mutants]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda a: runner(task, a), agents))
    rep = MutationReport()
    for m, a, r in zip(mutants, agents, results, strict=True):
        if not r.rewardable:
            rep.errors.append(f"{m.description}: {r.failure_mode.value}: {r.failure_detail[:200]}")
            continue
        if r.resolved and baseline is not None and a.hashes == baseline:
            rep.equivalent += 1
            continue
        rep.total += 1
        if r.resolved:
            rep.survivors.append(f"{m.operator} {m.description}")
        else:
            rep.killed += 1
    return rep


# ---- output mutants ----------------------------------------------------------------------

OUTPUT_OPS = ("delete", "empty", "truncate", "corrupt", "repair")
_DIGITS = str.maketrans("0123456789", "1234567890")
_SEPARATOR = re.compile(r"[:=,\t|]")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_LETTER = re.compile(r"[A-Za-z]")


def _repair(text: str) -> str:
    """Each value paired with another name: the first number of every line that also has a
    name (a letter outside the number: `"food": 12.5,`, `rent,800`) moves to the next such
    line, the last one's to the first. Every line keeps its form and the numbers their
    multiset (sums, counts, types, key sets unchanged): a verifier that checks only those
    accepts an answer that pairs no name with its own value."""
    lines = text.splitlines(keepends=True)
    named = [
        (i, m)
        for i, ln in enumerate(lines)
        if (m := _NUMBER.search(ln)) and _LETTER.search(_NUMBER.sub("", ln))
    ]
    if len(named) < 2:
        return text
    values = [m.group() for _, m in named]
    for (i, m), v in zip(named, values[1:] + values[:1], strict=True):
        lines[i] = lines[i][: m.start()] + v + lines[i][m.end() :]
    return "".join(lines)


def _corrupt_line(line: str) -> str:
    """Every value of a line changed, its structure kept: digits rotated; a line without
    digits has its letters after the first separator (`key: value`, `a,b`) rotated, or all
    of them when there is no separator."""
    if any(c.isdigit() for c in line):
        return line.translate(_DIGITS)
    m = _SEPARATOR.search(line)
    if m is None:
        return line.translate(ROT13)
    return line[: m.end()] + line[m.end() :].translate(ROT13)


def mutate_output(data: bytes, op: str) -> bytes:
    """One output mutant (pure): `empty`; `truncate` (the first half of its lines, or of
    its bytes, at least one fewer, when it has one line; trailing whitespace not counted);
    `corrupt` (every line's values changed, see `_corrupt_line`; binary data has its middle
    third inverted); `repair` (values paired with other names, see `_repair`; the data
    unchanged, so no mutant, when there are not two such lines). `delete` is done in the
    sandbox."""
    if op not in OUTPUT_OPS or op == "delete":
        raise ValueError(f"unknown output mutation {op!r} (choose from {OUTPUT_OPS[1:]})")
    if op == "empty":
        return b""
    if op == "repair":
        try:
            return _repair(data.decode("utf-8")).encode()
        except UnicodeDecodeError:
            return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if op == "truncate":  # trailing whitespace is not content: "6\n" cut to "6" is no mutant
        body = data.rstrip()
        if text is not None:
            lines = text.rstrip().splitlines(keepends=True)
            if len(lines) >= 2:
                return "".join(lines[: (len(lines) + 1) // 2]).encode()
        return body[: min((len(body) + 1) // 2, len(body) - 1)]
    if text is None or "\0" in text:
        a, b = len(data) // 3, max(len(data) // 3 + 1, 2 * len(data) // 3)
        return data[:a] + bytes(x ^ 0xFF for x in data[a:b]) + data[b:]
    return "".join(
        _corrupt_line(ln[:-1]) + "\n" if ln.endswith("\n") else _corrupt_line(ln)
        for ln in text.splitlines(keepends=True)
    ).encode()
