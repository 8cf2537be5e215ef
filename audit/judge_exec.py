"""The executable judge: measured evidence per audit dimension, always on and offline.

For one task it runs, in fresh sandboxes: the oracle once with instrumentation (a probe of
the pre-solution environment for statically suspected hidden requirements, and the
filesystem effects of the solution, found by listing every file newer than a marker after
solve.sh), a nop trial, `reruns` more oracle trials (verdict stability), and up to
`max_mutants` solution mutants (mutation testing). Static findings come from
`audit.static_checks`. The result, `ExecEvidence`, holds named measurements and findings;
`score_dimensions` turns it into the six rubric scores (pure).

Evidence is stored as one `audits` row (judge `exec`, version `exec-<EXEC_VERSION>`):
measurements in `scores`, findings in `reasons`. It depends on the task bundle only, not on
the rubric, so a new rubric re-scores tasks without re-running a sandbox.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from pydantic import BaseModel, ConfigDict, Field

from audit.mutation import make_mutants, run_mutants, solution_steps
from audit.rubric import Dimension
from audit.static_checks import (
    Code,
    Context,
    Finding,
    VerifierFacts,
    alignment_share,
    answer_like,
    static_findings,
)
from sandbox.base import Sandbox
from sandbox.trial import SOLUTION_DIR, AgentOutcome, run_trial
from tasks.model import Task
from tasks.results import FailureMode, TrialResult
from warehouse.records import AuditRecord

EXEC_VERSION = "2"
EXEC_JUDGE = "exec"
MARK = "/.t1-audit-mark"
# Not searched for effects: kernel and trial plumbing, and the large system trees a task's
# solution has no business writing (listing them costs seconds per trial on a cold cache).
PRUNE = (
    "/proc",
    "/sys",
    "/dev",
    "/logs",
    "/solution",
    "/tests",
    MARK,
    "/usr/lib",
    "/usr/share",
    "/usr/include",
    "/usr/libexec",
    "/usr/src",
    "/lib",
    "/lib32",
    "/lib64",
    "/var/lib/dpkg",
    "/var/cache",
)
# Effects that are side products of running anything, not what the task asks for.
_NOISE = re.compile(
    r"(/__pycache__/|\.pyc$|^/root/\.(cache|bash_history|python_history|lesshst|wget-hsts)|"
    r"^/var/(cache|lib/apt|log|tmp)/|^/tmp/|^/run/|/\.git/(index\.lock|FETCH_HEAD|ORIG_HEAD)$)"
)
_TOKEN = re.compile(r"(?<![\w.])(\d+\.\d+|\d{3,}|[0-9a-f]{7,40})(?![\w.])")

Runner = Callable[..., TrialResult]


def exec_version() -> str:
    return f"exec-{EXEC_VERSION}"


class ExecConfig(BaseModel):
    """How hard the executable judge looks. Defaults keep one task under ~10 trials."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "local"
    reruns: int = Field(2, ge=0)
    """Oracle re-runs after the first (verdict stability)."""
    max_mutants: int = Field(6, ge=0)
    workers: int = Field(2, ge=1)
    """Trials of one task run concurrently."""
    nop_weak_share: float = Field(0.5, ge=0, le=1)
    """A nop run passing more than this share of assertions (most) marks the verifier weak."""
    min_kill_rate: float = Field(0.5, ge=0, le=1)
    """A mutation kill rate below this (over >= 2 mutants) marks the verifier weak."""
    min_coverage: float = Field(0.5, ge=0, le=1)
    """Effect coverage below this is reported as `low_coverage` (a score, not a reject)."""
    mutant_timeout_factor: float = Field(5.0, gt=0)
    """A mutant's agent phase may take this many times the oracle's time ..."""
    mutant_timeout_floor_s: float = Field(20.0, gt=0)
    """... but at least this long (and never more than the task's agent timeout)."""
    max_effect_bytes: int = Field(65536, ge=0)
    max_effect_files: int = Field(40, ge=0)


class ExecEvidence(BaseModel):
    """Measurements (name -> number) and findings for one task."""

    task_hash: str
    measures: dict[str, float] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_record(self) -> AuditRecord:
        codes = sorted(set(self.codes()))
        return AuditRecord(
            task_hash=self.task_hash,
            judge=EXEC_JUDGE,
            audit_version=exec_version(),
            scores=dict(self.measures),
            verdict="problems" if codes else "clean",
            reasons=[f.reason() for f in self.findings] + [f"note: {n}" for n in self.notes],
        )

    @classmethod
    def from_record(cls, rec: AuditRecord) -> ExecEvidence:
        findings, notes = [], []
        for r in rec.reasons:
            f = Finding.from_reason(r)
            if f is not None:
                findings.append(f)
            else:
                notes.append(r.removeprefix("note: "))
        return cls(
            task_hash=rec.task_hash, measures=dict(rec.scores), findings=findings, notes=notes
        )


# ---- the instrumented oracle --------------------------------------------------------------


class EffectsOracleAgent:
    """The oracle, plus a probe before it and a listing of its filesystem effects after it.

    `probe_paths` / `probe_literals` are looked for in the environment before solve.sh runs
    (a requirement present there is discoverable, not hidden). After solve.sh, every regular
    file or symlink newer (mtime or ctime) than a marker is an effect, as is every path of the
    working directory that disappeared.
    """

    name = "oracle"

    def __init__(
        self,
        probe_paths: list[str],
        probe_literals: list[str],
        search_dirs: list[str],
        max_bytes: int = 65536,
        max_files: int = 40,
    ) -> None:
        self.probe_paths = probe_paths
        self.probe_literals = probe_literals
        self.search_dirs = search_dirs
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.found: set[str] = set()
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.outputs: dict[str, str] = {}

    def _probe(self, sandbox: Sandbox, wd: str) -> None:
        lines = []
        for i, p in enumerate(self.probe_paths):
            lines.append(f"[ -e {shlex.quote(p)} ] && echo p{i}")
        dirs = " ".join(shlex.quote(d) for d in self.search_dirs)
        for i, lit in enumerate(self.probe_literals):
            lines.append(f"grep -rqsF -- {shlex.quote(lit)} {dirs} 2>/dev/null && echo l{i}")
        if not lines:
            return
        r = sandbox.exec("\n".join(lines) + "\ntrue", timeout_s=30, cwd=wd)
        for tok in r.stdout.split():
            kind, idx = tok[0], int(tok[1:]) if tok[1:].isdigit() else -1
            pool = self.probe_paths if kind == "p" else self.probe_literals
            if 0 <= idx < len(pool):
                self.found.add(pool[idx])

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if task.solution is None:
            return AgentOutcome(exit_code=None, detail="task has no reference solution")
        wd = task.environment.workdir
        self._probe(sandbox, wd)
        q = shlex.quote(wd)
        before = sandbox.exec(f"find {q} -xdev 2>/dev/null | head -n 20000", timeout_s=30).stdout
        sandbox.upload(task.solution, SOLUTION_DIR)
        sandbox.exec(f"touch {MARK} && sleep 0.05", timeout_s=10, cwd="/")
        r = sandbox.exec(
            f"bash {SOLUTION_DIR}/solve.sh",
            timeout_s=max(0.1, deadline - time.monotonic()),
            cwd=wd,
        )
        prune = " -o ".join(f"-path {p}" for p in PRUNE)
        listing = sandbox.exec(
            f"find / -xdev \\( {prune} \\) -prune -o \\( -newer {MARK} -o -cnewer {MARK} \\) "
            f"\\( -type f -o -type l \\) -printf '%s\\t%p\\n' 2>/dev/null | head -n 20000; "
            f"rm -f {MARK}; echo '=== after'; find {q} -xdev 2>/dev/null | head -n 20000",
            timeout_s=60,
            cwd="/",
        ).stdout
        changed, _, after = listing.partition("=== after\n")
        sizes = {}
        for line in changed.splitlines():
            size, _, path = line.partition("\t")
            if path and not _NOISE.search(path):
                sizes[path] = int(size) if size.isdigit() else 0
        self.created = sorted(sizes)
        self.deleted = sorted(
            set(before.splitlines()) - set(after.splitlines()) - {wd}, key=str.encode
        )
        small = [p for p in self.created if sizes[p] <= self.max_bytes][: self.max_files]
        for p in small:
            data = sandbox.download(p).get(posixpath.basename(p), b"")
            try:
                self.outputs[p] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
        return AgentOutcome.from_exec(r)


# ---- pure pieces: coverage, shortcut tokens, stability -------------------------------------


def effect_units(created: list[str], deleted: list[str], limit: int = 10) -> list[str]:
    """Effects to cover: created/modified files and deleted paths, with a git repository's
    internals collapsed to its `.git` and directories holding more than `limit` effects
    collapsed to the directory."""
    paths = []
    for p in [*created, *deleted]:
        if "/.git/" in p:
            p = p[: p.index("/.git/") + 5]
        paths.append(p)
    paths = sorted(set(paths))
    by_dir: dict[str, list[str]] = {}
    for p in paths:
        by_dir.setdefault(posixpath.dirname(p), []).append(p)
    out = []
    for d, ps in sorted(by_dir.items()):
        out.extend([d + "/"] if len(ps) > limit else ps)
    return out


def covered(unit: str, facts: VerifierFacts, workdir: str) -> bool:
    """An effect is covered when the verifier names it, a directory containing it (below the
    top level and other than the working directory), or its file name."""
    path = unit.rstrip("/")
    if path in facts.paths:
        return True
    broad = {"/", workdir.rstrip("/") or "/"}
    for p in facts.paths:
        if p not in broad and p.count("/") >= 2 and path.startswith(p + "/"):
            return True
    for p in facts.paths:  # the unit is a directory of checked files
        if unit.endswith("/") and p.startswith(path + "/"):
            return True
    base = posixpath.basename(path)
    if len(base) >= 3 and re.search(rf"(?<![\w-]){re.escape(base)}(?![\w-])", facts.text):
        return True
    if path.startswith(workdir.rstrip("/") + "/"):
        rel = path[len(workdir.rstrip("/")) + 1 :]
        return rel in facts.text
    return False


def coverage_share(units: list[str], facts: VerifierFacts, workdir: str) -> tuple[float, list]:
    """(share of effect units covered, uncovered units); (1.0, []) when there are none."""
    if not units:
        return 1.0, []
    missed = [u for u in units if not covered(u, facts, workdir)]
    return 1.0 - len(missed) / len(units), missed


def shortcut_tokens(outputs: dict[str, str], script: str, ctx: Context) -> list[str]:
    """Computed-looking tokens of the oracle's outputs (long numbers, decimals, hex digests)
    that solve.sh spells out literally although neither the instruction nor the environment
    gives them: the solution knew the answer instead of computing it."""
    found = set()
    script_lines = {ln.strip() for ln in script.splitlines() if ln.strip()}
    for text in outputs.values():
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines and sum(ln in script_lines for ln in lines) >= len(lines) / 2:
            continue  # a file the solution writes out verbatim (a script, a config): authored
        for tok in set(_TOKEN.findall(text)):
            if not (answer_like(tok) or "." in tok):
                continue
            if tok in ctx.instruction or tok in ctx.environment:
                continue
            if re.search(rf"(?<![\w.]){re.escape(tok)}(?![\w.])", script):
                found.add(tok)
    return sorted(found)


def verdict_vector(r: TrialResult) -> tuple:
    """What a rerun must reproduce: the failure mode and each assertion's outcome."""
    return (r.failure_mode.value, tuple((a.name, a.ok) for a in r.assertions))


# ---- the judge ------------------------------------------------------------------------------


def _probe_targets(hidden: list[Finding]) -> tuple[list[str], list[str]]:
    paths, lits = [], []
    for f in hidden:
        m = re.match(r"path (\S+) is checked", f.detail)
        if m:
            paths.append(m.group(1))
            continue
        m = re.match(r"(?:value|key|format token) '(.*)' is", f.detail)
        if m:
            lits.append(m.group(1))
    return paths, lits


def run_exec_judge(
    task: Task, config: ExecConfig | None = None, runner: Runner | None = None
) -> ExecEvidence:
    """Measure one task. Never raises for the task's own failures: they are findings."""
    cfg = config or ExecConfig()
    run = runner or partial(run_trial, backend=cfg.backend)
    facts, findings = static_findings(task)
    ev = ExecEvidence(task_hash=task.content_hash)
    m = ev.measures
    m["checked_items"] = float(facts.checked_items)
    if task.solution is None:
        ev.findings = findings
        m["alignment_share"] = alignment_share(task, facts, _hidden(findings))
        return ev
    hidden = _hidden(findings)
    wd = task.environment.workdir
    dirs = sorted({wd} | {posixpath.dirname(p) for p in facts.paths if p.count("/") >= 2})
    probe_paths, probe_lits = _probe_targets(hidden)
    agent = EffectsOracleAgent(
        probe_paths, probe_lits, dirs, cfg.max_effect_bytes, cfg.max_effect_files
    )
    oracle = run(task, agent)
    if agent.found:
        kept = []
        for f in findings:
            item = _item(f)
            if f.code == Code.HIDDEN_REQUIREMENT and item in agent.found:
                ev.notes.append(f"{item!r} is not stated but exists in the environment")
            else:
                kept.append(f)
        findings = kept
    hidden = _hidden(findings)
    m["alignment_share"] = alignment_share(task, facts, hidden)
    m["oracle_s"] = oracle.agent_s
    m["assertions"] = float(oracle.total)
    m["oracle_passed"] = float(oracle.passed)
    m["oracle_pass_share"] = oracle.passed / oracle.total if oracle.total else 0.0
    m["per_assertion"] = 1.0 if oracle.total and not oracle.report.binary else 0.0
    if oracle.failure_mode != FailureMode.NONE or not oracle.resolved:
        failing = [a.name for a in oracle.assertions if not a.ok]
        why = oracle.failure_detail[:300] or f"fails {failing[:5]}"
        findings.append(Finding(Code.ORACLE_FAILS, f"{oracle.failure_mode.value}: {why}", "trial"))
    if oracle.report.binary:
        findings.append(Finding(Code.BINARY_VERIFIER, "verifier wrote only reward.txt", "trial"))
    if oracle.failure_mode == FailureMode.NONE and oracle.total == 0:
        findings.append(Finding(Code.NO_ASSERTIONS, "verifier reported no assertions", "trial"))
    if oracle.agent_s > 0.5 * task.limits.agent_timeout_s:
        findings.append(
            Finding(Code.SLOW_SOLUTION, f"oracle took {oracle.agent_s:.0f}s of the budget", "trial")
        )
    if any(f.code == Code.ORACLE_FAILS for f in findings):
        ev.findings = findings
        return ev  # nothing else is meaningful when the reference solution fails

    units = effect_units(agent.created, agent.deleted)
    share, missed = coverage_share(units, facts, wd)
    m["effects"] = float(len(units))
    m["effect_coverage"] = share
    if units and share < cfg.min_coverage:
        findings.append(
            Finding(
                Code.LOW_COVERAGE,
                f"{len(missed)}/{len(units)} solution effects unchecked, e.g. {missed[:4]}",
                "trial",
            )
        )
    script = (task.solution.get("solve.sh", b"")).decode("utf-8", "replace")
    for tok in shortcut_tokens(agent.outputs, script, Context.of(task)):
        findings.append(
            Finding(
                Code.SOLUTION_SHORTCUT,
                f"solve.sh spells out {tok!r}, which its output "
                "holds and nothing given to the agent does",
                "trial",
            )
        )

    mutants = make_mutants(script, cfg.max_mutants)
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        nop_f = pool.submit(run, task, "nop")
        rerun_fs = [pool.submit(run, task, "oracle") for _ in range(cfg.reruns)]
        nop = nop_f.result()
        reruns = [f.result() for f in rerun_fs]
    budget = max(cfg.mutant_timeout_floor_s, cfg.mutant_timeout_factor * oracle.agent_s)
    mut = run_mutants(task, mutants, run, cfg.workers, budget)

    m["nop_pass_share"] = nop.passed / nop.total if nop.total else 0.0
    if nop.total and nop.passed == nop.total:
        findings.append(Finding(Code.NOP_PASSES, "a nop run passes every assertion", "trial"))
    if nop.total and m["nop_pass_share"] > cfg.nop_weak_share:
        findings.append(
            Finding(Code.WEAK_VERIFIER, f"nop passes {nop.passed}/{nop.total} assertions", "trial")
        )
    base = verdict_vector(oracle)
    unstable = [
        r
        for r in reruns
        if r.failure_mode != FailureMode.SANDBOX_ERROR and verdict_vector(r) != base
    ]
    m["reruns"] = float(len(reruns))
    m["rerun_stable"] = 0.0 if unstable else 1.0
    if unstable:
        diff = [a.name for a in unstable[0].assertions if not a.ok]
        findings.append(
            Finding(
                Code.FLAKY_VERIFIER,
                f"{len(unstable)}/{len(reruns)} oracle reruns disagree "
                f"with the first (failing on rerun: {diff[:4]})",
                "trial",
            )
        )
    m["mutants"] = float(mut.total)
    if mut.kill_rate is not None:
        m["mutation_kill_rate"] = mut.kill_rate
        if mut.total >= 2 and mut.kill_rate < cfg.min_kill_rate:
            findings.append(
                Finding(
                    Code.WEAK_VERIFIER,
                    f"only {mut.killed}/{mut.total} solution mutants "
                    f"fail the verifier; survivors: {mut.survivors[:3]}",
                    "trial",
                )
            )
    ev.notes += [f"mutant error: {e}" for e in mut.errors]
    m["solution_steps"] = float(len(solution_steps(script)[0]))
    ev.findings = findings
    return ev


def _hidden(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code == Code.HIDDEN_REQUIREMENT]


def _item(f: Finding) -> str | None:
    m = re.match(r"path (\S+) is checked", f.detail)
    if m:
        return m.group(1)
    m = re.match(r"(?:value|key|format token) '(.*)' is", f.detail)
    return m.group(1) if m else None


def reaudit_evidence(parent: ExecEvidence, task: Task) -> ExecEvidence:
    """Evidence for an instruction-only repair of `parent`'s task: the trial measurements carry
    over (environment, solution and verifier are unchanged); every static, instruction-
    dependent finding is recomputed on the new instruction."""
    facts, static = static_findings(task)
    kept_trial = [f for f in parent.findings if f.source != "static"]
    resolved = {n.split("'")[1] for n in parent.notes if n.count("'") >= 2}
    static = [f for f in static if not (f.code == Code.HIDDEN_REQUIREMENT and _item(f) in resolved)]
    ev = ExecEvidence(
        task_hash=task.content_hash,
        measures=dict(parent.measures),
        findings=[*static, *kept_trial],
        notes=[*parent.notes, f"trial evidence carried from {parent.task_hash}"],
    )
    ev.measures["alignment_share"] = alignment_share(task, facts, _hidden(static))
    return ev


# ---- scores (pure) ---------------------------------------------------------------------------


def score_dimensions(ev: ExecEvidence, agent_timeout_s: float = 600.0) -> dict[Dimension, float]:
    """The six rubric scores in [0, 1] from measured evidence (see docs/audit.md)."""
    m, codes = ev.measures, set(ev.codes())
    correctness = m.get("oracle_pass_share", 0.0)
    if Code.ORACLE_FAILS in codes:
        correctness = min(correctness, 0.5)
    fairness = 1.0
    if Code.FLAKY_VERIFIER in codes:
        fairness = 0.0
    elif Code.WALL_CLOCK in codes:
        fairness = 0.8
    parts = [v for k in ("effect_coverage", "mutation_kill_rate") if (v := m.get(k)) is not None]
    coverage = sum(parts) / len(parts) if parts else 0.5
    reasonable = 1.0
    reasonable -= 0.5 * (Code.SOLUTION_READS_TESTS in codes)
    reasonable -= 0.5 * (Code.SOLUTION_SHORTCUT in codes)
    reasonable -= 0.3 * (Code.SLOW_SOLUTION in codes)
    reasonable -= 1.0 * (Code.NO_SOLUTION in codes)
    nop = m.get("nop_pass_share")
    value = [
        1.0 - nop if nop is not None else 0.5,
        min(1.0, m.get("assertions", 0.0) / 6.0),
        min(1.0, m.get("solution_steps", 0.0) / 6.0),
    ]
    return {
        Dimension.ALIGNMENT: m.get("alignment_share", 0.0),
        Dimension.FAIRNESS: fairness,
        Dimension.COVERAGE: coverage,
        Dimension.CORRECTNESS: correctness,
        Dimension.REASONABLENESS: max(0.0, reasonable),
        Dimension.TRAINING_VALUE: sum(value) / len(value),
    }
