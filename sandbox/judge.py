"""The judge: how a verifier run becomes a trial's verdict (docs/sandbox.md, "The judge").

The judge is independent of the judged. Its trust domain, by construction:

1. **A fresh sandbox.** The verifier runs in a new sandbox made from the task's image, never in
   the agent's. What the agent produced enters as data: the task's declared output paths
   (`outputs_of`: `Task.outputs`, default the working directory, plus `trusted_paths`) are
   copied from the agent's sandbox as directories, regular files and symbolic links (no
   device, FIFO or socket; no setuid or setgid bit, no extended attribute; no link into the
   judge's own places, `carried_link`), owned by the agent's uid (AGENT_UID). Everything
   else (apt, pip and git configuration, env files, profiles, PATH directories, /etc/hosts,
   the loader) is the image's.
2. **The agent's domain.** The entry script, the test runner, the report key and the report
   directory are the verifier's user (root unless the task names one); /logs/verifier is that
   user's alone (mode 0700). The test runners that speak the report channel (pytest, the
   seeds' runner) start every program in the agent's domain (sandbox/verdict_plugin.py): a
   Landlock domain that cannot read /logs or the held-out tests, writes only in the outputs
   and scratch places (/tmp, /dev) and there makes no link and moves nothing between
   directories, and cannot trace the judge's processes or reach them through /proc (a
   signal to them only costs the agent its trial); as AGENT_UID where the kernel has no
   Landlock. In them no module, conftest or configuration file the agent
   wrote stands in for the image's.
3. **No reach between processes.** The verifier phase refuses ptrace, process_vm_writev and
   pidfd_getfd (sandbox.seccomp.VERIFIER_REFUSED); its entry script is the first process of its
   own PID namespace, so its whole process tree ends with it, before the report is read.
4. **The verdict is the runner's.** `read_verdict`: the report channel's authenticated records
   when a test runner opened it (with the runner's marks of the agent's code it executed),
   else the report directory (every format: only the judge writes there) and pytest's
   summary on the entry script's output.
5. **Infrastructure only when proven.** A verifier that did not run (its sandbox could not
   start twice from the same outputs, its entry was killed, its runner's records never
   closed) is run once more on the pristine image, with no outputs (`prove`, cached per task
   and backend): if that run judges within its time limit, the agent caused the failure (a
   failed attempt, reward 0, the reason recorded); if not, the verifier is broken
   (`verifier_error`). No exit status decides who caused it.

6. **Reruns without the agent's code.** A test that ran code of the agent's in the runner's
   own process (`agent_code`, with the test it ran in) makes every outcome after it the
   agent's. Where that code is a module of the agent's, the verifier runs again with the
   agent's modules in a process of their own, only values crossing (sandbox/
   verdict_isolate.py): each outcome that run records as its own, agreeing with the first
   run, is vouched for (`vouch_isolated`). What is left runs again, in a fresh sandbox from
   the same outputs, without that test (`rerun_without`), until a run's outcomes are all its
   own or its mark falls outside any test (collection), within the verifier's time limit:
   each outcome is taken from the first run that recorded it before it ran the agent's code
   (`merge_reruns`). Not where the agent's processes live on through the verifier, nor after
   a run that changed the agent's own copy of an output (the local backend moves the files,
   `VerifierRun.outputs_changed`).

What stays outside, said plainly: a program the entry *script* runs itself (not through a test
runner) runs as the judge, so it can write the report (the audit's `forge_reports` hack
measures which tasks that leaves forgeable); code of the agent's that the tests run in the
runner's own process (a module in the first run; source they compile themselves, a pickle, in
every run) runs there, marked in the verdict before it runs (`agent_code`: no reward for an
outcome after it that no rerun vouches for, and the audit keeps a task whose reference
verdict keeps such outcomes out of T1).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sandbox.base import (
    AGENT_GID,
    AGENT_UID,
    TESTS_GID,
    DiskFull,
    Sandbox,
    SandboxError,
    VerifierRun,
    VerifierSpec,
    normalize_dest,
)
from sandbox.git_guards import GUARD_FILES, fixed_env
from sandbox.policy import network_policy
from sandbox.verdict_channel import CHANNEL_DIR, Channel, RecordsStatus, open_channel
from tasks.literals.model import RUNNER
from tasks.model import VERIFIER_VENV, Task, trusted_path_problem
from tasks.reports import CHECKRUNNER_SOURCE, collect_report
from tasks.results import (
    AgentCode,
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    TrialResult,
    VerifierReport,
)

TESTS_DIR = "/tests"
REPORT_DIR = "/logs/verifier"
# Fixed parts of every verifier's environment (the image's ENV and the task's verifier env come
# first; these win): no user site directory, no bytecode written into the agent's tree.
VERIFIER_ENV = {"PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# git run by the verifier in the agent's repositories ignores programs the agent configured
# there (sandbox.git_guards): the settings here, the programs they name staged with the tests,
# the drivers the agent named added by the backend from the configuration it copies.
GIT_GUARD_DIR = ".t1-git"  # under /tests
VERIFIER_ENV |= fixed_env(f"{TESTS_DIR}/{GIT_GUARD_DIR}")
# What an audit rerun condition stages for every program of the verifier (the script every
# bash sources, the libraries it preloads, a locale): a program of the agent's that a test runs
# is under the condition too (its clock shifted with the test's), and its bash finds the script
# it is told to source (held out, bash said "Permission denied" on the program's stderr).
CONDITION_DIR = ".t1-condition"  # under /tests
# What the harness stages beside the task's tests for every program of the verifier, the
# agent's too (the channel's loader, git's guard scripts, a rerun condition's files): the rest
# of TESTS_DIR is held out from the agent's programs (sandbox.verdict_plugin, the agent's domain).
SHARED_TESTS_DIRS = (CHANNEL_DIR, GIT_GUARD_DIR, CONDITION_DIR)
SIGNAL_EXIT_CODES = range(129, 129 + 64)  # 128 + N: the entry (or its last command) was killed
# The seeds' runner as stored in tasks before it spoke the report channel (sha256): the current
# one, which runs the same checks and writes the same files, is staged in its place.
CHECKRUNNER_EARLIER = frozenset(
    {"8b475d20dea32c60f0b97273ad0de902acb573d1c2841c110ac50f9d0483f821"}
)


@dataclass(frozen=True)
class Staged:
    """One entry of the tests directory as the judge stages it (root's): `rel` below TESTS_DIR
    ("" for the directory itself), its bytes (None: a directory), its mode, and whether it is
    held out from the agent (in `tests_group`) or shared with every program (root's group)."""

    rel: str
    data: bytes | None
    mode: int
    held: bool


def tests_group(verifier_ids: tuple[int, int]) -> int:
    """The group the held-out tests belong to: the verifier's user's own (it reads them
    through it) or, for root, TESTS_GID. A program of the task's runs with it as its
    effective group where the kernel has no Landlock (sandbox.verdict_plugin reads it from the
    tests directory)."""
    return TESTS_GID if verifier_ids[0] == 0 else verifier_ids[1]


def tests_layout(files: dict[str, bytes]) -> list[Staged]:
    """The tests directory with modes that hold it out from the agent's uid by themselves
    (where the kernel has no Landlock, the agent's programs run as that uid): the directory
    0751 (others may pass through it, not list it), held-out directories 0750 and files 0640
    (0750 for scripts), in `tests_group`; SHARED_TESTS_DIRS 0755 / 0644 for every program.
    Root's, so that no verifier user writes there (a conftest.py its build left would be
    collected). Parents before children. Pure."""
    out = [Staged("", None, 0o751, True)]
    dirs: set[str] = set()
    for rel in sorted(files):
        parts = normalize_dest(TESTS_DIR, rel)[len(TESTS_DIR) + 1 :].split("/")  # no escape
        shared = parts[0] in SHARED_TESTS_DIRS
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in dirs:
                dirs.add(d)
                out.append(Staged(d, None, 0o755 if shared else 0o750, not shared))
        script = 0o111 if rel.endswith(".sh") else 0
        mode = (0o644 | script) if shared else (0o640 | (script & 0o110))
        out.append(Staged("/".join(parts), files[rel], mode, not shared))
    return out


def outputs_of(task: Task) -> tuple[str, ...]:
    """The agent's paths the verifier sees: the task's outputs (default its working
    directory) and its trusted paths. Only absolute, normalized paths below / (the task
    model's rule, checked again: a task made in code skips its validators), so none names
    a place outside the sandbox once joined to a host path (`/../../tmp/victim`); never the
    verifier's own toolchain (`carried_path`)."""
    paths = [*(task.outputs or [task.environment.workdir]), *task.trusted_paths]
    norm = dict.fromkeys(p.rstrip("/") or "/" for p in paths)
    return tuple(p for p in norm if trusted_path_problem(p) is None and carried_path(p))


def carried_path(path: str) -> bool:
    """Whether the agent's entry at `path` (absolute) may be carried: anything but the
    verifier's own toolchain (VERIFIER_VENV and below), which stays the image's whatever the
    outputs name (a trusted /usr or /usr/lib never brings the agent's copy of it), and but the
    bytecode Python cached beside the agent's sources (`__pycache__`): a module runs as its
    source says, not as a cache entry with the same size and second says (an audit mutant of a
    compiled module was not run). A `.pyc` with no source beside it is carried (and marked)."""
    if "__pycache__" in path.split("/"):
        return False
    return not (path == VERIFIER_VENV or path.startswith(VERIFIER_VENV + "/"))


def holds_verifier_venv(path: str) -> bool:
    """Whether the output `path` is a directory above VERIFIER_VENV."""
    return VERIFIER_VENV.startswith(path.rstrip("/") + "/")


def carried_mode(st_mode: int) -> int | None:
    """The mode an entry of the agent's outputs gets in the verifier's sandbox, None when it is
    not carried (not a directory, regular file or link): permission bits and the sticky bit,
    a directory's setgid bit (group inheritance, no privilege), never a file's setuid or
    setgid bit."""
    if not (stat.S_ISDIR(st_mode) or stat.S_ISREG(st_mode) or stat.S_ISLNK(st_mode)):
        return None
    return stat.S_IMODE(st_mode) & (0o3777 if stat.S_ISDIR(st_mode) else 0o1777)


# Where a carried link may not lead, nor above (`/`): the judge's own places (the held-out
# tests, the report directory) and the kernel's views of the process that follows the link
# (/proc's `self/root`, `self/fd`; /sys). The runner follows what is carried, so a link there
# would read the judge's files for the agent.
LINK_FORBIDDEN = (TESTS_DIR, posixpath.dirname(REPORT_DIR), "/proc", "/sys")
# In /dev a link may name a device (`/dev/null`: a masked service), never a directory below
# it nor one of the links the OCI runtime makes there into /proc (the follower's fds).
DEV_LINKS_TO_PROC = frozenset({"fd", "stdin", "stdout", "stderr", "core"})


def carried_link(place: str, target: str) -> bool:
    """Whether the agent's link at `place` (absolute) to `target` is carried into the judge.
    Decided on the text, as the kernel resolves it from the link's directory (a real one): a
    target may climb first (`../pkg/bin/cli.js`), never after a name, which could be a link
    (`d/u/../tests` with `d/u -> /usr`); where it ends must not lie in or above a
    LINK_FORBIDDEN place (`/tests/test_outputs.py`, `r -> /`, `/proc/self/root/tests`).
    What is carried stays where it is while the tests run (the agent's programs may neither
    make links nor move them between directories: sandbox.verdict_plugin), so the climb
    decided here is the one the runner follows. A link through a link of the image's is the
    task's affair (its image is trusted)."""
    named = False
    for part in target.split("/"):
        if part == "..":
            if named:
                return False
        elif part not in ("", "."):
            named = True
    end = posixpath.normpath(posixpath.join(posixpath.dirname(place), target))
    if any(within(end, top) or within(top, end) for top in LINK_FORBIDDEN):
        return False
    if within(end, "/dev"):
        name = end[len("/dev/") :]
        return bool(name) and "/" not in name and name not in DEV_LINKS_TO_PROC
    return True


def within(path: str, top: str) -> bool:
    """Whether the absolute, normalized `path` is `top` or below it."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def verifier_env(task: Task) -> dict[str, str]:
    return {**task.verifier_config.env, "TEST_DIR": TESTS_DIR, **VERIFIER_ENV}


# On the host: "off" runs every verifier as on a kernel without Landlock (the agent's programs
# then held by its uid and the tests' modes alone): to measure that fallback on a host that has it.
JUDGE_LANDLOCK_ENV = "T1_JUDGE_LANDLOCK"


def judge_landlock() -> bool:
    return os.environ.get(JUDGE_LANDLOCK_ENV, "") != "off"


def verifier_spec(
    task: Task,
    channel: Channel,
    workdir: str,
    outputs: tuple[str, ...],
    landlock: bool = True,
    without: tuple[str, ...] = (),
    isolate: bool = False,
) -> VerifierSpec:
    """What a backend needs to run the task's verifier as the judge (pure); without
    `landlock` its runners hold the agent's programs as on a kernel that has none; `without`:
    the tests its pytest leaves out (they ran the agent's code in an earlier run); `isolate`:
    its runners execute the agent's modules in a process of their own."""
    tests = {**task.verifier, **{f"{GIT_GUARD_DIR}/{n}": b for n, b in GUARD_FILES.items()}}
    shipped = tests.get(RUNNER)
    if shipped is not None and hashlib.sha256(shipped).hexdigest() in CHECKRUNNER_EARLIER:
        tests[RUNNER] = CHECKRUNNER_SOURCE
    env = {
        **verifier_env(task),
        **channel.env(REPORT_DIR),
        "T1_AGENT_IDS": f"{AGENT_UID}:{AGENT_GID}",
        "T1_AGENT_OUTPUTS": ":".join(outputs),
        "T1_HELD_OUT": TESTS_DIR,
        "T1_HELD_OUT_SHARED": ":".join(f"{TESTS_DIR}/{d}" for d in SHARED_TESTS_DIRS),
        **({} if landlock else {"T1_LANDLOCK": "off"}),
        **({"T1_DESELECT": "\n".join(without)} if without else {}),  # the plugin leaves them out
        **({"T1_ISOLATE": "1"} if isolate else {}),
    }
    return VerifierSpec(
        tests={**tests, **channel.files()},
        report_files=channel.report_files(),
        command=channel.command(f"exec bash {TESTS_DIR}/test.sh", TESTS_DIR),
        timeout_s=task.limits.verifier_timeout_s,
        cwd=workdir,
        env=env,
        user=task.verifier_config.user or "",
        network=network_policy(task, task.verifier_config),
        keep_agent_processes=task.keep_agent_processes,
        outputs=outputs,
    )


@dataclass(frozen=True)
class Verdict:
    """What a verifier run says. `ran` False: the verifier did not run to its end (its sandbox
    did not start, its entry was killed, its runner's records never closed): `detail` says
    why, and only `prove` decides whose failure that is."""

    report: VerifierReport
    failure_mode: FailureMode = FailureMode.NONE
    detail: str = ""
    ran: bool = True


def failed_attempt(why: str) -> VerifierReport:
    """The report of a failed attempt without one: a single failed `verifier` assertion, so
    the trial scores 0, counts as an attempt and is never resolved."""
    verdict = AssertionResult(name="verifier", status=AssertionStatus.FAILED, message=why)
    return VerifierReport(assertions=[verdict], source=ReportSource.REWARD, reward=0.0)


def read_verdict(run: VerifierRun, channel: Channel) -> Verdict:
    """The verdict of one verifier run (pure; the rules in the module docstring)."""
    r = run.result
    tail = (r.stdout + r.stderr)[-300:].strip().replace("\n", " | ")
    if run.disk_full:
        return Verdict(VerifierReport(), FailureMode.DISK_LIMIT, "the sandbox's disk was full")
    if r.timed_out:
        return Verdict(VerifierReport(), FailureMode.VERIFIER_TIMEOUT, "the verifier timed out")
    if r.oom_killed:
        return Verdict(
            VerifierReport(), FailureMode.OUT_OF_MEMORY, "verifier killed by the OOM killer"
        )
    if channel.loaded(run.files):
        records = channel.verdict(run.files)
        if records.status == RecordsStatus.VERIFIED:
            return Verdict(records.report.model_copy(update={"authenticated": True}))
        if records.status == RecordsStatus.FORGED:
            report = VerifierReport(source=records.report.source, parse_error=records.detail)
            return Verdict(report, FailureMode.TAMPERED, records.detail)
        return Verdict(
            VerifierReport(), detail=f"its test runner did not finish: {records.detail}", ran=False
        )
    if r.exit_code in SIGNAL_EXIT_CODES:
        return Verdict(
            VerifierReport(),
            detail=f"its entry was killed by signal {r.exit_code - 128}",
            ran=False,
        )
    report = collect_report(run.files, r.stdout)
    if report.assertions and not report.parse_error:
        return Verdict(report)
    if report.source != ReportSource.NONE:
        detail = report.parse_error or f"the {report.source.value} report lists no assertions"
        return Verdict(report, FailureMode.PARSE_ERROR, detail)
    why = f"no report (exit {r.exit_code}): {tail}"
    return Verdict(failed_attempt(why), detail=why)


@dataclass(frozen=True)
class Proof:
    """Whether the verifier runs on the task's pristine image (no outputs of an agent)."""

    runs: bool
    detail: str = ""


_PROOFS: dict[tuple[str, str], Proof] = {}
_PROOF_LOCK = threading.Lock()


def prove(task: Task, backend: str, open_pristine: Callable[[], Sandbox]) -> Proof:
    """Run the verifier once on a fresh sandbox of the task's image with none of an agent's
    outputs (cached per task and backend). A sandbox that cannot be opened raises
    SandboxError (the harness's failure, not cached)."""
    key = (task.content_hash, backend)
    with _PROOF_LOCK:
        if key in _PROOFS:
            return _PROOFS[key]
    sandbox = open_pristine()
    try:
        verdict, _ = run_verifier(sandbox, task, outputs=())
    finally:
        sandbox.stop()
    # run to its end: a verifier that times out on the image puts nothing on the agent
    proof = Proof(
        verdict.ran and verdict.failure_mode != FailureMode.VERIFIER_TIMEOUT, verdict.detail
    )
    with _PROOF_LOCK:
        _PROOFS[key] = proof
    return proof


def run_verifier(
    sandbox: Sandbox,
    task: Task,
    outputs: tuple[str, ...],
    without: tuple[str, ...] = (),
    isolate: bool = False,
) -> tuple[Verdict, VerifierRun | None]:
    """The task's verifier in a fresh sandbox of `sandbox`'s image with `outputs` of it, and
    its verdict (a sandbox that did not start is a verifier that did not run; a full disk,
    the agent's doing, is DISK_LIMIT); `without`: tests its pytest leaves out; `isolate`:
    the agent's modules run in a process of their own."""
    channel = open_channel()
    spec = verifier_spec(
        task, channel, sandbox.workdir, outputs, judge_landlock(), without, isolate
    )
    try:
        run = sandbox.verify(spec)
    except DiskFull as e:
        return Verdict(VerifierReport(), FailureMode.DISK_LIMIT, str(e)), None
    except SandboxError as e:
        return Verdict(VerifierReport(), detail=f"its sandbox did not start: {e}", ran=False), None
    return read_verdict(run, channel), run


def judge(
    sandbox: Sandbox,
    task: Task,
    result: TrialResult,
    *,
    backend: str = "",
    open_pristine: Callable[[], Sandbox] | None = None,
) -> None:
    """End the agent phase of `sandbox` and judge it: the verifier in its own fresh sandbox,
    the verdict into `result` (failure mode, detail, report, verifier fields). Without
    `open_pristine`, a verifier that did not run is `verifier_error` unproven."""
    t0 = time.monotonic()
    verdict, run = run_verifier(sandbox, task, outputs_of(task))
    if run is None and not verdict.ran:  # its sandbox did not start: once more before a proof
        verdict, run = run_verifier(sandbox, task, outputs_of(task))  # (a start the harness
        # lost under load is not the agent's failure; one the agent causes fails again)
    if run is not None and verdict.ran and verdict.failure_mode == FailureMode.NONE:
        verdict = rerun_without(sandbox, task, verdict, run, time.monotonic() - t0)
    result.verifier_s = time.monotonic() - t0
    if run is not None:
        result.verifier_exit_code = run.result.exit_code
        result.verifier_output = (run.result.stdout + run.result.stderr)[-4000:]
    if not verdict.ran:
        verdict = _proven(verdict, task, backend, open_pristine)
    result.report = verdict.report
    if verdict.failure_mode != FailureMode.NONE:
        if result.failure_mode == FailureMode.NONE or verdict.failure_mode == FailureMode.TAMPERED:
            result.failure_mode = verdict.failure_mode
            result.failure_detail = verdict.detail
    elif result.failure_mode == FailureMode.NONE:
        result.failure_detail = verdict.detail


MAX_RERUNS = 16
"""At most this many reruns of a verifier without the tests that ran the agent's code."""


def rerun_without(
    sandbox: Sandbox, task: Task, first: Verdict, run: VerifierRun, seconds: float
) -> Verdict:
    """`first`, with the outcomes after its mark judged again, while the runs last as long
    together as the verifier's time limit allows and no run changed the agent's own copy of
    its outputs (`VerifierRun.outputs_changed`: the agent's code, running in the runner, could
    have); a rerun that is no clean verdict ends them (one the agent tampered with is the
    trial's verdict). Where the mark is a module of the agent's, the verifier runs once with
    the agent's modules in a process of their own (`isolate`): each outcome it records as its
    own and that agrees with the first run's is vouched for (`vouch_isolated`). What is left
    reruns without each test that ran the agent's code (`next_without`). None for a task whose
    agent's processes live on through the verifier: the agent's code in one run could tell
    them what to write for the next."""
    if task.keep_agent_processes:
        return first
    runs, spent, limit = [first.report], seconds, task.limits.verifier_timeout_s
    isolated: VerifierReport | None = None
    said: list[str] = []
    if isolating(first.report) and not run.outputs_changed and spent + seconds <= limit:
        t0 = time.monotonic()
        verdict, again = run_verifier(sandbox, task, outputs_of(task), isolate=True)
        spent += time.monotonic() - t0
        if verdict.failure_mode == FailureMode.TAMPERED:
            return verdict
        if again is not None and verdict.ran and verdict.failure_mode == FailureMode.NONE:
            isolated, run = verdict.report, again
            said.append("judged again with the agent's modules in a process of their own")
            vouched = vouch_isolated(first.report, isolated)
            if vouched.independent:
                return Verdict(vouched, detail=said[0])
    while len(runs) <= MAX_RERUNS and not run.outputs_changed:
        without = next_without(runs)
        if without is None or spent + seconds > limit:
            break
        t0 = time.monotonic()
        verdict, again = run_verifier(sandbox, task, outputs_of(task), without)
        spent += time.monotonic() - t0
        if verdict.failure_mode == FailureMode.TAMPERED:
            return verdict
        if again is None or not verdict.ran or verdict.failure_mode != FailureMode.NONE:
            break
        runs.append(verdict.report)
        run = again
    if len(runs) == 1 and isolated is None:
        return first
    if len(runs) > 1:
        said.append(f"judged again {len(runs) - 1} time(s) without the tests that ran the "
                    "agent's code")  # fmt: skip
    merged = merge_reruns(runs) if len(runs) > 1 else first.report
    return Verdict(vouch_isolated(merged, isolated) if isolated else merged, detail="; ".join(said))


def isolating(report: VerifierReport) -> bool:
    """Whether an isolated rerun can vouch for what `report` left the agent's (pure): its
    authenticated runner executed a module file of the agent's (not code the tests built
    from data, `<eval>`, nor a pickle, `<pickle>`: those run in the tests' own process)."""
    return bool(report.agent_code) and report.authenticated and (
        report.agent_code[0].path.startswith("/")
    )  # fmt: skip


def vouch_isolated(report: VerifierReport, isolated: VerifierReport) -> VerifierReport:
    """`report` with each outcome after its mark that the isolated rerun recorded as its own
    (`VerifierReport.vouched`: before any code of the agent's ran in its runner, in a test
    that took no word of the agent's) with the same status moved among the vouched (pure).
    The isolated run only vouches: an outcome it records differently stays as `report` has
    it, the agent's (a value that could not cross fails a test there)."""
    if not report.agent_code:
        return report
    after = report.agent_code[0].after
    agrees = {a.name: a.status for a in isolated.vouched}
    own = list(report.assertions[:after])
    theirs: list[AssertionResult] = []
    for a in report.assertions[after:]:
        (own if agrees.get(a.name) == a.status else theirs).append(a)
    marks = [c.model_copy(update={"after": len(own)}) for c in report.agent_code]
    return report.model_copy(update={"assertions": [*own, *theirs], "agent_code": marks})


def next_without(runs: list[VerifierReport]) -> tuple[str, ...] | None:
    """The tests the next rerun leaves out (pure): every test that ran the agent's code in a
    run so far; None when the last run's outcomes are all its own, its mark fell outside any
    test, or it was no pytest run (only pytest leaves tests out)."""
    last = runs[-1]
    if not last.agent_code or not last.agent_code[0].test:
        return None
    if last.source != ReportSource.PYTEST or not last.authenticated:
        return None
    return tuple(dict.fromkeys(r.agent_code[0].test for r in runs if r.agent_code))


def merge_reruns(runs: list[VerifierReport]) -> VerifierReport:
    """One report of a verifier run and its reruns (pure; each rerun left out the tests that
    ran the agent's code in the runs before it). Each outcome is taken from the first run
    that recorded it before its runner ran the agent's code; those come first, vouched. Then,
    the agent's: the outcome of each test that ran its code (from the run it ran in) and what
    the last run recorded after its own mark. The marks of every run follow them."""
    own: dict[str, AssertionResult] = {}
    for r in runs:
        for a in r.vouched:
            own.setdefault(a.name, a)
    theirs: dict[str, AssertionResult] = {}
    for r in runs:
        if not r.agent_code:
            continue
        mark = r.agent_code[0]
        tail = r.assertions[mark.after :] if r is runs[-1] else [
            a for a in r.assertions[mark.after :] if a.name == mark.test
        ]  # fmt: skip
        for a in tail:
            if a.name not in own:
                theirs.setdefault(a.name, a)
    after = len(own)
    marks = [
        AgentCode(path=c.path, after=after, test=c.test) for r in runs for c in r.agent_code[:1]
    ]
    return runs[0].model_copy(
        update={"assertions": [*own.values(), *theirs.values()], "agent_code": marks}
    )


def _proven(
    verdict: Verdict, task: Task, backend: str, open_pristine: Callable[[], Sandbox] | None
) -> Verdict:
    """The verdict of a verifier that did not run, once `prove` said whose failure it was."""
    if open_pristine is None:
        return Verdict(
            VerifierReport(),
            FailureMode.VERIFIER_ERROR,
            f"the verifier did not run: {verdict.detail}",
        )
    try:
        proof = prove(task, backend, open_pristine)
    except SandboxError as e:
        return Verdict(
            VerifierReport(),
            FailureMode.SANDBOX_ERROR,
            f"the verifier did not run ({verdict.detail}); its pristine rerun failed: {e}",
        )
    if proof.runs:
        why = (
            f"the verifier did not run after the agent ({verdict.detail}); on the task's "
            "image it does: the agent's doing"
        )
        return Verdict(failed_attempt(why), detail=why)
    return Verdict(
        VerifierReport(),
        FailureMode.VERIFIER_ERROR,
        f"the verifier does not run, after the agent ({verdict.detail}) or on the task's image"
        f" ({proof.detail})",
    )
