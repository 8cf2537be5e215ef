"""Mutation testing of a verifier: remove or alter each step of the reference solution, run the
mutant as the agent, and report the share of mutants the verifier kills.

A step is a top-level command of solve.sh: a line with its backslash continuations, a heredoc
with its body, or a whole compound block (if/for/while/case/function). Mutants are pure text
(`make_mutants`); `run_mutants` runs them in sandboxes, bounded (`cap`) and in parallel. A
verifier that lets most mutants pass does not validate what the solution does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sandbox.base import Sandbox
from sandbox.trial import SOLUTION_DIR, AgentOutcome
from tasks.model import Task
from tasks.results import FailureMode, TrialResult

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_OPENERS = re.compile(r"(?<![\w-])(then|do)(?![\w-])|\bcase\b.*\bin\b|\{\s*$")
_CLOSERS = re.compile(r"(?<![\w-])(fi|done|esac|elif)(?![\w-])|^\s*\}")
_INERT = re.compile(r"^\s*(set\s+[-+]|#|$|shopt\s|trap\s|export\s+\w+=\S*$)")
# Self-checks and guards at the end of a solution: deleting them gives an equivalent mutant.
_SELF_CHECK = re.compile(
    r"^\s*(\./\S*(check|test)\S*|make\s+(-\S+\s+)*(test|check)\b|"
    r"python3?\s+(-m\s+unittest|\S*(validate|check|run_tests)\S*)|sha256sum\s+-c|test\s|\[\s)"
)


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
        if not _SELF_CHECK.match(text):
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
    """Runs a mutated solve.sh (with the solution's other files) exactly as the oracle would."""

    def __init__(self, mutant: Mutant, timeout_s: float | None = None) -> None:
        self.mutant = mutant
        self.timeout_s = timeout_s
        self.name = f"mutant-{mutant.index}"

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        import time

        if self.timeout_s is not None:  # a mutant may loop forever (a deleted `k += 1`)
            deadline = min(deadline, time.monotonic() + self.timeout_s)
        files = dict(task.solution or {}) | {"solve.sh": self.mutant.script.encode()}
        sandbox.upload(files, SOLUTION_DIR)
        r = sandbox.exec(
            f"bash {SOLUTION_DIR}/solve.sh",
            timeout_s=max(0.1, deadline - time.monotonic()),
            cwd=task.environment.workdir,
        )
        return AgentOutcome.from_exec(r)


@dataclass
class MutationReport:
    total: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def kill_rate(self) -> float | None:
        return self.killed / self.total if self.total else None


Runner = Callable[..., TrialResult]

_NOT_COUNTED = (FailureMode.SANDBOX_ERROR, FailureMode.ENVIRONMENT_ERROR)


def run_mutants(
    task: Task,
    mutants: list[Mutant],
    runner: Runner,
    workers: int = 2,
    timeout_s: float | None = None,
) -> MutationReport:
    """Run each mutant as the agent; a mutant is killed when the verifier does not resolve it.

    `timeout_s` bounds each mutant's agent phase (a timed-out mutant is verified as it is).
    Trials that fail for the sandbox's own reasons are reported as errors and not counted.
    """
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda m: runner(task, MutantAgent(m, timeout_s)), mutants))
    rep = MutationReport()
    for m, r in zip(mutants, results, strict=True):
        if r.failure_mode in _NOT_COUNTED:
            rep.errors.append(f"{m.description}: {r.failure_mode.value}: {r.failure_detail[:200]}")
            continue
        rep.total += 1
        if r.resolved:
            rep.survivors.append(f"{m.operator} {m.description}")
        else:
            rep.killed += 1
    return rep
