"""Rerun conditions for flakiness: the verifier's verdict on the reference solution must not
change when the verifier runs under a shifted clock and date, days after the agent's last
write, under another timezone, another locale, another hash seed and directory order, or
simply again.

A condition is applied by wrapping the verifier's entry point: the variant task's
tests/test.sh exports the condition and execs the original entry (kept as
tests/.t1-test.sh); conditions that need the sandbox's help (the clock library, a locale,
shuffled directory entries) are prepared after the solution by `audit.trials.ConditionAgent`.
The comparison is pure (`verdict_vector`, `flaky_findings`).
"""

from __future__ import annotations

import shlex

from audit.trials import (
    FAKETIME_LIBS,
    SHIPPED_FAKETIME,
    SHIPPED_LOCALES,
    SHIPPED_READDIR,
    Condition,
    host_faketime,
    host_locale,
    host_readdir_shim,
)
from audit.verdict import Code, Finding, Source
from tasks.results import TrialResult

ENTRY = "test.sh"
ORIGINAL_ENTRY = ".t1-test.sh"
# 3 days 11 hours back: another date and another time of day. Back, not forward: files the
# kernel stamps during the verifier run keep real times, and a clock ahead of them makes
# freshly built files look older than their sources (make would rebuild everything).
CLOCK_SHIFT_S = -298_800
TZ_FAR = "T1-14"  # POSIX TZ: UTC+14 (no tzdata needed)
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
}


def wrapper(name: str) -> str:
    """The tests/test.sh that runs the original entry under condition `name`."""
    env = CONDITIONS[name]
    lines = ["#!/bin/bash", f"# t1 audit: rerun of the verifier under condition {name!r}"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if name == "locale":  # the shipped copy, for images without it
        lines.append(f'[ -d "$(dirname "$0")/{SHIPPED_LOCALES}" ] && '
                     f'export LOCPATH="$(dirname "$0")/{SHIPPED_LOCALES}"')  # fmt: skip
    if name == "clock":
        libs = " ".join([*FAKETIME_LIBS, f'"$(dirname "$0")/{SHIPPED_FAKETIME}"'])
        lines.append(
            f'for lib in {libs}; do [ -f "$lib" ] && export LD_PRELOAD="$lib" && break; done'
        )
    if name == "order":  # readdir in reverse (audit/readdir_reverse.c), where it loads
        # only where it loads silently (a musl loader would refuse to start anything)
        lines.append(f'lib="$(dirname "$0")/{SHIPPED_READDIR}"; [ -f "$lib" ] && '
                     '[ -z "$(LD_PRELOAD="$lib" /bin/true 2>&1)" ] && '
                     'export LD_PRELOAD="$lib${LD_PRELOAD:+ $LD_PRELOAD}"')  # fmt: skip
    lines.append(f'exec bash "$(dirname "$0")/{ORIGINAL_ENTRY}" "$@"')
    return "\n".join(lines) + "\n"


def wrapped_verifier(verifier: dict[str, bytes], name: str) -> dict[str, bytes]:
    """The verifier files with their entry wrapped to run under condition `name`."""
    if ENTRY not in verifier:
        raise ValueError(f"the verifier has no {ENTRY}")
    files = dict(verifier)
    files[ORIGINAL_ENTRY] = files[ENTRY]
    files[ENTRY] = wrapper(name).encode()
    if name == "clock" and (lib := host_faketime()) is not None:
        files[SHIPPED_FAKETIME] = lib
    if name == "locale" and (loc := host_locale(OTHER_LOCALE)) is not None:
        files |= {f"{SHIPPED_LOCALES}/{rel}": data for rel, data in loc.items()}
    if name == "order" and (shim := host_readdir_shim()) is not None:
        files[SHIPPED_READDIR] = shim
    return files


def conditions(shuffle_dirs: list[str], touched: list[str] | None = None) -> list[Condition]:
    """The rerun conditions, in order: clock (the verifier's date and time moved back), late
    (everything the task touched aged instead: as if the verifier ran days later), timezone,
    locale, order."""
    late = Condition("late", age_paths=sorted(touched or []), age_s=-CLOCK_SHIFT_S)
    return [
        Condition("clock", clock=True),
        *([late] if touched else []),
        Condition("timezone"),
        Condition("locale", locale=True),
        Condition("order", shuffle_dirs=shuffle_dirs),
    ]


def verdict_vector(r: TrialResult) -> tuple:
    """What a rerun must reproduce: the failure mode and each assertion's outcome."""
    return (r.failure_mode.value, tuple((a.name, a.ok) for a in r.assertions))


def flaky_findings(
    base: TrialResult, reruns: list[tuple[str, TrialResult, bool, str]]
) -> list[Finding]:
    """One finding per rerun: flaky when its verdict differs from the base run's.

    `reruns` holds (condition, trial, applied, detail); a condition the sandbox could not
    apply and a trial that says nothing about the task (infrastructure) are recorded as
    skipped, never as a verdict."""
    out = []
    want = verdict_vector(base)
    outcomes = dict((a.name, a.ok) for a in base.assertions)
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
        elif verdict_vector(r) == want:
            why = f"same verdict on all {len(r.assertions)} assertions" + (
                f" ({detail})" if detail else ""
            )
            out.append(
                Finding(code=Code.RERUN_STABLE, source=Source.TRIAL, item=name, evidence=why)
            )
        else:
            got = dict((a.name, a.ok) for a in r.assertions)
            changed = sorted(n for n in set(outcomes) | set(got) if outcomes.get(n) != got.get(n))
            why = f"verdict changed under {name}" + (f" ({detail})" if detail else "")
            if r.failure_mode != base.failure_mode:
                why += f": failure mode {base.failure_mode.value} -> {r.failure_mode.value}"
            if changed:
                why += f"; assertions that changed: {changed[:5]}"
            out.append(
                Finding(code=Code.FLAKY_VERIFIER, source=Source.TRIAL, item=name, evidence=why)
            )
    return out
