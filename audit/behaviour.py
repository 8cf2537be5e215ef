"""Evidence by behaviour: hard-reject findings decided by what a task does when run, not by
the forms its files are written in (pure; the trials that feed them are in
`audit.judge_exec`, the agents in `audit.trials`, the trace parser in `audit.traces`).

- weak verifier (`answer_swaps`, `swap_findings`): the outputs the reference solution wrote
  for perturbed inputs are other well-formed answers, computed from other inputs; a verifier
  that passes every assertion on one of them does not check the answer;
- hidden requirement (`runtime_hidden`): a file the verifier opened or found in the oracle's
  sandbox, that the solution wrote, whose name neither the instruction nor the task's files
  give (and that the verifier did not find by listing its directory);
- free reward (`stale_outputs`, `free_reward_findings`): files the image ships where the
  solution writes its outputs without reading them first; the assertions a nop run passes
  only while they are there; (`worked_for_findings`) the assertions a nop run passes on the
  shipped data and fails on other data where the solution's work passes them;
- flaky verifier (`network_findings`): the verifier connected, or resolved a name, beyond
  the sandbox's loopback (a package installer's connections aside);
- solution shortcut (`lost_on_other_inputs`, `other_inputs_findings`): on perturbed inputs
  the reference solution runs through and writes other outputs, yet fails assertions it
  passed, whose expectation moved with the inputs (the shipped answer fails them there too):
  it does not compute what the task asks of other inputs (line numbers picked by hand).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from audit.traces import Trace, checked_files
from audit.verdict import Code, Finding, Source
from tasks.model import Task
from tasks.reports import assertion_key
from tasks.results import TrialResult

# ---- weak verifier: other well-formed answers --------------------------------------------


def answer_swaps(
    oracle_outputs: Mapping[str, str],
    perturbed: Mapping[str, Mapping[str, str]],
    outputs: list[str],
) -> dict[str, dict[str, str]]:
    """For each perturbation, the outputs whose text it changed (label -> path -> text):
    what the reference solution answers for other inputs, in its own format."""
    out: dict[str, dict[str, str]] = {}
    for mode, texts in sorted(perturbed.items()):
        swap = {
            p: texts[p]
            for p in outputs
            if p in texts and p in oracle_outputs and texts[p].strip()
            and texts[p] != oracle_outputs[p]
        }  # fmt: skip
        if swap:
            out[mode] = swap
    return out


def swap_findings(results: list[tuple[str, dict[str, str], TrialResult]]) -> list[Finding]:
    """`weak_verifier` when the verifier passes every assertion with the outputs replaced by
    the solution's answer for other inputs; `mutant_killed` when it catches them."""
    out = []
    for mode, swap, r in results:
        item = f"other-answer {mode}"
        paths = sorted(swap)[:3]
        if not r.rewardable:
            why = f"{r.failure_mode.value}: {r.failure_detail[:200]}"
            out.append(
                Finding(code=Code.RERUN_SKIPPED, source=Source.INFRA, item=item, evidence=why)
            )
        elif r.resolved:
            why = (
                f"every assertion passes when {paths} hold what the reference solution writes for "
                f"inputs perturbed by {mode}: the verifier accepts an answer computed from other "
                "inputs"
            )
            out.append(
                Finding(code=Code.WEAK_VERIFIER, source=Source.TRIAL, item=item, evidence=why)
            )
        else:
            failing = [a.name for a in r.assertions if not a.ok][:3]
            why = f"passes {r.passed}/{r.total} with {paths} from {mode} inputs; fails {failing}"
            out.append(
                Finding(code=Code.MUTANT_KILLED, source=Source.TRIAL, item=item, evidence=why)
            )
    return out


# ---- solution shortcut: other inputs ---------------------------------------------------------


@dataclass(frozen=True)
class Lost:
    """What the reference solution lost on inputs perturbed by `mode`: the assertions
    (name -> its failure message) it passes on the shipped inputs and fails there, having
    written other `changed` outputs."""

    mode: str
    assertions: dict[str, str]
    changed: list[str]


def lost_on_other_inputs(
    mode: str,
    oracle: TrialResult,
    nop: TrialResult,
    solved: TrialResult,
    baseline: Mapping[str, str | None],
    hashes: Mapping[str, str | None],
) -> Lost | None:
    """The assertions that check work (on the shipped inputs the reference solution passes
    them, a nop run fails them) and that the solution fails on inputs perturbed by `mode`
    (`solved`: its run there; `baseline`, `hashes`: its checked outputs' hashes on the
    shipped and the perturbed inputs), where that run says something of the solution: it ran
    to its end (exit status 0), wrote every output it writes on the shipped inputs, and
    changed one (it read the inputs; an output left unchanged is
    `perturbation.shortcut_findings`' evidence). None when it lost nothing."""
    if not solved.rewardable or solved.agent_exit_code != 0 or not nop.rewardable:
        return None
    written = sorted(p for p, h in baseline.items() if h is not None)
    if not written or any(hashes.get(p) is None for p in written):
        return None
    changed = [p for p in written if hashes[p] != baseline[p]]
    idle = {assertion_key(a.name): a.ok for a in nop.assertions}
    now = {assertion_key(a.name): a for a in solved.assertions}
    lost = {
        a.name: now[k].message
        for a in oracle.assertions
        if a.ok and idle.get(k := assertion_key(a.name)) is False and k in now and not now[k].ok
    }
    return Lost(mode, lost, changed) if changed and lost else None


def other_inputs_findings(runs: list[tuple[Lost, TrialResult]]) -> list[Finding]:
    """`solution_shortcut` where the reference solution does not compute what the verifier
    expects of other inputs: each `Lost` with a run of the shipped answer (the outputs the
    solution writes on the shipped inputs, put in place of those it wrote on the perturbed
    ones). An assertion the shipped answer fails there too, for another reason than the
    solution's answer (its failure message differs), expects an answer that follows the
    inputs, and the solution's own answer for them is not it. No evidence where the verifier
    expects a fixed value (the shipped answer passes) or fails whatever the answer (the same
    message: it cannot read the perturbed inputs, a record another refers to was dropped)."""
    out = []
    for lost, shipped in runs:
        if not shipped.rewardable:
            continue
        failed = {assertion_key(a.name): a.message for a in shipped.assertions if not a.ok}
        follow = [
            n
            for n, why in lost.assertions.items()
            if (k := assertion_key(n)) in failed and failed[k].strip() != why.strip()
        ]
        if not follow:
            continue
        why = (
            f"on other records of the declared inputs ({lost.mode}) the reference solution runs "
            f"to its end and writes other {lost.changed[:3]}, yet fails {follow[:3]}, which "
            "check work (a nop run fails them) and which it passes on the shipped inputs; there "
            "the shipped answer fails them too, otherwise: the verifier's expectation follows "
            "the inputs and the solution does not compute it for other inputs"
        )
        item = lost.changed[0]
        out.append(
            Finding(code=Code.SOLUTION_SHORTCUT, source=Source.TRIAL, item=item, evidence=why)
        )
    return out


# ---- free reward: outputs the image ships --------------------------------------------------


def stale_outputs(created: list[str], given: set[str], first_open: Mapping[str, str]) -> list[str]:
    """Files that existed before the solution ran and that it (over)wrote before reading
    them (from its trace): outputs the image already ships, not files it edits. A
    repository is git's state, not outputs: its internals (bug pinned: a seed's commit
    rewrote `.git/COMMIT_EDITMSG` unread, and deleting it broke the checkout a guard
    asserts) and its work tree, which `git checkout`/`reset` rewrite unread whenever the
    index's stat data is clean (and read first when it is racy: a seed was called
    `free_reward` on some runs only)."""
    repos = {p.split("/.git/", 1)[0] + "/" for p in (*given, *created) if "/.git/" in p}
    return [
        p
        for p in created
        if p in given
        and first_open.get(p) == "write"
        and "/.git/" not in p
        and not any(p.startswith(r) for r in repos)
    ]


def free_reward_findings(
    nop: TrialResult, without: TrialResult, shipped: list[str]
) -> list[Finding]:
    """`free_reward` for the assertions a nop run passes that fail once the shipped outputs
    are deleted: any share of the reward the starting state's outputs earn."""
    if not nop.rewardable or not without.rewardable or not nop.total:
        return []
    after = {assertion_key(a.name): a.ok for a in without.assertions}
    earned = [a.name for a in nop.assertions if a.ok and not after.get(assertion_key(a.name))]
    if not earned:
        return []
    why = (
        f"the image ships {shipped[:3]}, which the solution overwrites without reading: before "
        f"any work they earn {len(earned)}/{nop.total} assertions ({earned[:3]}), which fail "
        "once they are deleted"
    )
    return [
        Finding(
            code=Code.FREE_REWARD, source=Source.TRIAL, item=",".join(shipped[:3]), evidence=why
        )
    ]


def worked_for_findings(
    nop: TrialResult, perturbed: list[tuple[str, TrialResult, TrialResult]]
) -> list[Finding]:
    """`free_reward` for the assertions the starting state passes that check work: on
    another starting state (`perturbed`: mode, a nop run on it, the reference solution's run
    on it; the declared inputs holding other data, or the image built without one of its
    steps) a nop run fails them and the solution passes them, so they pay for what the
    solution does, and the shipped state had already done it.
    A guard (a value to keep, a file to leave valid) is not one: on other data a nop run
    still passes it, or the solution, keeping the other value, fails it too."""
    if not nop.rewardable or not nop.passed:
        return []
    passed = {assertion_key(a.name): a.name for a in nop.assertions if a.ok}
    earned: dict[str, str] = {}  # assertion -> the perturbation that showed it
    for mode, idle, solved in perturbed:
        if not idle.rewardable or not solved.rewardable:
            continue
        idle_ok = {assertion_key(a.name): a.ok for a in idle.assertions}
        solved_ok = {assertion_key(a.name): a.ok for a in solved.assertions}
        for key, name in passed.items():
            if key in idle_ok and not idle_ok[key] and solved_ok.get(key):
                earned.setdefault(name, mode)
    if not earned:
        return []
    names = sorted(earned)
    why = (
        f"before any work the starting state earns {len(names)}/{nop.total} assertions that "
        f"check work ({names[:3]}): on another starting state "
        f"({sorted(set(earned.values()))}) a nop run fails them and the reference solution "
        "passes them; the shipped state already holds what they ask for"
    )
    return [
        Finding(code=Code.FREE_REWARD, source=Source.TRIAL, item=",".join(names[:3]), evidence=why)
    ]


# ---- hidden requirement: files the verifier opens ------------------------------------------


def _words(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


_TEMPLATE = re.compile(r"[\w./-]*<[\w -]+>[\w./<> -]*")


def templates(instruction: str) -> list[re.Pattern[str]]:
    """The file names an instruction gives as templates (`/app/out/<name>.count`,
    `reports/<user>-<day>.txt`), as patterns a placeholder matches any name part of."""
    out = []
    for m in _TEMPLATE.finditer(instruction):
        parts = re.split(r"<[\w -]+>", m.group(0).strip())
        if "".join(parts).strip("./-_ "):
            out.append(re.compile("[^/]+".join(re.escape(p) for p in parts) + "$"))
    return out


def derivable(path: str, task: Task, texts: Mapping[str, str]) -> bool:
    """Can an agent know this file's name? The instruction gives it (absolute, relative to
    the working directory, or its file name), or as a template (`/app/out/<name>.count`), or
    its stem is a word of the instruction or of the task's given files, or the stem of a
    given file (`texts`, by name: names that come from the data, like `<user>.txt`)."""
    wd = task.environment.workdir.rstrip("/")
    base = posixpath.basename(path)

    def stem(name: str) -> str:
        name = posixpath.basename(name)
        return name.rsplit(".", 1)[0] if "." in name[1:] else name

    forms = [path, base]
    if path.startswith(wd + "/"):
        forms.append(path[len(wd) + 1 :])
    if any(f in task.instruction for f in forms):
        return True
    if any(t.search(f) for t in templates(task.instruction) for f in forms):
        return True
    if stem(path) in {stem(n) for n in texts}:
        return True
    s = stem(path)
    return len(s) >= 2 and any(_words(t, s) for t in (task.instruction, *texts.values()))


def runtime_hidden(
    trace: Trace,
    task: Task,
    created: list[str],
    given: set[str],
    given_texts: Mapping[str, str],
    verifier_text: str,
) -> list[Finding]:
    """Files the verifier opened or found in the oracle's sandbox that the solution wrote,
    whose names it did not spell (the static check reads those) and no agent could derive
    (`derivable`): a requirement put together at run time."""
    made = set(created)
    out = []
    for p in checked_files(trace, made):
        if p not in made or p in given or "/.git/" in p:
            continue
        if posixpath.basename(p) in verifier_text or derivable(p, task, given_texts):
            continue
        why = (
            "the verifier opened it (traced) in the oracle's sandbox; the reference solution "
            "wrote it; neither the instruction nor the task's files give its name, and the "
            "tests put it together at run time"
        )
        out.append(Finding(code=Code.HIDDEN_REQUIREMENT, source=Source.TRIAL, item=p, evidence=why))
    return out


# ---- network ----------------------------------------------------------------------------------

# Programs that install a verifier's own tools (Harbor's stock test.sh fetches uv and
# pytest): the verdict does not depend on their connections (a failed install is an
# infrastructure failure), as for the static network rule.
_INSTALLERS = re.compile(r"(^|/)(pip3?|uv|uvx|apt|apt-get|conda|mamba|npm|poetry)$")


def installers(trace: Trace) -> set[int]:
    """The processes installing packages, and everything they started."""
    progs = {
        a
        for argv in trace.argv.values()
        for a in argv[:2]
        if _INSTALLERS.search(a) or "astral.sh" in a
    }
    pip = {a for argv in trace.argv.values() if "-m" in argv and "pip" in argv for a in argv[:1]}
    return trace.running(progs | pip) if progs or pip else set()


def network_use(trace: Trace) -> list[str]:
    """Where the traced programs connected (or tried to) beyond the loopback, installers
    aside."""
    skip = installers(trace)
    kept = Trace(connects=[(pid, d) for pid, d in trace.connects if pid not in skip])
    return kept.network()


def network_findings(verifier: list[str], solution: list[str]) -> list[Finding]:
    """The verifier's network use is a flaky verifier (its verdict depends on a network the
    sandbox need not have); the solution's is recorded (`network_use`, softer: the
    reference needs a network an agent may not have)."""
    out = []
    if verifier:
        why = f"the verifier connected or resolved names (traced): {verifier[:4]}"
        out.append(
            Finding(code=Code.FLAKY_VERIFIER, source=Source.TRIAL, item="network", evidence=why)
        )
    if solution:
        why = f"the reference solution connected or resolved names (traced): {solution[:4]}"
        out.append(
            Finding(code=Code.NETWORK_USE, source=Source.TRIAL, item="solution", evidence=why)
        )
    return out
