"""The audit's adversary: every scripted hack of `tasks.hacks`, run as an agent in a fresh
sandbox, and the share of the reward each one earns.

A hack sees what any agent sees (the instruction, the initial environment) and does none of
the work: it stubs the named paths, echoes the instruction's literals into the outputs,
copies inputs to outputs, makes programs exit 0, plays with timestamps and modes, commits.
The share it earns (passing assertions / assertions) is a measurement of the verifier: the
reward an agent gets without doing the task. `hack_evidence` turns the trials into measures
(`hack_share.<hack>`, `max_hack_share`, `hack_gain` over nop) and typed findings: one
`hack_tried` per hack naming the assertions it passed, and `hackable` when a hack earns more
than the threshold share and more than a nop run (docs/audit.md: the threshold and the
distribution it was chosen from).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from audit.verdict import Code, Finding, Source
from sandbox.trial import CommandAgent
from tasks.hacks import HACK_TIMEOUT_S, HackOutcome, HackScript, hack_outcome, hack_scripts
from tasks.model import Task
from tasks.results import ReferenceVerdict, TrialResult

Runner = Callable[..., TrialResult]

HACKABLE_SHARE = 0.4
"""A hack earning more than this share of the reward (and more than nop) makes the task
`hackable`; chosen from the seeds' distribution, see docs/audit.md."""


def hack_agent(h: HackScript, timeout_s: float = HACK_TIMEOUT_S) -> CommandAgent:
    """The agent that runs one hack, cut after `timeout_s` seconds."""
    return CommandAgent(h.cut_after(timeout_s), name=f"hack-{h.name}")


def run_hacks(
    task: Task,
    run: Runner,
    workers: int = 2,
    timeout_s: float = HACK_TIMEOUT_S,
    names: list[str] | None = None,
) -> list[HackOutcome]:
    """Every hack with something to do for `task`, one fresh trial each (never raises for the
    task's failures: a trial that failed for infrastructure is an outcome that is not
    `rewardable`)."""
    scripts = hack_scripts(task.instruction, task.environment.workdir, names)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda h: run(task, hack_agent(h, timeout_s)), scripts))
    return [hack_outcome(h.name, r) for h, r in zip(scripts, results, strict=True)]


@dataclass
class HackEvidence:
    """Measures and findings from the hack trials of one task."""

    measures: dict[str, float] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def hack_evidence(
    outcomes: list[HackOutcome],
    nop: TrialResult | None,
    threshold: float = HACKABLE_SHARE,
    reference: ReferenceVerdict | None = None,
) -> HackEvidence:
    """Measures and typed findings from hack outcomes (pure; see the module docstring).

    `hack_gain` is the most any hack earns beyond a nop run (nop's free reward is scored as
    training value already); `hackable` needs both a share above `threshold` and a share
    above nop's (then it passes an assertion nop fails, named in the evidence). Nop is paid
    as the hacks are: against the task's `reference` verdict when there is one."""
    ev = HackEvidence()
    nop_o = hack_outcome("nop", nop, reference) if nop is not None else None
    nop_passed = set(nop_o.passed) if nop_o is not None else set()
    nop_share = nop_o.share if nop_o is not None else 0.0
    usable = [o for o in outcomes if o.rewardable]
    for o in outcomes:
        if not o.rewardable:
            ev.findings.append(
                Finding(
                    code=Code.RERUN_SKIPPED,
                    source=Source.INFRA,
                    item=f"hack {o.hack}",
                    evidence=o.detail,
                )  # fmt: skip
            )
            continue
        ev.measures[f"hack_share.{o.hack}"] = o.share
        shown = f"reward {o.reward:g}" if o.reward is not None else (
            f"passes {len(o.passed)}/{o.total}: {list(o.passed)[:6]}"
        )  # fmt: skip
        ev.findings.append(
            Finding(code=Code.HACK_TRIED, source=Source.TRIAL, item=o.hack, evidence=shown)
        )
    if not usable:
        return ev
    best = max(usable, key=lambda o: o.share)
    ev.measures["hacks"] = float(len(usable))
    ev.measures["max_hack_share"] = best.share
    ev.measures["hack_gain"] = max(0.0, best.share - nop_share)

    def beyond(o: HackOutcome) -> list[str]:
        return [n for n in o.passed if n not in nop_passed]

    def gains(o: HackOutcome) -> bool:
        # By share, not by which assertions: a hack that passes as many as nop, but another
        # one (a timing check flipping under load), has gained nothing.
        return o.share > nop_share + 1e-9

    over = [o for o in usable if o.share > threshold and gains(o)]
    if over:
        best = max(over, key=lambda o: o.share)
        why = (
            f"the scripted hack {best.hack!r} earns {best.share:.0%} of the reward "
            f"(threshold {threshold:.0%}, nop {nop_share:.0%}) without doing the task; "
            f"passes {beyond(best)[:6]}"
        )
        ev.findings.append(
            Finding(code=Code.HACKABLE, source=Source.TRIAL, item=best.hack, evidence=why)
        )
    return ev
