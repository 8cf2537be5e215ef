"""The audit rubric as config: dimensions, weights, critical minimums, verdict thresholds.

A rubric is a small TOML preset (`audit/presets/*.toml`) validated into `Rubric`. The scoring
math is pure: `composite` is the weighted sum of per-dimension scores in [0, 1]; `decide`
turns scores plus findings into a verdict. Hard-reject findings and critical-minimum misses
reject whatever the composite; training value is the only dimension exempt from the cutoff.

Each judge is held to its own minimums: `critical_min` applies to the executable judge's
measured scores (a pass share, a kill rate), `llm_critical_min` to the LLM judge's subjective
ones. A measured 0.99 pass-share minimum means "the oracle passes"; an LLM scoring a clean
task 0.95 means "fine", so one threshold cannot serve both.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from audit.verdict import Verdict

PRESET_DIR = Path(__file__).resolve().parent / "presets"


class Dimension(StrEnum):
    """The six audit dimensions (paper Figure 4)."""

    ALIGNMENT = "alignment"  # instruction-verifier alignment: no hidden requirements
    FAIRNESS = "fairness"  # verifier fairness: stable verdicts, no clock/network dependence
    COVERAGE = "coverage"  # verifier coverage: share of the solution's effects checked
    CORRECTNESS = "correctness"  # the reference solution passes the verifier
    REASONABLENESS = "reasonableness"  # the reference solution is a reasonable workflow
    TRAINING_VALUE = "training_value"  # dense, non-trivial reward; exempt from the cutoff


EXEMPT = frozenset({Dimension.TRAINING_VALUE})


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accept: float = Field(ge=0, le=1)
    """Composite at or above which a task (without hard rejects) is accepted."""
    borderline: float = Field(ge=0, le=1)
    """Composite at or above which a task is borderline (repair candidates); below: rejected."""

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.borderline > self.accept:
            raise ValueError(
                f"borderline threshold {self.borderline} exceeds accept threshold {self.accept}"
            )
        return self


class Rubric(BaseModel):
    """One audit rubric. `name` and `version` enter the audit version of every result."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    weights: dict[Dimension, float]
    """Weight per dimension; all six present, non-negative, summing to 1, alignment largest."""
    critical_min: dict[Dimension, float] = Field(default_factory=dict)
    """Minimum executable-judge score per dimension (training value may not have one)."""
    llm_critical_min: dict[Dimension, float] = Field(default_factory=dict)
    """Minimum LLM-judge score per dimension, applied to the LLM's own score only (training
    value may not have one). Missing dimensions have no LLM cutoff."""
    thresholds: Thresholds
    hard_reject: list[str] = Field(default_factory=list)
    """Finding codes that reject a task outright (see `audit.verdict.Code`)."""
    repairable: list[str] = Field(default_factory=list)
    """Hard-reject codes an instruction-only repair can fix (stage 4)."""
    llm_weight: float = Field(0.5, ge=0, le=1)
    """Share of the LLM judge's score in a dimension score when the LLM judge is configured
    and scores it below the executable judge (the LLM never raises a score: `blend`)."""

    @model_validator(mode="after")
    def _check(self) -> Rubric:
        missing = [d.value for d in Dimension if d not in self.weights]
        if missing:
            raise ValueError(f"rubric {self.name!r} lacks weights for {missing}")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError(f"weights must be non-negative, got {self.weights}")
        total = sum(self.weights.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1, got {total:.6f}")
        top = max(self.weights.values())
        others = [w for d, w in self.weights.items() if d != Dimension.ALIGNMENT]
        if self.weights[Dimension.ALIGNMENT] != top or self.weights[Dimension.ALIGNMENT] in others:
            raise ValueError("instruction-verifier alignment must carry the largest weight")
        for name, mins in (("critical_min", self.critical_min),
                           ("llm_critical_min", self.llm_critical_min)):  # fmt: skip
            exempt = [d.value for d in mins if d in EXEMPT]
            if exempt:
                raise ValueError(f"{name}: {exempt} are exempt from the critical-minimum cutoff")
            if any(not 0 <= v <= 1 for v in mins.values()):
                raise ValueError(f"{name}: minimums must lie in [0, 1], got {mins}")
        stray = sorted(set(self.repairable) - set(self.hard_reject))
        if stray:
            raise ValueError(f"repairable codes {stray} are not hard-reject codes")
        return self

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"


def load_rubric(ref: str | Path = "t1") -> Rubric:
    """A preset by name (`audit/presets/<name>.toml`) or a TOML file path; ValueError if bad."""
    path = Path(ref)
    if not path.suffix:
        path = PRESET_DIR / f"{ref}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
        raise ValueError(f"no rubric file {str(path)!r} (presets: {known})")
    try:
        return Rubric.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as e:
        raise ValueError(f"invalid rubric {str(path)!r}: {e}") from e


def composite(scores: dict[Dimension, float], rubric: Rubric) -> float:
    """Weighted sum of the six dimension scores (each clipped to [0, 1])."""
    missing = [d.value for d in Dimension if d not in scores]
    if missing:
        raise ValueError(f"scores lack dimensions {missing}")
    return sum(rubric.weights[d] * min(1.0, max(0.0, scores[d])) for d in Dimension)


def blend(
    exec_score: float,
    llm_score: float | None,
    llm_weight: float,
    minimum: float | None = None,
    llm_minimum: float | None = None,
) -> float:
    """A dimension score from the executable judge and (when present) the LLM judge.

    The LLM may lower a score, never raise it above what the executable evidence supports:
    the blend is at most `exec_score` (a judge answering 0.95 to everything cannot lift a
    borderline task over the accept line). Blending never lifts a failed dimension either:
    when the executable score is below `minimum` or the LLM's is below `llm_minimum`
    (default: `minimum`), the blend is at most the lower of the two (a judge scoring
    alignment 0 cannot be averaged up to an accept)."""
    if llm_score is None:
        return exec_score
    mixed = min(exec_score, (1.0 - llm_weight) * exec_score + llm_weight * llm_score)
    llm_minimum = minimum if llm_minimum is None else llm_minimum
    failed = (minimum is not None and exec_score < minimum) or (
        llm_minimum is not None and llm_score < llm_minimum
    )
    return min(mixed, exec_score, llm_score) if failed else mixed


@dataclass(frozen=True)
class Decision:
    """A rubric verdict: the composite, and why (hard rejects, cutoff misses, threshold)."""

    verdict: Verdict
    composite: float
    hard: list[str] = field(default_factory=list)
    below_min: list[Dimension] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    scores: dict[Dimension, float] = field(default_factory=dict)
    """The dimension scores the composite is over (blended when the LLM judge scored)."""


def decide(
    scores: dict[Dimension, float],
    codes: list[str],
    rubric: Rubric,
    llm_scores: dict[Dimension, float] | None = None,
) -> Decision:
    """The verdict for one task from its executable dimension scores, the LLM judge's (when
    it scored) and its findings' codes.

    Rejected when any code is a hard reject, any non-exempt executable score falls below
    `critical_min`, or any LLM score below `llm_critical_min`; otherwise accepted /
    borderline / rejected by the composite of the blended scores.
    """
    llm_scores = llm_scores or {}
    blended = {
        d: blend(
            s,
            llm_scores.get(d),
            rubric.llm_weight,
            rubric.critical_min.get(d),
            rubric.llm_critical_min.get(d),
        )
        for d, s in scores.items()
    }
    comp = composite(blended, rubric)
    hard = sorted({c for c in codes if c in rubric.hard_reject})
    exec_low = [d for d, m in rubric.critical_min.items() if scores[d] < m]
    llm_low = [
        d for d, m in rubric.llm_critical_min.items() if d in llm_scores and llm_scores[d] < m
    ]
    below = [d for d in Dimension if d in exec_low or d in llm_low]
    reasons = [f"hard reject: {c}" for c in hard]
    reasons += [
        f"{d.value} {scores[d]:.2f} < critical minimum {rubric.critical_min[d]:.2f}"
        for d in exec_low
    ]
    reasons += [
        f"llm/{d.value} {llm_scores[d]:.2f} < LLM critical minimum {rubric.llm_critical_min[d]:.2f}"
        for d in llm_low
    ]
    if hard or below:
        return Decision(Verdict.REJECTED, comp, hard, below, reasons, blended)
    t = rubric.thresholds
    if comp >= t.accept:
        verdict = Verdict.ACCEPTED
    elif comp >= t.borderline:
        verdict = Verdict.BORDERLINE
    else:
        verdict = Verdict.REJECTED
    reasons.append(
        f"composite {comp:.3f} -> {verdict.value} (accept >= {t.accept:.2f}, "
        f"borderline >= {t.borderline:.2f})"
    )
    return Decision(verdict, comp, hard, below, reasons, blended)


def repairable(decision: Decision, rubric: Rubric) -> bool:
    """Whether an instruction-only repair could change this decision.

    Borderline tasks, and rejected tasks whose every hard reject is repairable and whose only
    cutoff miss (if any) is alignment.
    """
    if decision.verdict == Verdict.BORDERLINE:
        return True
    if decision.verdict != Verdict.REJECTED or not decision.hard:
        return False
    only_alignment = all(d == Dimension.ALIGNMENT for d in decision.below_min)
    return only_alignment and all(c in rubric.repairable for c in decision.hard)
