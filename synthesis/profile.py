"""Task profiles: which files a task's reference solution produces, observed in a sandbox.

Operators extend a task's workflow around what its solution actually writes, so before a task
can seed a round it is profiled: the oracle runs (as it does in validation) between two
listings of the working directory, and every regular file that is new or changed afterwards is
an `OutputFile`. The profile of a candidate comes free with its first validation oracle run
(`ProfilingOracle` behaves exactly like `sandbox.OracleAgent` plus read-only listings).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox import AgentOutcome, Sandbox, run_trial
from sandbox.trial import run_solution
from tasks.model import Task
from tasks.results import TrialResult

# Directories whose contents are tool state, not results (never offered to operators).
SKIP_DIRS = (".git", "__pycache__", "node_modules", ".venv", ".pytest_cache", ".mypy_cache")
# Suffixes of files that are build intermediates or live databases (content unstable).
SKIP_SUFFIXES = (".o", ".a", ".so", ".pyc", ".db", ".sqlite", ".sqlite3", ".lock", ".swp")
# Outputs operators may name in instructions and shell commands without quoting.
SAFE_PATH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
MAX_OUTPUT_BYTES = 1_000_000
SNIFF_BYTES = 65_536
SAMPLE_CHARS = 4096
"""Characters of a text output kept in its profile (`OutputFile.sample`), cut at a line
end: what operators read to build work on the output's actual columns, keys and values."""

OutputKind = Literal["csv", "json", "text", "binary"]

_PRUNE = "find . \\( " + " -o ".join(f"-name {d}" for d in SKIP_DIRS) + " \\) -prune -o "
# One exec: modes and sizes, a separator, then digests (one sha256sum for many files), and
# optionally the git work trees (`.git` directories) under the workdir.
_LISTING = (
    "cd {wd} 2>/dev/null || exit 0; "
    + _PRUNE
    + "-type f -size -{kb}k -printf '%m %s %p\\n'; echo '@@digests'; "
    + _PRUNE
    + "-type f -size -{kb}k -print0 | xargs -0 -r sha256sum; echo '@@repos'; {repos}"
)
_REPOS = "find . -name .git -prune -print"


class OutputFile(BaseModel):
    """One file the reference solution created or changed under the working directory."""

    model_config = ConfigDict(extra="forbid")

    path: str  # absolute path inside the sandbox
    rel: str  # path relative to the working directory
    size: int = Field(ge=0)
    mode: int = Field(ge=0)
    sha256: str
    created: bool  # False: an existing file the solution modified
    kind: OutputKind
    lines: int | None = None  # text kinds only
    header: str | None = None  # first line of a text file (<= 200 chars)
    columns: int | None = None  # csv only: fields in the header
    in_repo: bool = False  # inside a git work tree (mode changes would dirty it)
    # The first SAMPLE_CHARS of a text output (cut at a line end); `complete`: all of it.
    # None in profiles recorded before samples were kept (operators that read the content
    # then find the output ineligible).
    sample: str | None = None
    complete: bool = False


class TaskProfile(BaseModel):
    """What a task's oracle run produced. `ok` is False when the oracle did not pass."""

    model_config = ConfigDict(extra="forbid")

    task_hash: str
    workdir: str
    ok: bool
    detail: str = ""
    outputs: list[OutputFile] = Field(default_factory=list)
    # Seconds each assertion took in the profiled oracle run (slow checks are never guards).
    assertion_s: dict[str, float] = Field(default_factory=dict)
    assertions: int | None = None  # assertions the verifier reports
    nop_passed: int | None = None  # of those, how many a nop agent passes (free reward)

    @property
    def nop_share(self) -> float | None:
        if self.nop_passed is None or not self.assertions:
            return None
        return self.nop_passed / self.assertions

    def eligible(self, *kinds: OutputKind, max_bytes: int = MAX_OUTPUT_BYTES) -> list[OutputFile]:
        """Outputs operators may build on: safe names, not tool state, not too large."""
        out = []
        for f in self.outputs:
            parts = f.rel.split("/")
            if any(p in SKIP_DIRS for p in parts) or f.rel.endswith(SKIP_SUFFIXES):
                continue
            if not SAFE_PATH.match(f.rel) or f.size > max_bytes or f.size == 0:
                continue
            if kinds and f.kind not in kinds:
                continue
            out.append(f)
        return sorted(out, key=lambda f: f.rel)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> TaskProfile:
        return cls.model_validate_json(text)


def parse_listing(text: str) -> tuple[dict[str, tuple[int, int, str]], list[str]]:
    """The output of `_LISTING` -> ({rel: (mode, size, sha256)}, git work-tree roots)."""
    stats, _, rest = text.partition("@@digests\n")
    digests, _, repos = rest.partition("@@repos\n")
    sha: dict[str, str] = {}
    for line in digests.splitlines():
        digest, _, name = line.partition("  ")
        if name.startswith("./") and len(digest) == 64:
            sha[name[2:]] = digest
    out: dict[str, tuple[int, int, str]] = {}
    for line in stats.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or not parts[2].startswith("./") or parts[2][2:] not in sha:
            continue
        mode, size, name = parts
        out[name[2:]] = (int(mode, 8), int(size), sha[name[2:]])
    roots = sorted(p[2:-5].rstrip("/") for p in repos.split() if p.endswith("/.git"))
    return out, roots


def sample_of(data: bytes, kind: OutputKind) -> tuple[str | None, bool]:
    """(the first SAMPLE_CHARS of a text output, cut at its last full line; whether that is
    the whole file). Binary outputs have none."""
    if kind == "binary":
        return None, False
    text = data.decode("utf-8", "replace")
    if len(text) <= SAMPLE_CHARS:
        return text, True
    cut = text[:SAMPLE_CHARS]
    end = cut.rfind("\n")
    return (cut[: end + 1] if end >= 0 else cut), False


def sniff(data: bytes, rel: str) -> tuple[OutputKind, int | None, str | None, int | None]:
    """(kind, lines, header, csv columns) of a file's first bytes."""
    if b"\0" in data[:SNIFF_BYTES]:
        return "binary", None, None, None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None, None, None
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    header = text.split("\n", 1)[0][:200]
    if rel.endswith(".json"):
        try:
            json.loads(text)
            return "json", lines, header, None
        except ValueError:
            pass
    if rel.endswith(".csv") and "," in header and "\r" not in text and '"' not in header:
        return "csv", lines, header, header.count(",") + 1
    return "text", lines, header, None


class ProfilingOracle:
    """The oracle agent (uploads solution/, runs solve.sh) plus a listing before and after.

    After `run`, `before`/`after` hold {rel: (mode, size, sha256)} and `sniffed` the first
    bytes of every new or changed small file. Before the solution runs, `probe_paths` are
    tested for existence and `probe_strings` searched for in the working directory's files;
    `present` holds those found (what the environment offers before the agent starts). Listings
    and probes are read-only, so the trial is the same as a plain oracle trial.
    """

    name = "oracle"

    def __init__(self, probe_paths: Iterable[str] = (), probe_strings: Iterable[str] = ()) -> None:
        self.probe_paths = list(dict.fromkeys(probe_paths))
        self.probe_strings = list(dict.fromkeys(probe_strings))
        self.present: set[str] = set()
        self.before: dict[str, tuple[int, int, str]] = {}
        self.after: dict[str, tuple[int, int, str]] = {}
        self.sniffed: dict[str, bytes] = {}
        self.outcome: AgentOutcome | None = None
        self.repos: list[str] = []  # work-tree roots (relative) of git repos under the workdir

    def _listing(
        self, sandbox: Sandbox, workdir: str, repos: bool = False
    ) -> tuple[dict[str, tuple[int, int, str]], list[str]]:
        kb = MAX_OUTPUT_BYTES // 1024 * 4
        cmd = _LISTING.format(wd=workdir, kb=kb, repos=_REPOS if repos else "true")
        r = sandbox.exec(cmd, timeout_s=60, cwd="/")
        return parse_listing(r.stdout)

    def _probe(self, sandbox: Sandbox, workdir: str) -> None:
        lines = [f"[ -e {shlex.quote(p)} ] && echo p{i}" for i, p in enumerate(self.probe_paths)]
        lines += [
            f"grep -rqsF -- {shlex.quote(s)} {shlex.quote(workdir)} && echo s{i}"
            for i, s in enumerate(self.probe_strings)
        ]
        if not lines:
            return
        r = sandbox.exec("\n".join([*lines, "true"]), timeout_s=60, cwd="/")
        for tok in r.stdout.split():
            pool = self.probe_paths if tok[:1] == "p" else self.probe_strings
            if tok[1:].isdigit() and int(tok[1:]) < len(pool):
                self.present.add(pool[int(tok[1:])])

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if task.solution is None:
            return AgentOutcome(exit_code=None, detail="task has no reference solution")
        wd = task.environment.workdir
        self._probe(sandbox, wd)
        self.before, _ = self._listing(sandbox, wd)
        outcome = run_solution(sandbox, task, task.solution, deadline)
        self.outcome = outcome
        self.after, self.repos = self._listing(sandbox, wd, repos=True)
        for rel, (_, size, digest) in self.after.items():
            prev = self.before.get(rel)
            if (prev is None or prev[2] != digest) and size <= MAX_OUTPUT_BYTES:
                got = sandbox.download(f"{wd}/{rel}")
                self.sniffed[rel] = next(iter(got.values()), b"")[:SNIFF_BYTES]
        return outcome

    def profile(self, task: Task, result: TrialResult) -> TaskProfile:
        """The profile of `task` from this agent's listings and the trial's outcome."""
        wd = task.environment.workdir.rstrip("/")
        outputs = []
        for rel, (mode, size, digest) in sorted(self.after.items()):
            prev = self.before.get(rel)
            if prev is not None and prev[2] == digest:
                continue
            data = self.sniffed.get(rel, b"\0")
            kind, lines, header, columns = sniff(data, rel)
            sample, complete = sample_of(data, kind)
            complete = complete and size == len(data)
            outputs.append(
                OutputFile(
                    path=f"{wd}/{rel}",
                    rel=rel,
                    size=size,
                    mode=mode,
                    sha256=digest,
                    created=prev is None,
                    kind=kind,
                    lines=lines,
                    header=header,
                    columns=columns,
                    in_repo=any(not root or rel.startswith(root + "/") for root in self.repos),
                    sample=sample,
                    complete=complete,
                )
            )
        ok = result.resolved
        detail = "" if ok else f"oracle {result.failure_mode}: {result.passed}/{result.total}"
        return TaskProfile(
            task_hash=task.content_hash,
            workdir=wd,
            ok=ok,
            detail=detail,
            outputs=outputs,
            assertion_s={a.name: a.duration_s for a in result.assertions},
            assertions=result.total,
        )


def profile_task(task: Task, backend: str = "local") -> tuple[TaskProfile, list[TrialResult]]:
    """Run the oracle once with listings, and a nop agent (the task's free reward).

    Returns the profile and the (ordinary oracle and nop) trials."""
    agent = ProfilingOracle()
    result = run_trial(task, agent, backend)
    profile = agent.profile(task, result)
    if not profile.ok:
        return profile, [result]
    nop = run_trial(task, "nop", backend)
    if nop.rewardable and nop.total == profile.assertions:
        profile = profile.model_copy(update={"nop_passed": nop.passed})
    return profile, [result, nop]
