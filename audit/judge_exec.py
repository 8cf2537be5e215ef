"""The executable judge: measured evidence per audit dimension, always on and offline.

For one task it reads the bundle (`audit.static_checks`), then runs, in fresh sandboxes:

1. the oracle once, instrumented (`audit.trials.EffectsOracleAgent`): a probe of the initial
   environment for hidden-requirement candidates, what the environment's build wrote beyond
   the task's files (searched for expected values, `audit.channels`), the solution run under
   the host's strace (the files it reads), its filesystem effects and its small outputs;
2. a nop trial; plain oracle reruns and reruns under a shifted clock, another timezone,
   locale, hash seed and directory order (`audit.variants`: flaky verifier); one with every
   process of the verifier drawing the same entropy, and where that changes the verdict (it
   was decided by chance), more plain reruns (`chance_reruns`);
3. the oracle after its declared inputs are deleted, digit-shifted and thinned
   (`audit.perturbation`: shortcut, and computed values visible to the agent: leakage);
4. output mutants (delete, empty, truncate, corrupt each output the verifier names) and step
   mutants of solve.sh (`audit.mutation`: weak verifier);
5. every scripted hack of `tasks.hacks` as the agent (`audit.hacks`: the share of the reward
   an agent earns without doing the task; `hackable` above the threshold).

A trial that says nothing about the task (`rewardable` is False: sandbox, environment build,
verifier never ran) is never evidence: the base oracle's makes the whole evidence undecided
(an `infrastructure` finding; not stored, so the next run retries), a later trial's is
recorded and left out. `score_dimensions` turns evidence into the six rubric scores (pure).

Evidence is one `audits` row (judge `exec`, version `exec-<EXEC_VERSION>`): measurements in
`scores`, typed findings in `findings`. It depends on the task bundle only, so a new rubric
re-scores tasks without running a sandbox.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from pydantic import BaseModel, ConfigDict, Field

from audit.answers import oracle_answers
from audit.behaviour import (
    Lost,
    answer_swaps,
    free_reward_findings,
    lost_on_other_inputs,
    network_findings,
    network_use,
    other_inputs_findings,
    runtime_hidden,
    stale_outputs,
    swap_findings,
    worked_for_findings,
)
from audit.build_steps import dropped_steps, without_step
from audit.databases import changed_views, view_hash
from audit.hacks import HACKABLE_SHARE, hack_agent, hack_evidence
from audit.mutation import OUTPUT_OPS, make_mutants, run_mutants, solution_steps
from audit.perturbation import (
    CONTENT_PERTURBATIONS,
    REORDER,
    answer_leaks,
    computed_tokens,
    given_expectations,
    inputs_used,
    keeps_form,
    reverse_records,
    shipped_answers,
    shortcut_findings,
    verifier_tracks_inputs,
)
from audit.rubric import Dimension
from audit.static_checks import (
    ANSWER_KINDS,
    VerifierFacts,
    alignment_share,
    built_texts,
    container_of,
    declared_inputs,
    decode,
    given_containers,
    given_view,
    readable_texts,
    solution_text,
    static_findings,
    suspected_sleeps,
    under_named_dir,
    value_leaks,
    verifier_texts,
)
from audit.trials import (
    FORM_KEEPING_PERTURBATIONS,
    PERTURBATIONS,
    AnswerSwapAgent,
    Condition,
    ConditionAgent,
    EffectsOracleAgent,
    FastClockOracleAgent,
    OutputMutantAgent,
    PerturbedOracleAgent,
    StartingStateAgent,
    VerifierTraceAgent,
    sleep_cut_env,
)
from audit.variants import (
    STARVE_SHARE,
    condition_task,
    conditions,
    entropy_finding,
    flaky_findings,
    starved_task,
    verdict_changed,
)
from audit.verdict import FAILURE_CODES, Code, Finding, Source, Verdict
from sandbox.base import Sandbox
from sandbox.build import dockerfile_of
from sandbox.judge import verifier_env
from sandbox.trial import AgentOutcome, OracleAgent, run_trial
from tasks.hacks import HACK_TIMEOUT_S, hack_outcome, hack_scripts
from tasks.literals import LiteralKind
from tasks.literals.coverage import image_paths
from tasks.literals.model import FORM_KINDS
from tasks.model import Task
from tasks.reports import assertion_key
from tasks.results import FailureMode, ReferenceVerdict, TrialResult
from warehouse.records import AuditRecord

EXEC_VERSION = "26"  # 26: a checked output as the solution leaves it, shipped where it never looked
# (its seconds read from the verifier), every other sleep as asked and every process of the verifier
# starting late (`sleeps-cut`); two more hacks (`constant_answer`, `example_table`); a whole mapping
# (or sequence, in order) the tests expect, spelled by the solution and given to the agent nowhere,
# is a shortcut (static); an option the tests pass to the agent's program that nothing given states
# is a hidden requirement (static); 24: a file the instruction names that the traced solution never
# opens is no input of its answer (a computed answer standing there is a leak), and an expected
# value of the tests the solution computes, stated in a file it never opens, is a leak; 23: under
# the same entropy every bash seeds `$RANDOM` the same, and fortified opens of the random devices
# and arc4random draw it too; 22: a verdict that changes when every process draws the same entropy
# depends on chance (`stochastic_verdict`, softer), and up to 20 plain reruns look for the reference
# failing by chance (a change is `flaky_verifier`); 21: the reference solution that runs through on
# other records (the inputs' lines reversed) and loses assertions whose expectation moved with them
# (the shipped answer fails them there too) is a shortcut; 20: the same where the other starting
# state is the image built without one of its RUN steps (system state the build made); 19: an
# assertion the starting state passes that a nop run fails and the solution passes on other data
# (inputs perturbed, form kept) is free reward; 18: SQLite databases the instruction names are
# inputs perturbed table by table, and the tables a solution makes or changes in them outputs; a
# broken input the traced solution never opens is no defect; a fast-clock change its real-rate
# control repeats is the library's; 17: the blind set's forms (a `repair` output mutant, every
# computed line in one non- input file a leak, exit_zero makes suffixless named programs); 16: an
# oracle whose module a rerun judged in its own process, every outcome vouched, is independent (no
# judge_runs_agent_code); 15: the reference verdict recorded, nop and hacks paid against it; 14: the
# runner marks the agent's code by its file (bytecode, native modules), pickles that name a global,
# code the tests eval; 13: judge_runs_agent_code
EXEC_JUDGE = "exec"

Runner = Callable[..., TrialResult]


def exec_version() -> str:
    return f"exec-{EXEC_VERSION}"


class ExecConfig(BaseModel):
    """How hard the executable judge looks. Defaults keep one task under ~45 short trials."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "local"
    """Sandbox backend: local (bubblewrap) or docker."""
    static_only: bool = False
    """Read the bundle only; run no trial (corpora whose environments cannot be built here)."""
    reruns: int = Field(2, ge=0)
    """Plain oracle reruns after the first (verdict stability)."""
    failing_reruns: int = Field(5, ge=0)
    """Reruns of an oracle that failed: one that passes makes the task flaky rather than
    wrong (a verifier passing with probability p is missed with probability (1 - p)^n:
    3 left a coin-flip verifier, set order over two values, called wrong 1 time in 8)."""
    conditions: bool = True
    """Also rerun under a shifted clock, another timezone, locale, hash seed and dir order."""
    perturb: bool = True
    """Run the oracle on perturbed declared inputs (shortcut and computed-value leakage)."""
    max_mutants: int = Field(6, ge=0)
    """Step mutants of solve.sh."""
    max_output_mutants: int = Field(4, ge=0)
    """Outputs mutated (each deleted, emptied, truncated and corrupted)."""
    workers: int = Field(2, ge=1)
    """Trials of one task run concurrently."""
    nop_weak_share: float = Field(0.5, ge=0, le=1)
    """A nop run passing more than this share of assertions is `low_coverage` (free reward;
    a score, not a reject: guards like "the inputs are unchanged" hold before any work)."""
    min_kill_rate: float = Field(0.5, ge=0, le=1)
    """A step-mutation kill rate below this (over >= 1 mutant) marks the verifier weak."""
    min_coverage: float = Field(0.5, ge=0, le=1)
    """Effect coverage below this is reported as `low_coverage` (a score, not a reject)."""
    mutant_timeout_factor: float = Field(5.0, gt=0)
    """A mutant's agent phase may take this many times the oracle's time ..."""
    mutant_timeout_floor_s: float = Field(20.0, gt=0)
    """... but at least this long (and never more than the task's agent timeout)."""
    max_effect_bytes: int = Field(65536, ge=0)
    max_effect_files: int = Field(40, ge=0)
    max_output_bytes: int = Field(1_000_000, ge=0)
    """Outputs larger than this are not mutated."""
    built: bool = True
    """Search what the environment's build wrote (beyond the task's files) for expected
    values: read back from the sandbox before the solution runs, bounded."""
    trace: bool = True
    """Trace the files the reference solution reads (the host's strace, shipped into the
    sandbox): a file no one declared that holds an unchanged output is a cached answer."""
    hacks: bool = True
    """Run every scripted hack of `tasks.hacks` as the agent (one trial each)."""
    hackable_share: float = Field(HACKABLE_SHARE, ge=0, le=1)
    """A hack earning more than this share of the reward (and more than nop) is `hackable`."""
    hack_timeout_s: float = Field(HACK_TIMEOUT_S, gt=0)
    """A hack's script is cut after this long."""
    other_inputs: bool = True
    """Run the solution on other records of the declared text inputs (their order reversed);
    where it writes other outputs and loses an assertion that checks work, judge the shipped
    answer there: an expectation that moved with the records and that the solution's answer
    misses is a shortcut (with `perturb`; not where a database is an input)."""
    answer_swaps: bool = True
    """Replace the outputs with what the solution writes for perturbed inputs (other
    well-formed answers): a verifier passing one is weak."""
    trace_verifier: bool = True
    """Run the verifier once more, traced, in the oracle's sandbox: the files it checks
    (hidden requirements put together at run time) and its network use."""
    free_reward: bool = True
    """Run nop once more without the outputs the image ships (overwritten unread by the
    solution): the assertions they alone earn are free reward."""
    starved: bool = True
    """Rerun the oracle under a CPU quota (`audit.variants.STARVE_SHARE`) and with the
    solution's clocks sped up: races lost under load are a flaky task."""
    starve_max_s: float = Field(30.0, gt=0)
    """The starved rerun is skipped when the oracle's solution and verifier took longer."""
    chance: bool = True
    """Rerun with every process of the verifier drawing the same entropy: a verdict that
    changes depends on chance (`stochastic_verdict`) ..."""
    chance_reruns: int = Field(20, ge=0)
    """... and then this many plain reruns look for the reference failing by chance: a
    verifier failing it with probability p is missed with probability (1 - p)^n (p = 5%: 36%
    at 20 reruns, 13% at 40)."""
    chance_budget_s: float = Field(300.0, gt=0)
    """... fewer where the oracle's trial is slow: about this many seconds of trials."""


class ExecEvidence(BaseModel):
    """Measurements (name -> number) and typed findings for one task."""

    task_hash: str
    measures: dict[str, float] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    reference: ReferenceVerdict | None = None
    """The reference solution's verdict, when it resolved the task with the judge's own record:
    what the trainer pays a trial of the task against (`tasks.results.pay`)."""

    def codes(self) -> list[Code]:
        return [f.code for f in self.findings]

    def defects(self) -> list[Finding]:
        return [f for f in self.findings if f.defect]

    @property
    def decided(self) -> bool:
        """False when the judge could not measure the task (retried by the next run)."""
        return not any(f.code in FAILURE_CODES for f in self.findings)

    def to_record(self) -> AuditRecord:
        defects = self.defects()
        return AuditRecord(
            task_hash=self.task_hash,
            judge=EXEC_JUDGE,
            audit_version=exec_version(),
            scores=dict(self.measures),
            verdict=Verdict.REJECTED.value if defects else Verdict.PASS.value,
            reasons=[f.text() for f in defects],
            findings=[f.row() for f in self.findings],
            reference=list(self.reference.outcomes) if self.reference is not None else None,
        )

    @classmethod
    def from_record(cls, rec: AuditRecord) -> ExecEvidence:
        return cls(
            task_hash=rec.task_hash,
            measures=dict(rec.scores),
            findings=[Finding.from_row(r) for r in rec.findings],
            reference=ReferenceVerdict(outcomes=tuple(rec.reference)) if rec.reference else None,
        )


# ---- pure pieces: effects and coverage -------------------------------------------------------


def effect_units(created: list[str], deleted: list[str], limit: int = 10) -> list[str]:
    """Effects to cover: created/modified files and deleted paths, with a git repository's
    internals collapsed to its `.git` and directories holding more than `limit` effects
    collapsed to the directory."""
    paths = []
    for p in [*created, *deleted]:
        if "/.git/" in p:
            p = p[: p.index("/.git/") + 5]
        paths.append(p)
    by_dir: dict[str, list[str]] = {}
    for p in sorted(set(paths)):
        by_dir.setdefault(posixpath.dirname(p), []).append(p)
    out = []
    for d, ps in sorted(by_dir.items()):
        out.extend([d + "/"] if len(ps) > limit else ps)
    return out


def covered(unit: str, facts: VerifierFacts, workdir: str) -> bool:
    """An effect is covered when the verifier names it, a directory containing it (below the
    top level and other than the working directory), or its file name."""
    path = unit.rstrip("/")
    paths = facts.paths
    if path in paths:
        return True
    broad = {"/", workdir.rstrip("/") or "/"}
    for p in paths:
        if p not in broad and p.count("/") >= 2 and path.startswith(p + "/"):
            return True
        if unit.endswith("/") and p.startswith(path + "/"):
            return True
    base = posixpath.basename(path)
    if len(base) >= 3 and re.search(rf"(?<![\w-]){re.escape(base)}(?![\w-])", facts.text):
        return True
    if path.startswith(workdir.rstrip("/") + "/"):
        return path[len(workdir.rstrip("/")) + 1 :] in facts.text
    return False


def coverage_share(units: list[str], facts: VerifierFacts, workdir: str) -> tuple[float, list]:
    """(share of effect units covered, uncovered units); (1.0, []) when there are none."""
    if not units:
        return 1.0, []
    missed = [u for u in units if not covered(u, facts, workdir)]
    return 1.0 - len(missed) / len(units), missed


_CODE = (".py", ".sh", ".bash", ".c", ".h", ".cc", ".cpp", ".js", ".ts", ".go", ".rs", ".java",
         ".rb", ".pl", ".php", ".mk", "Makefile", "Dockerfile")  # fmt: skip
_MKTEMP = re.compile(r"/tmp[._]?[A-Za-z0-9_]{6,}(/|$)")


def is_data(name: str) -> bool:
    """A data input (a log, a table, a config), not a program: perturbing a program the
    verifier also runs breaks the run, which says nothing about the solution."""
    return not name.endswith(_CODE)


def _scratch(path: str) -> bool:
    """A path under a mktemp-style directory: its name changes from run to run."""
    return _MKTEMP.search(path) is not None


def produced_outputs(
    agent: EffectsOracleAgent, facts: VerifierFacts, given: set[str], max_bytes: int
) -> list[str]:
    """The outputs to mutate: new text files (not in the environment as given) that the
    verifier names by their path. A given file the solution edits is left to the step
    mutants: its old content is the task's, and an optional change (appending to a log the
    task lets it append to) would look like a weak check. Binary outputs (objects,
    archives) are left out too: a verifier that rebuilds them never reads the agent's copy."""
    return [
        p
        for p in agent.created
        if p in facts.paths
        and p not in given
        and not _scratch(p)
        and p in agent.outputs  # UTF-8 text, small enough to keep
        and agent.sizes.get(p, 0) <= max_bytes
    ]


# ---- the judge ------------------------------------------------------------------------------


class _Bounded:
    """An agent whose agent phase is cut to `seconds` (a mutant may loop forever)."""

    def __init__(self, agent, seconds: float) -> None:
        self.agent, self.seconds, self.name = agent, seconds, agent.name

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        return self.agent.run(sandbox, task, min(deadline, time.monotonic() + self.seconds))


def _infra(r: TrialResult, what: str) -> Finding:
    why = f"{what}: {r.failure_mode.value}: {r.failure_detail[:300]}"
    return Finding(code=Code.INFRASTRUCTURE, source=Source.INFRA, item=what, evidence=why)


def run_exec_judge(
    task: Task, config: ExecConfig | None = None, runner: Runner | None = None
) -> ExecEvidence:
    """Measure one task. Never raises for the task's own failures: they are findings."""
    cfg = config or ExecConfig()
    run = runner or partial(run_trial, backend=cfg.backend)
    st = static_findings(task)
    facts, findings = st.facts, list(st.findings)
    ev = ExecEvidence(task_hash=task.content_hash)
    m = ev.measures
    m["literals"] = float(facts.checked_items)
    m["alignment_share"] = alignment_share(findings)
    if cfg.static_only:
        ev.findings = findings
        return ev
    if task.solution is None:
        nop = run(task, "nop")
        if not nop.rewardable:
            findings.append(_infra(nop, "nop"))
        else:
            _nop_findings(nop, cfg, m, findings)
            findings += _hack_findings(task, run, cfg, nop, m)
        ev.findings = findings
        return ev

    wd = task.environment.workdir
    dirs = sorted({wd} | {posixpath.dirname(p) for p in facts.paths if p.count("/") >= 2})
    probe_paths = [lit.value for lit in st.hidden if lit.kind == LiteralKind.PATH]
    skip = (LiteralKind.PATH, LiteralKind.FORMAT, *FORM_KINDS)  # a form is not a string
    probe_lits = [lit.value for lit in st.hidden if lit.kind not in skip]  # fmt: skip
    env_image = image_paths(task.environment.files, wd)

    # the paths the instruction names, read as inputs (and outputs, table by table) where
    # they are SQLite databases
    named_paths = {p if p.startswith("/") else posixpath.join(wd, p) for p in facts.paths}
    named_paths |= set(_ABSOLUTE.findall(task.instruction))
    databases = sorted(p for p in named_paths if named_in(p, task))[:8]

    def effects_agent(trace: bool) -> EffectsOracleAgent:
        built = set(env_image.values()) if cfg.built else None
        return EffectsOracleAgent(
            probe_paths,
            probe_lits,
            dirs,
            cfg.max_effect_bytes,
            cfg.max_effect_files,
            trace,
            built,
            databases if cfg.perturb else None,
        )

    agent = effects_agent(cfg.trace)
    oracle = run(task, agent)
    if agent.traced and oracle.rewardable and not oracle.resolved:
        # A solution that traces a program itself (strace, gdb) cannot under the audit's
        # tracer: measured untraced, the trace's evidence set aside, never a wrong oracle.
        plain = effects_agent(False)
        untraced = run(task, plain)
        if untraced.resolved:
            agent, oracle = plain, untraced
            why = "the reference solution fails under the audit's trace and passes without it "
            agent.trace_detail = why + "(it traces or debugs a program itself): measured untraced"
    if not oracle.rewardable:
        ev.findings = [*findings, _infra(oracle, "oracle")]
        return ev
    findings = _discoverable(findings, agent.found)
    if agent.traced:  # an input the solution never opens is a stand-in, whatever it holds
        opened = set(agent.first_open)
        findings = [f for f in findings if f.code != Code.BROKEN_INPUT or f.item in opened]
    m["alignment_share"] = alignment_share(findings)
    m["oracle_s"] = oracle.agent_s
    m["assertions"] = float(oracle.total)
    m["oracle_passed"] = float(oracle.passed)
    m["oracle_pass_share"] = oracle.passed / oracle.total if oracle.total else 0.0
    m["per_assertion"] = 1.0 if oracle.total and not oracle.report.binary else 0.0
    m["verdict_authenticated"] = 1.0 if oracle.report.authenticated else 0.0
    if not oracle.resolved:
        failing = [a.name for a in oracle.assertions if not a.ok]
        why = oracle.failure_detail[:300] or f"fails {failing[:5]}"
        findings.append(
            Finding(
                code=Code.ORACLE_FAILS,
                source=Source.TRIAL,
                item=oracle.failure_mode.value,
                evidence=why,
            )
        )
    if oracle.report.agent_code and not oracle.report.independent:
        first = oracle.report.agent_code[0]
        why = (
            f"the test runner executed the agent's {first.path} in its own process; "
            f"{len(oracle.report.vouched)} of {oracle.total} outcomes are the judge's own "
            "(recorded before it, or vouched for by a rerun): the rest the agent's code could "
            "have written"
        )
        findings.append(
            Finding(
                code=Code.JUDGE_RUNS_AGENT_CODE, source=Source.TRIAL, item=first.path, evidence=why
            )
        )
    if oracle.report.binary:
        findings.append(
            Finding(
                code=Code.BINARY_VERIFIER,
                source=Source.TRIAL,
                evidence="the verifier wrote only reward.txt",
            )
        )
    if oracle.total == 0 and not oracle.report.binary:
        findings.append(
            Finding(
                code=Code.NO_ASSERTIONS,
                source=Source.TRIAL,
                evidence="the verifier reported no assertions",
            )
        )
    if oracle.agent_s > 0.5 * task.limits.agent_timeout_s:
        findings.append(
            Finding(
                code=Code.SLOW_SOLUTION,
                source=Source.TRIAL,
                evidence=f"the oracle took {oracle.agent_s:.0f}s of the budget",
            )
        )
    if not oracle.resolved:
        # Nothing else is meaningful when the reference solution fails, except whether it
        # always fails: a verdict that changes between plain reruns is a flaky verifier.
        with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
            again = list(pool.map(lambda _: run(task, "oracle"), range(cfg.failing_reruns)))
        runs = [(f"rerun-{i + 1}", r, True, "") for i, r in enumerate(again)]
        flaky = [f for f in flaky_findings(oracle, runs) if f.code == Code.FLAKY_VERIFIER]
        if any(r.resolved for r in again):
            findings = [f for f in findings if f.code != Code.ORACLE_FAILS]
        ev.findings = [*findings, *flaky]
        return ev

    ev.reference = ReferenceVerdict.of(oracle)  # what a trial of the task is paid against

    # effects, outputs, inputs
    units = effect_units(agent.created, agent.deleted)
    share, missed = coverage_share(units, facts, wd)
    m["effects"] = float(len(units))
    m["effect_coverage"] = share
    if units and share < cfg.min_coverage:
        why = f"{len(missed)}/{len(units)} solution effects unchecked, e.g. {missed[:4]}"
        findings.append(Finding(code=Code.LOW_COVERAGE, source=Source.TRIAL, evidence=why))
    inputs = {n: env_image[n] for n in declared_inputs(task) if n in env_image and is_data(n)}
    input_bytes = {p: task.environment.files[n] for n, p in inputs.items()}
    text_inputs = {p: t for p, b in input_bytes.items() if (t := decode(b)) is not None}
    db_inputs = sorted(agent.db_before)
    db_outputs: dict[str, str] = {}  # tables the solution made or changed: {view: text}
    for p in db_inputs:
        db_outputs |= changed_views(p, agent.db_before[p], agent.db_after.get(p, {}))
    db_outputs = dict(list(db_outputs.items())[:20])
    # a database's tables, as text, are data the solution works from like a text input's
    db_texts = {p: "\n".join(agent.db_before[p].values()) for p in db_inputs}
    given = set(env_image.values()) | agent.before  # what existed before the solution ran
    checked = [p for p in agent.created if covered(p, facts, wd) and "/.git/" not in p]
    new_outputs = [p for p in checked if p not in given and not _scratch(p)][:20]
    named = produced_outputs(agent, facts, given, cfg.max_output_bytes)
    named = named[: cfg.max_output_mutants]

    script = solution_text(task)
    mutants = make_mutants(script, cfg.max_mutants)
    budget = min(
        task.limits.agent_timeout_s,
        max(cfg.mutant_timeout_floor_s, cfg.mutant_timeout_factor * oracle.agent_s),
    )
    shuffle = sorted({wd} | {posixpath.dirname(p) for p in named})
    undeclared = [p for p in agent.reads if p not in set(inputs.values()) and not named_in(p, task)]
    # what a cached answer is read from: undeclared data, not the inputs of a named directory
    sources = [p for p in undeclared if is_data(p) and not under_named_dir(p, task)][:20]
    shipped = stale_outputs(agent.created, given, agent.first_open) if cfg.free_reward else []
    oracle_cost = oracle.agent_s + oracle.verifier_s
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        nop_f = pool.submit(run, task, "nop")
        vt = VerifierTraceAgent(verifier_env(task)) if cfg.trace_verifier else None
        vt_f = pool.submit(run, task, _Bounded(vt, budget)) if vt is not None else None
        shipped_f = pool.submit(run, task, StartingStateAgent(shipped)) if shipped else None
        fast = FastClockOracleAgent() if cfg.starved else None
        fast_f = pool.submit(run, task, _Bounded(fast, budget)) if fast is not None else None
        starve_f = None
        if cfg.starved and oracle_cost <= cfg.starve_max_s:
            bound = _Bounded(OracleAgent(), budget / STARVE_SHARE)
            starve_f = pool.submit(run, starved_task(task), bound)
        # a race the static look suspects (a sleep as synchronization), put to the test: the
        # suspected sleeps cut to nothing and every process the verifier starts late
        # (`sleeps-cut`); with no such sleep's seconds known, the CPU quota and every sleep
        # of the verifier a tenth as long (`starved-sleeps`)
        suspect = [f for f in findings if f.code == Code.RACE]
        cut = suspected_sleeps(task, suspect)
        harsh = ConditionAgent(Condition("sleeps", sleeps=True, cut_sleeps=cut))
        harsh_f = None
        if suspect and cut and cfg.starved:
            variant = condition_task(task, "sleeps", sleep_cut_env(cut))
            harsh_f = pool.submit(run, variant, _Bounded(harsh, budget))
        elif suspect and cfg.starved and oracle_cost <= cfg.starve_max_s:
            variant = starved_task(condition_task(task, "sleeps"))
            harsh_f = pool.submit(run, variant, _Bounded(harsh, budget / STARVE_SHARE))
        rerun_fs = [pool.submit(run, task, "oracle") for _ in range(cfg.reruns)]
        cond_fs: list[tuple[ConditionAgent, Future]] = []
        same, same_f = None, None  # the entropy rerun (`entropy_finding`)
        redo: dict[str, Callable[[], tuple[TrialResult, bool, str]]] = {
            f"rerun-{i + 1}": lambda: (run(task, "oracle"), True, "") for i in range(cfg.reruns)
        }  # each rerun once more, for one that timed out
        if cfg.conditions:
            touched = sorted({wd} | {p for p in agent.created if not p.startswith(wd + "/")})
            for c in conditions(shuffle, touched[:200]):
                variant = condition_task(task, c.name)
                ca = ConditionAgent(c)
                cond_fs.append((ca, pool.submit(run, variant, _Bounded(ca, budget))))
                redo[c.name] = partial(_condition_rerun, run, variant, c, budget)
        if cfg.chance:
            same_c = Condition("entropy", entropy=True)
            same = ConditionAgent(same_c)
            same_task = condition_task(task, "entropy")
            same_f = pool.submit(run, same_task, _Bounded(same, budget))
            redo["entropy"] = partial(_condition_rerun, run, same_task, same_c, budget)
        if fast is not None:
            redo["fast-clock"] = partial(_fast_clock_rerun, run, task, budget)
        pert: list[tuple[PerturbedOracleAgent, Future]] = []
        removed_f = None
        if cfg.perturb and (text_inputs or db_inputs) and (new_outputs or db_outputs):
            for mode in PERTURBATIONS:
                given_inputs = {p: input_bytes[p] for p in text_inputs}
                pa = PerturbedOracleAgent(
                    mode, given_inputs, new_outputs, db_inputs, list(db_outputs)
                )
                pert.append((pa, pool.submit(run, task, _Bounded(pa, budget))))
            if sources:  # the undeclared files it read, deleted
                removed = PerturbedOracleAgent(
                    "delete-sources", dict.fromkeys(sources, b""), new_outputs
                )
                removed_f = (removed, pool.submit(run, task, _Bounded(removed, budget)))
        # other records of the same text inputs (their order reversed; every record and every
        # reference between them kept; a database's tables are sets): what the solution
        # answers there (`other_inputs_findings`)
        reorder: tuple[PerturbedOracleAgent, Future] | None = None
        if (
            cfg.perturb and cfg.other_inputs and text_inputs and new_outputs and not db_inputs
            and all(keeps_form(t, reverse_records(t)) for t in text_inputs.values())
        ):  # fmt: skip
            given_inputs = {p: input_bytes[p] for p in text_inputs}
            reordered = PerturbedOracleAgent(REORDER, given_inputs, new_outputs)
            reorder = (reordered, pool.submit(run, task, _Bounded(reordered, budget)))
        hacks = hack_scripts(task.instruction, wd) if cfg.hacks else []
        hack_fs = [(h, pool.submit(run, task, hack_agent(h, cfg.hack_timeout_s))) for h in hacks]
        outs: list[tuple[OutputMutantAgent, Future]] = []
        for p in named:
            for op in OUTPUT_OPS:
                oa = OutputMutantAgent(p, op)
                outs.append((oa, pool.submit(run, task, _Bounded(oa, budget))))
        nop = nop_f.result()
        vt_r = vt_f.result() if vt_f is not None else None
        shipped_r = shipped_f.result() if shipped_f is not None else None
        fast_r = fast_f.result() if fast_f is not None else None
        starve_r = starve_f.result() if starve_f is not None else None
        harsh_r = harsh_f.result() if harsh_f is not None else None
        removed_r = (removed_f[0], removed_f[1].result()) if removed_f is not None else None
        reruns = [f.result() for f in rerun_fs]
        conds = [(ca, f.result()) for ca, f in cond_fs]
        same_r = same_f.result() if same_f is not None else None
        perts = [(pa, f.result()) for pa, f in pert]
        out_results = [(oa, f.result()) for oa, f in outs]
        hack_outs = [hack_outcome(h.name, f.result(), ev.reference) for h, f in hack_fs]
    # other well-formed answers: what the solution writes for perturbed inputs, swapped in
    usable = [(pa, r) for pa, r in perts if r.rewardable]
    swaps: list[tuple[str, dict[str, str], TrialResult]] = []
    if cfg.answer_swaps and usable:
        by_mode = {pa.mode: pa.texts for pa, _ in usable if pa.mode in CONTENT_PERTURBATIONS}
        planned = answer_swaps(agent.outputs, by_mode, new_outputs)
        with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
            futs = [
                (mode, sw, pool.submit(run, task, _Bounded(AnswerSwapAgent(mode, sw), budget)))
                for mode, sw in planned.items()
            ]
            swaps = [(mode, sw, f.result()) for mode, sw, f in futs]
    # the solution's answer for other records: where it runs through yet loses an assertion
    # that checks work, the shipped answer there shows whether the expectation moved with them
    other: list[tuple[Lost, TrialResult]] = []
    if reorder is not None:
        reordered, reorder_f = reorder
        baseline = {p: agent.hashes.get(p) for p in new_outputs}
        shipped_answer = {p: agent.outputs[p] for p in new_outputs if p in agent.outputs}
        lost = lost_on_other_inputs(
            REORDER, oracle, nop, reorder_f.result(), baseline, reordered.hashes
        )
        if lost is not None and all(p in shipped_answer for p, h in baseline.items() if h):
            control = PerturbedOracleAgent(
                REORDER, reordered.inputs, new_outputs, answers=shipped_answer
            )
            other = [(lost, run(task, _Bounded(control, budget)))]
        m["other_inputs_lost"] = float(lost is not None)
    # the assertions the starting state earns that check work: a nop run and the solution's
    # run on a starting state with other data
    worked: list[tuple[str, TrialResult, TrialResult]] = []
    if cfg.free_reward and nop.rewardable and nop.passed and (text_inputs or db_inputs):
        given_inputs = {p: input_bytes[p] for p in text_inputs}
        solved = {pa.mode: r for pa, r in perts}
        with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
            planned_runs = []
            for mode in FORM_KEEPING_PERTURBATIONS:
                idle = PerturbedOracleAgent(mode, given_inputs, [], db_inputs, solve=False)
                solve_f = None  # the shortcut evidence's run on these inputs, where there is one
                if mode not in solved:
                    solve = PerturbedOracleAgent(mode, given_inputs, [], db_inputs)
                    solve_f = pool.submit(run, task, _Bounded(solve, budget))
                planned_runs.append((mode, pool.submit(run, task, idle), solve_f))
            worked = [
                (mode, idle_f.result(), solved[mode] if solve_f is None else solve_f.result())
                for mode, idle_f, solve_f in planned_runs
            ]
    if cfg.free_reward and nop.rewardable and nop.passed:
        # the same for system state the build made (an account, a package, a config): the
        # image built without one of its RUN steps is the other starting state
        dropped, m["dropped_build_steps"] = _dropped_step_runs(task, nop, run, budget, cfg.workers)
        worked += dropped
    watched = {p: agent.hashes.get(p) for p in agent.created[:200]}
    watched |= {p: None for p in agent.deleted[:100]}
    mut = run_mutants(task, mutants, run, cfg.workers, budget, watched)

    # nop and weak verifier
    if nop.rewardable:
        _nop_findings(nop, cfg, m, findings, ev.reference)
    else:
        findings.append(
            Finding(
                code=Code.RERUN_SKIPPED,
                source=Source.INFRA,
                item="nop",
                evidence=f"{nop.failure_mode.value}: {nop.failure_detail[:200]}",
            )
        )
    if cfg.hacks:
        hev = hack_evidence(
            hack_outs, nop if nop.rewardable else None, cfg.hackable_share, ev.reference
        )
        m.update(hev.measures)
        findings += hev.findings
    killed = survived = 0
    mutant_shares: list[float] = []
    for oa, r in out_results:
        item = f"{oa.op} {oa.path}"
        if not r.rewardable:
            findings.append(
                Finding(
                    code=Code.RERUN_SKIPPED,
                    source=Source.INFRA,
                    item=item,
                    evidence=f"{r.failure_mode.value}: {r.failure_detail[:200]}",
                )
            )
            continue
        if not oa.applied:
            continue
        mutant_shares.append(r.passed / r.total if r.total else 0.0)
        m[f"output_mutant_share.{item}"] = mutant_shares[-1]  # graded, beside the kill
        if r.resolved:
            survived += 1
            why = f"every assertion passes after {oa.op} of {oa.path}, an output it names"
            findings.append(
                Finding(code=Code.WEAK_VERIFIER, source=Source.TRIAL, item=item, evidence=why)
            )
        else:
            killed += 1
            failing = [a.name for a in r.assertions if not a.ok][:3]
            findings.append(
                Finding(
                    code=Code.MUTANT_KILLED,
                    source=Source.TRIAL,
                    item=item,
                    evidence=f"passes {r.passed}/{r.total}; "
                    f"fails {failing or [r.failure_mode.value]}",
                )
            )
    if killed + survived:
        m["output_mutants"] = float(killed + survived)
        m["output_kill_rate"] = killed / (killed + survived)
        m["output_mutant_pass_share"] = sum(mutant_shares) / len(mutant_shares)
    findings += swap_findings(swaps)
    if shipped_r is not None and nop.rewardable:
        findings += free_reward_findings(nop, shipped_r, shipped)
    findings += worked_for_findings(nop, worked)
    m["mutants"] = float(mut.total)
    m["equivalent_mutants"] = float(mut.equivalent)
    if mut.kill_rate is not None:
        m["mutation_kill_rate"] = mut.kill_rate
        if mut.kill_rate < cfg.min_kill_rate:
            why = f"only {mut.killed}/{mut.total} solution step mutants fail the verifier"
            findings.append(
                Finding(
                    code=Code.WEAK_VERIFIER,
                    source=Source.TRIAL,
                    item="steps",
                    evidence=f"{why}; survivors: {mut.survivors[:3]}",
                )
            )
    for e in mut.errors:
        findings.append(
            Finding(code=Code.RERUN_SKIPPED, source=Source.INFRA, item="step mutant", evidence=e)
        )

    # flaky verifier
    runs = [(f"rerun-{i + 1}", r, True, "") for i, r in enumerate(reruns)]
    runs += [(ca.condition.name, r, ca.applied, ca.detail) for ca, r in conds]
    if fast is not None and fast_r is not None:
        runs.append(("fast-clock", fast_r, fast.applied, fast.detail))
    if starve_r is not None:
        slow = starve_r.failure_mode in (FailureMode.AGENT_TIMEOUT, FailureMode.VERIFIER_TIMEOUT)
        why = f"CPU quota {STARVE_SHARE:g} of the task's CPUs"
        runs.append(("starved", starve_r, not slow, why + (": timed out" if slow else "")))
    if harsh_r is not None:
        slow = harsh_r.failure_mode in (FailureMode.AGENT_TIMEOUT, FailureMode.VERIFIER_TIMEOUT)
        why = harsh.detail if cut else f"CPU quota {STARVE_SHARE:g}, {harsh.detail}"
        why += f"; the suspected race: {suspect[0].item}: {suspect[0].evidence[:120]}"
        why += ": timed out" if slow else ""
        runs.append(
            ("sleeps-cut" if cut else "starved-sleeps", harsh_r, harsh.applied and not slow, why)
        )
    if starve_r is None and cfg.starved:
        why = f"the oracle took {oracle_cost:.0f}s; starved runs are for tasks under "
        why += f"{cfg.starve_max_s:g}s"
        findings.append(
            Finding(code=Code.RERUN_SKIPPED, source=Source.TRIAL, item="starved", evidence=why)
        )
    if same is not None and same_r is not None:
        # a verdict decided by chance: plain reruns look for the reference failing by chance
        [(_, same_r, applied, detail)] = retry_timeouts(
            oracle, [("entropy", same_r, same.applied, same.detail)], redo, 1
        )
        chance = entropy_finding(oracle, same_r, applied, detail)
        findings.append(chance)
        if chance.code in (Code.STOCHASTIC_VERDICT, Code.RERUN_STABLE):
            m["stochastic_verdict"] = float(chance.code == Code.STOCHASTIC_VERDICT)
        if chance.code == Code.STOCHASTIC_VERDICT and cfg.chance_reruns:
            n = chance_rerun_count(cfg.chance_reruns, cfg.chance_budget_s, oracle_cost)
            with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
                again = list(pool.map(lambda _: run(task, "oracle"), range(n)))
            why = "the verdict depends on chance; plain rerun"
            runs += [
                (f"chance-{i + 1}", r, True, f"{why} {i + 1} of {n}") for i, r in enumerate(again)
            ]
            redo |= {f"chance-{i + 1}": lambda: (run(task, "oracle"), True, "") for i in range(n)}
            m["chance_reruns"] = float(n)
    runs = retry_timeouts(oracle, runs, redo, cfg.workers)
    runs = [_clock_control(run, task, budget, oracle, entry) for entry in runs]
    flaky = flaky_findings(oracle, runs)
    findings += flaky
    m["reruns"] = float(sum(f.code != Code.RERUN_SKIPPED for f in flaky))
    m["rerun_stable"] = 0.0 if any(f.code == Code.FLAKY_VERIFIER for f in flaky) else 1.0

    # expected values in what the build wrote (caches, repositories, archives)
    built = built_texts(agent.built)
    m["built_files"] = float(len(agent.built))
    given_built = {w for w in built if given_view(w, task)}
    answers_ = [lit for lit in facts.literals if lit.kind in ANSWER_KINDS]
    covered_ = {
        v.literal.value for v in facts.coverage if v.covered and v.where == "instruction.md"
    }
    answers_ = [lit for lit in answers_ if lit.value not in covered_]
    for value, _where, why in value_leaks(answers_, built, given_built):
        findings.append(
            Finding(code=Code.TEST_LEAKAGE, source=Source.TRIAL, item=value, evidence=why)
        )

    # what the verifier checked and connected to, traced in the oracle's sandbox
    verifier_net: list[str] = []
    if vt is not None and vt.trace is not None:
        m["verifier_traced"] = 1.0
        spelled = "\n".join(t for t in verifier_texts(task).values())
        env_texts = {n: t for n, b in task.environment.files.items() if (t := decode(b))}
        static_items = {f.item for f in findings if f.code == Code.HIDDEN_REQUIREMENT}
        findings += [
            f
            for f in runtime_hidden(vt.trace, task, agent.created, given, env_texts, spelled)
            if f.item not in static_items
        ]
        verifier_net = network_use(vt.trace)
    elif vt is not None:
        why = vt.detail or (f"{vt_r.failure_mode.value}" if vt_r is not None else "no trace")
        findings.append(
            Finding(
                code=Code.RERUN_SKIPPED, source=Source.INFRA, item="verifier trace", evidence=why
            )
        )
    findings += network_findings(verifier_net, agent.network)

    # what the traced solution read that neither the instruction nor the inputs declare
    m["solution_traced"] = 1.0 if agent.traced else 0.0
    for p in undeclared[:20]:
        why = "the reference solution read it (traced); the instruction names it nowhere"
        findings.append(Finding(code=Code.SOLUTION_READ, source=Source.TRIAL, item=p, evidence=why))
    if cfg.trace and not agent.traced:
        findings.append(
            Finding(
                code=Code.RERUN_SKIPPED,
                source=Source.INFRA,
                item="trace",
                evidence=agent.trace_detail,
            )
        )

    # shortcut and computed values visible to the agent
    if usable:
        baseline = {p: agent.hashes.get(p) for p in new_outputs}
        baseline |= {v: view_hash(t) for v, t in db_outputs.items()}
        perturbed = {pa.mode: pa.hashes for pa, _ in usable}
        texts = {p: agent.outputs[p] for p in new_outputs if p in agent.outputs} | db_outputs
        asserted = [lit.value for lit in facts.literals]
        tracks = verifier_tracks_inputs(
            baseline,
            [(pa.mode, pa.hashes, r.resolved) for pa, r in usable],
        )
        cache = {p: t for p, t in agent.read_texts.items() if p in undeclared}
        findings += shortcut_findings(
            baseline,
            perturbed,
            texts,
            script,
            task.instruction,
            text_inputs | db_texts,
            asserted,
            tracks,
            cache,
            (sources, removed_r[0].hashes)
            if removed_r is not None and removed_r[1].rewardable
            else None,
            (set(inputs.values()) | set(db_inputs)) & set(agent.first_open)
            if agent.traced
            else None,
        )
        computed = computed_tokens(texts, {pa.mode: pa.texts for pa, _ in usable})
        visible = readable_texts(task) | built
        given_channels = given_containers(task)
        solution_opened = set(agent.first_open) if agent.traced else None
        used = inputs_used(inputs, solution_opened, agent.deleted)
        input_where = {f"environment/{n}" for n in used} | given_built
        input_where |= {w for w in visible if container_of(w) in given_channels}
        findings += answer_leaks(computed, texts, visible, input_where)
        if solution_opened is not None:
            findings += given_expectations(
                facts.coverage, script, tracks, env_image, solution_opened
            )
        by_mode = {pa.mode: pa.texts for pa, _ in usable}
        findings += oracle_answers(texts, by_mode, visible, asserted)  # what no repair states
    if agent.traced:  # an answer the task ships where the solution never looked
        files = task.environment.files
        image_texts = {p: t for n, p in env_image.items() if n in files and (t := decode(files[n]))}
        unread = {p for p in image_texts if p not in agent.first_open and not named_in(p, task)}
        written = {p: agent.outputs[p] for p in checked if p in agent.outputs}
        findings += shipped_answers(written, image_texts, task.instruction, unread)
    findings += other_inputs_findings(other)
    m["solution_steps"] = float(len(solution_steps(script)[0]))
    ev.findings = _dedupe(findings)
    return ev


_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:[\w.+-]+/)*[\w.+-]*\w")


def named_in(path: str, task: Task) -> bool:
    """Does the instruction name `path` (absolute, relative to the workdir, or by a
    distinctive file name)?"""
    wd = task.environment.workdir.rstrip("/")
    base = posixpath.basename(path)
    forms = [path]
    if path.startswith(wd + "/"):
        forms.append(path[len(wd) + 1 :])
    if len(base) >= 5 and "." in base:
        forms.append(base)
    return any(
        re.search(rf"(?<![\w/.-]){re.escape(f)}(?![\w-]|\.\w)", task.instruction) for f in forms
    )


_TIMEOUTS = (FailureMode.AGENT_TIMEOUT, FailureMode.VERIFIER_TIMEOUT)


def chance_rerun_count(most: int, budget_s: float, trial_s: float) -> int:
    """How many plain reruns look for a reference failing by chance (pure): `most`, fewer
    where the trials would take more than `budget_s` (a trial's solution and verifier, and
    about 2 s to start and stop its sandbox), never none where any were asked for."""
    per_trial = max(trial_s, 1.0) + 2.0
    return min(most, max(1, int(budget_s / per_trial)))


def retry_timeouts(
    base: TrialResult,
    runs: list[tuple[str, TrialResult, bool, str]],
    again: dict[str, Callable[[], tuple[TrialResult, bool, str]]],
    workers: int,
) -> list[tuple[str, TrialResult, bool, str]]:
    """Reruns that timed out where the base run did not are run once more, and the retry
    counts: a timeout on a loaded machine is the machine's, not a verdict (measured: clean
    controls called flaky at load 30-60 on 2 cores); one that times out again stays."""
    todo = [
        i
        for i, (name, r, _, _) in enumerate(runs)
        if name in again and r.failure_mode in _TIMEOUTS and base.failure_mode not in _TIMEOUTS
    ]
    if not todo:
        return runs
    with ThreadPoolExecutor(max_workers=workers) as pool:
        redone = list(pool.map(lambda i: again[runs[i][0]](), todo))
    out = list(runs)
    for i, (r, applied, detail) in zip(todo, redone, strict=True):
        name, first = runs[i][0], runs[i][1]
        why = f"the first run hit {first.failure_mode.value}; retried once"
        out[i] = (name, r, applied, f"{detail}; {why}" if detail else why)
    return out


def _dropped_step_runs(
    task: Task, nop: TrialResult, run: Runner, budget: float, workers: int
) -> tuple[list[tuple[str, TrialResult, TrialResult]], float]:
    """(mode, nop run, solution run) on the image built without each of its last RUN steps
    (`audit.build_steps`), and how many steps were dropped; the solution runs only where the
    nop run lost an assertion it passes on the shipped image (nothing to tell apart
    otherwise). A variant that does not build is a run that is not rewardable, which no
    finding reads."""
    passed = {assertion_key(a.name) for a in nop.assertions if a.ok}
    variants = [(s.mode, without_step(task, s)) for s in dropped_steps(dockerfile_of(task))]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        idle = [(mode, v, pool.submit(run, v, "nop")) for mode, v in variants]
        planned = []
        for mode, v, f in idle:
            r = f.result()
            lost = r.rewardable and any(
                assertion_key(a.name) in passed and not a.ok for a in r.assertions
            )
            if lost:
                planned.append((mode, r, pool.submit(run, v, _Bounded(OracleAgent(), budget))))
        return [(mode, r, f.result()) for mode, r, f in planned], float(len(variants))


def _condition_rerun(run: Runner, variant: Task, c, budget: float) -> tuple[TrialResult, bool, str]:
    ca = ConditionAgent(c)
    r = run(variant, _Bounded(ca, budget))
    return r, ca.applied, ca.detail


def _clock_control(
    run: Runner,
    task: Task,
    budget: float,
    base: TrialResult,
    entry: tuple[str, TrialResult, bool, str],
) -> tuple[str, TrialResult, bool, str]:
    """A fast-clock rerun whose verdict changed, against its control: the same library
    preloaded with the clock at its real rate. Where the control changes the verdict as well,
    the library broke the solution (tools that switch users refuse it), not the clock's
    rate: the rerun is set aside (`rerun_skipped`), never a flaky verifier."""
    name, r, applied, detail = entry
    if name != "fast-clock" or not applied or not r.rewardable or not verdict_changed(base, r):
        return entry
    control = run(task, _Bounded(FastClockOracleAgent(rate=1), budget))
    if control.rewardable and verdict_changed(base, control):
        why = f"{detail}: the library at the real clock rate changes the verdict as well (the "
        why += "change is the library's, not the clock's)"
        return name, r, False, why
    return entry


def _fast_clock_rerun(run: Runner, task: Task, budget: float) -> tuple[TrialResult, bool, str]:
    fast = FastClockOracleAgent()
    r = run(task, _Bounded(fast, budget))
    return r, fast.applied, fast.detail


def _nop_findings(
    nop: TrialResult,
    cfg: ExecConfig,
    m: dict,
    findings: list[Finding],
    reference: ReferenceVerdict | None = None,
) -> None:
    """Nop's free reward, paid as a trainer pays it (against the `reference` verdict)."""
    paid = nop.pay(reference)
    m["nop_pass_share"] = len(paid.passed) / paid.total if paid.total else 0.0
    if paid.total and len(paid.passed) == paid.total:
        findings.append(
            Finding(
                code=Code.NOP_PASSES,
                source=Source.TRIAL,
                evidence="a nop run passes every assertion",
            )
        )
    if paid.total and m["nop_pass_share"] > cfg.nop_weak_share:
        why = f"a nop run passes {len(paid.passed)}/{paid.total} assertions (free reward)"
        findings.append(
            Finding(code=Code.LOW_COVERAGE, source=Source.TRIAL, item="nop", evidence=why)
        )


def _hack_findings(
    task: Task, run: Runner, cfg: ExecConfig, nop: TrialResult, m: dict
) -> list[Finding]:
    """The hack trials for a task without a reference solution (run one after another)."""
    if not cfg.hacks:
        return []
    outs = [
        hack_outcome(h.name, run(task, hack_agent(h, cfg.hack_timeout_s)))
        for h in hack_scripts(task.instruction, task.environment.workdir)
    ]
    hev = hack_evidence(outs, nop, cfg.hackable_share)
    m.update(hev.measures)
    return hev.findings


def _discoverable(findings: list[Finding], found: set[str]) -> list[Finding]:
    """Hidden requirements the probe found in the initial environment are discoverable."""
    out = []
    for f in findings:
        if f.code == Code.HIDDEN_REQUIREMENT and f.item in found:
            why = "not stated, but present in the initial environment (found by a probe)"
            out.append(
                Finding(code=Code.DISCOVERABLE, source=Source.TRIAL, item=f.item, evidence=why)
            )
        else:
            out.append(f)
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))


def reaudit_evidence(parent: ExecEvidence, task: Task) -> ExecEvidence:
    """Evidence for an instruction-only repair of `parent`'s task: the trial measurements carry
    over (environment, solution and verifier are unchanged); every static, instruction-
    dependent finding is recomputed on the new instruction."""
    st = static_findings(task)
    found = {f.item for f in parent.findings if f.code == Code.DISCOVERABLE}
    static = _discoverable(st.findings, found)
    kept = [f for f in parent.findings if f.source != Source.STATIC and f.code != Code.DISCOVERABLE]
    ev = ExecEvidence(
        task_hash=task.content_hash,
        measures=dict(parent.measures),
        findings=_dedupe([*static, *kept]),
        reference=parent.reference,
    )
    ev.measures["alignment_share"] = alignment_share(ev.findings)
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
    elif codes & {Code.WALL_CLOCK, Code.RACE, Code.NETWORK_USE, Code.STOCHASTIC_VERDICT}:
        fairness = 0.8
    keys = ("effect_coverage", "mutation_kill_rate", "output_kill_rate")
    parts = [v for k in keys if (v := m.get(k)) is not None]
    if (gain := m.get("hack_gain")) is not None:
        parts.append(1.0 - gain)  # graded: the share a scripted hack earns beyond nop
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
