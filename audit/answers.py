"""The answers a task's verifier checks, as the reference solution computed them, and where
they stand in its outputs: what an instruction may never state (issue 22: a repair wrote the
computed ERROR count into the instruction, and the re-audit accepted it).

An answer is a value of a checked output that the solution computes (it vanishes from the
output when the declared inputs' content changes, in a run that still wrote the output: a
perturbed run that stopped before writing it says nothing about its values) and that nothing
the agent can read already holds: writing it into the instruction hands the agent the result.
Pure; the executable judge records them as `oracle_answer` findings (item: the value,
evidence: where it stands, e.g. ``line 1 of /app/report/errors.txt``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from audit.perturbation import CONTENT_PERTURBATIONS, tokens
from audit.verdict import Code, Finding, Source

MAX_ANSWERS = 40
"""Answers recorded per task (asserted values first, then by output and value); a task
computing more is checked on these."""


def bounded(value: str, text: str) -> bool:
    """`value` occurs in `text` as a whole token (not inside a longer number or word)."""
    pre = r"(?<![\w.])" if value[:1].isalnum() or value[:1] == "-" else ""
    post = r"(?![\w]|\.\d)" if value[-1:].isalnum() else ""
    return re.search(pre + re.escape(value) + post, text) is not None


def position(value: str, text: str, path: str) -> str:
    """Where `value` first stands in the output `path` (``line N of PATH``)."""
    for n, line in enumerate(text.splitlines(), 1):
        if bounded(value, line):
            return f"line {n} of {path}"
    return path


def computed_values(
    outputs: Mapping[str, str], perturbed: Mapping[str, Mapping[str, str | None]]
) -> dict[str, set[str]]:
    """Per output: its values that vanish in a content-perturbed run that wrote it."""
    out: dict[str, set[str]] = {}
    for p, text in outputs.items():
        mine, gone = tokens(text), set()
        for mode, run in perturbed.items():
            other = run.get(p)
            if mode in CONTENT_PERTURBATIONS and other is not None:
                gone |= mine - tokens(other)
        if gone:
            out[p] = gone
    return out


def oracle_answers(
    outputs: Mapping[str, str],
    perturbed: Mapping[str, Mapping[str, str | None]],
    visible: Mapping[str, str],
    asserted: Iterable[str] = (),
) -> list[Finding]:
    """`oracle_answer` findings for the computed values (`computed_values`) of the checked
    `outputs` (the oracle's texts; `perturbed`: {mode: {output: text}} of the perturbed
    runs) that no `visible` text (instruction, environment files) holds; values the verifier
    asserts (`asserted` literal values containing them) come first."""
    seen = "\n".join(visible.values())
    lits = list(asserted)
    found: dict[str, str] = {}
    for p, values in sorted(computed_values(outputs, perturbed).items()):
        for v in sorted(values):
            if v not in found and not bounded(v, seen):
                found[v] = position(v, outputs.get(p, ""), p)
    order = sorted(found, key=lambda v: (not any(bounded(v, a) for a in lits), found[v], v))
    return [
        Finding(code=Code.ORACLE_ANSWER, source=Source.TRIAL, item=v, evidence=found[v])
        for v in order[:MAX_ANSWERS]
    ]


def answers_of(findings: Iterable[Finding]) -> dict[str, str]:
    """{value: where it stands} of the `oracle_answer` findings."""
    return {f.item: f.evidence for f in findings if f.code == Code.ORACLE_ANSWER}


def stated_answers(text: str, answers: Mapping[str, str], original: str = "") -> list[str]:
    """The answers `text` states that `original` (the instruction before a rewrite) did not."""
    return [v for v in answers if bounded(v, text) and not bounded(v, original)]
