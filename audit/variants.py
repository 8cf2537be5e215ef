"""Rerun conditions for flakiness: the verifier's verdict on the reference solution must not
change when the verifier runs under a shifted clock and date, days after the agent's last
write, under another timezone, another locale, another hash seed and directory order, with
its sleeps shortened, or simply again. Under one more condition, every process drawing the
same entropy, a change is not flakiness but evidence of it: the verdict was decided by chance
(`entropy_finding`), and plain reruns then measure how often chance fails the reference.

A condition is applied without touching the verifier's entry script: the variant task's
verifier environment sets `BASH_ENV` to a script staged beside the tests
(tests/.t1-condition/env.sh), which every bash of the verifier sources first (the `bash -c` that
runs the entry included) and which exports the condition. The entry, and so the report
channel and the report sources the harness reads, are those of the base run (before, the
entry was replaced by a wrapper that `exec`ed a renamed copy; the harness did not follow it,
so a stock pytest verifier's reruns were read from its JUnit file under other names and
every one of them looked changed). Conditions that need the sandbox's help (the clock
library, a locale, shuffled directory entries) are prepared after the solution by
`audit.trials.ConditionAgent`. The comparison is pure (`verdict_vector`, `flaky_findings`)
and keys assertions by `tasks.reports.assertion_key`, so names that differ only by the
report source that wrote them are one assertion.
"""

from __future__ import annotations

import shlex

from audit.trials import (
    FAKETIME_LIBS,
    SHIPPED_ENTROPY,
    SHIPPED_FAKETIME,
    SHIPPED_LOCALES,
    SHIPPED_READDIR,
    SHIPPED_SLEEPS,
    Condition,
    host_entropy_shim,
    host_faketime,
    host_locale,
    host_readdir_shim,
    host_sleep_shim,
)
from audit.verdict import Code, Finding, Source
from sandbox.judge import CONDITION_DIR, TESTS_DIR
from tasks.model import Task
from tasks.reports import assertion_key
from tasks.results import TrialResult

# 3 days 11 hours back: another date and another time of day. Back, not forward: files the
# kernel stamps during the verifier run keep real times, and a clock ahead of them makes
# freshly built files look older than their sources (make would rebuild everything).
CLOCK_SHIFT_S = -298_800
# POSIX TZ: UTC+14, no tzdata needed. The name must be quoted (<+14>) or three letters:
# "T1-14", used before, is no valid TZ and left every clock at UTC (the rerun changed nothing).
TZ_FAR = "<+14>-14"
OTHER_LOCALE = "de_DE.UTF-8"  # another collation and decimal separator than C/C.UTF-8
HASH_SEED = "2718281"

CONDITIONS: dict[str, dict[str, str]] = {
    "late": {},
    # The monotonic clock is shifted too: with it left alone, libfaketime's clock_nanosleep
    # turns Python >= 3.11's time.sleep into EINVAL (a harness-made verdict change).
    "clock": {"FAKETIME": f"{CLOCK_SHIFT_S:+d}"},
    "timezone": {"TZ": TZ_FAR},
    "locale": {"LC_ALL": OTHER_LOCALE, "LANG": OTHER_LOCALE},
    "order": {"PYTHONHASHSEED": HASH_SEED},
    "sleeps": {},
    "entropy": {},
}


CONDITION_SCRIPT = f"{CONDITION_DIR}/env.sh"  # under /tests, sourced through BASH_ENV
# The audit's own preloaded libraries, by condition: where each is shipped, how it is built.
SHIMS = {
    "order": (SHIPPED_READDIR, host_readdir_shim),
    "sleeps": (SHIPPED_SLEEPS, host_sleep_shim),
    "entropy": (SHIPPED_ENTROPY, host_entropy_shim),
}


def condition_script(name: str) -> str:
    """The script every bash of the verifier sources first (`BASH_ENV`) under condition
    `name`: it exports the condition once (a guard variable; nested bash sees it exported)."""
    env = CONDITIONS[name]
    d = TESTS_DIR
    lines = [
        f"# t1 audit: the verifier rerun under condition {name!r} (sourced through BASH_ENV)",
        # bash seeds `$RANDOM` from its clock and pid, not from an entropy call: every bash
        # seeds it the same (before the guard: each bash of the verifier sources this first)
        *(["RANDOM=1"] if name == "entropy" else []),
        '[ -n "${T1_CONDITION:-}" ] && return 0',
        f"export T1_CONDITION={shlex.quote(name)}",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if name == "locale":  # the shipped copy, for images without it
        lines.append(f"[ -d {d}/{SHIPPED_LOCALES} ] && export LOCPATH={d}/{SHIPPED_LOCALES}")
    if name == "clock":
        libs = " ".join([*FAKETIME_LIBS, f"{d}/{SHIPPED_FAKETIME}"])
        lines.append(
            f'for lib in {libs}; do [ -f "$lib" ] && export LD_PRELOAD="$lib" && break; done'
        )
    # the audit's own libraries (readdir in reverse: audit/readdir_reverse.c; the suspected
    # sleeps cut, or every sleep a tenth as long: audit/short_sleep.c; one entropy for every
    # process: audit/same_entropy.c),
    # preloaded only where they load silently (a musl loader would refuse to start anything)
    if name in SHIMS:
        lines.append(f'lib={d}/{SHIMS[name][0]}; [ -f "$lib" ] && '
                     '[ -z "$(LD_PRELOAD="$lib" /bin/true 2>&1)" ] && '
                     'export LD_PRELOAD="$lib${LD_PRELOAD:+ $LD_PRELOAD}"')  # fmt: skip
    lines.append("true")
    return "\n".join(lines) + "\n"


def condition_verifier(verifier: dict[str, bytes], name: str) -> dict[str, bytes]:
    """The verifier files with what condition `name` needs staged beside them (the sourced
    script, the shipped libraries and locale); every file of the task is kept as it is."""
    if name not in CONDITIONS:
        raise ValueError(f"unknown rerun condition {name!r} (choose from {', '.join(CONDITIONS)})")
    files = dict(verifier)
    files[CONDITION_SCRIPT] = condition_script(name).encode()
    if name == "clock" and (lib := host_faketime()) is not None:
        files[SHIPPED_FAKETIME] = lib
    if name == "locale" and (loc := host_locale(OTHER_LOCALE)) is not None:
        files |= {f"{SHIPPED_LOCALES}/{rel}": data for rel, data in loc.items()}
    if name in SHIMS and (shim := SHIMS[name][1]()) is not None:
        files[SHIMS[name][0]] = shim
    return files


def condition_task(task: Task, name: str, extra: dict[str, str] | None = None) -> Task:
    """`task` whose verifier runs under condition `name`: the files of `condition_verifier`,
    and `BASH_ENV` in the verifier's environment naming the sourced script (with `extra`,
    e.g. the sleeps to cut: `audit.trials.sleep_cut_env`)."""
    env = {**task.verifier_config.env, **(extra or {})}
    env["BASH_ENV"] = f"{TESTS_DIR}/{CONDITION_SCRIPT}"
    return task.model_copy(
        update={
            "verifier": condition_verifier(task.verifier, name),
            "verifier_config": task.verifier_config.model_copy(update={"env": env}),
        }
    )


# The starved rerun: the whole trial (solution and verifier) under a CPU quota of this share
# of the task's CPUs (a cgroup quota on both backends), its time limits stretched as much.
STARVE_SHARE = 0.1


def starved_task(task: Task, share: float = STARVE_SHARE) -> Task:
    """`task` under a CPU quota of `share` of its CPUs, its agent and verifier time limits
    divided by `share`: a solution or verifier that races (a background job it does not wait
    for, a sleep as synchronization) loses the race; a timeout is the quota's, never a
    verdict."""
    lim = task.limits
    limits = lim.model_copy(
        update={
            "cpus": max(0.02, lim.cpus * share),
            "agent_timeout_s": lim.agent_timeout_s / share,
            "verifier_timeout_s": lim.verifier_timeout_s / share,
        }
    )
    return task.model_copy(update={"limits": limits})


def conditions(shuffle_dirs: list[str], touched: list[str] | None = None) -> list[Condition]:
    """The rerun conditions, in order: clock (the verifier's date and time moved back), late
    (everything the task touched aged instead: as if the verifier ran days later), timezone,
    locale, order. (`sleeps` is not among them: it confirms a race the static look
    suspects, together with the CPU quota; nor `entropy`: a verdict it changes was decided by
    chance, which plain reruns then measure: `audit.judge_exec`.)"""
    late = Condition("late", age_paths=sorted(touched or []), age_s=-CLOCK_SHIFT_S)
    return [
        Condition("clock", clock=True),
        *([late] if touched else []),
        Condition("timezone"),
        Condition("locale", locale=True),
        Condition("order", shuffle_dirs=shuffle_dirs),
    ]


def outcomes(r: TrialResult) -> dict[str, bool]:
    """Each assertion's outcome, keyed by its identity across report sources."""
    return {assertion_key(a.name): a.ok for a in r.assertions}


def changed_assertions(base: dict[str, bool], other: dict[str, bool]) -> list[str]:
    """The assertions whose outcome differs (pure). Keys found on one side only are matched
    by their last part (the test and its parameters) where that is unique on both sides: a
    report that names tests without their module (a bare JUnit name) is the same test."""
    only_b, only_o = set(base) - set(other), set(other) - set(base)
    if only_b and only_o:

        def tail(k: str) -> str:
            return k.rsplit("::", 1)[-1]

        tails_b = [tail(k) for k in base]
        tails_o = [tail(k) for k in other]
        by_tail = {tail(k): k for k in only_o if tails_o.count(tail(k)) == 1}
        other = dict(other)
        for k in only_b:
            t = tail(k)
            if tails_b.count(t) == 1 and t in by_tail:
                other[k] = other.pop(by_tail.pop(t))
    return sorted(k for k in set(base) | set(other) if base.get(k) != other.get(k))


def verdict_vector(r: TrialResult) -> tuple:
    """What a rerun must reproduce: the failure mode and each assertion's outcome (by key)."""
    return (r.failure_mode.value, tuple(sorted(outcomes(r).items())))


def verdict_changed(base: TrialResult, r: TrialResult) -> bool:
    """Whether `r` ended otherwise than `base` (its failure mode, or any assertion's outcome)."""
    return r.failure_mode != base.failure_mode or bool(
        changed_assertions(outcomes(base), outcomes(r))
    )


def flaky_findings(
    base: TrialResult, reruns: list[tuple[str, TrialResult, bool, str]]
) -> list[Finding]:
    """One finding per rerun: flaky when its verdict differs from the base run's.

    `reruns` holds (condition, trial, applied, detail); a condition the sandbox could not
    apply and a trial that says nothing about the task (infrastructure) are recorded as
    skipped, never as a verdict."""
    out = []
    want = outcomes(base)
    for name, r, applied, detail in reruns:
        if not r.rewardable:
            why = f"infrastructure failure: {r.failure_mode.value}: {r.failure_detail[:200]}"
            out.append(
                Finding(code=Code.RERUN_SKIPPED, source=Source.INFRA, item=name, evidence=why)
            )
        elif not applied:
            out.append(
                Finding(code=Code.RERUN_SKIPPED, source=Source.TRIAL, item=name, evidence=detail)
            )
        elif not verdict_changed(base, r):
            why = f"same verdict on all {len(r.assertions)} assertions" + (
                f" ({detail})" if detail else ""
            )
            out.append(
                Finding(code=Code.RERUN_STABLE, source=Source.TRIAL, item=name, evidence=why)
            )
        else:
            changed = changed_assertions(want, outcomes(r))
            why = f"verdict changed under {name}" + (f" ({detail})" if detail else "")
            if r.failure_mode != base.failure_mode:
                why += f": failure mode {base.failure_mode.value} -> {r.failure_mode.value}"
            if changed:
                why += f"; assertions that changed: {changed[:5]}"
            out.append(
                Finding(code=Code.FLAKY_VERIFIER, source=Source.TRIAL, item=name, evidence=why)
            )
    return out


def entropy_finding(base: TrialResult, r: TrialResult, applied: bool, detail: str) -> Finding:
    """The `entropy` rerun read (pure): a verdict that changes when every process draws the
    same entropy depends on chance (`stochastic_verdict`: the verifier judges draws of a
    random process, and the reference passes only as often as chance allows); the same
    verdict, or a rerun that could not say, as `flaky_findings` records it."""
    if not (applied and r.rewardable and verdict_changed(base, r)):
        return flaky_findings(base, [("entropy", r, applied, detail)])[0]
    changed = changed_assertions(outcomes(base), outcomes(r))
    why = "verdict changed when every process drew the same entropy"
    if r.failure_mode != base.failure_mode:
        why += f": failure mode {base.failure_mode.value} -> {r.failure_mode.value}"
    if changed:
        why += f"; assertions that changed: {changed[:5]}"
    return Finding(code=Code.STOCHASTIC_VERDICT, source=Source.TRIAL, item="entropy", evidence=why)
