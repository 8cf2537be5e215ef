"""Typed records of what a trial produced: per-assertion outcomes and the trial result.

A trial result never stands for an exception: a task's own failure (timeout, OOM, a broken
verifier) is a `FailureMode` plus detail inside the record.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class AssertionStatus(StrEnum):
    """Raw statuses as verifiers report them (pytest / CTRF / JUnit vocabulary)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAIL = "xfail"
    XPASS = "xpass"
    ERROR = "error"


# Terminal-Bench semantics: PASSED, XFAIL and SKIPPED count as pass.
PASSING_STATUSES = frozenset(
    {AssertionStatus.PASSED, AssertionStatus.XFAIL, AssertionStatus.SKIPPED}
)


class AssertionResult(BaseModel):
    name: str
    status: AssertionStatus
    message: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in PASSING_STATUSES


class ReportSource(StrEnum):
    CTRF = "ctrf"
    JUNIT = "junit"
    PYTEST = "pytest"
    RUN_CHECKS = "run_checks"  # the seeds' runner (tasks/checkrunner.py), by the report channel
    REWARD = "reward"  # only reward.txt: a binary verifier
    NONE = "none"


class AgentCode(BaseModel):
    """A file of the agent's that the test runner executed in its own process (a module its
    tests imported from the agent's outputs), after recording `after` outcomes, while running
    `test` ('' outside any test: collecting the tests, the runner's own start)."""

    path: str
    after: int = Field(ge=0)
    test: str = ""


class VerifierReport(BaseModel):
    """What one verifier run reported. `parse_error` set means no usable record."""

    assertions: list[AssertionResult] = Field(default_factory=list)
    source: ReportSource = ReportSource.NONE
    reward: float | None = None
    parse_error: str | None = None
    authenticated: bool = False
    """The verdict came through the report channel (the runner's HMAC-authenticated records),
    not from files or output that any program the verifier runs can write."""
    agent_code: list[AgentCode] = Field(default_factory=list)
    """Files of the agent's the authenticated runner executed in its own process: from the
    first on, what the runner recorded is not the judge's own (the agent's code ran in it)."""
    agent_word: list[str] = Field(default_factory=list)
    """Tests that handed their judgment to a value of the agent's module running in its own
    process (compared it, took its truth): their outcomes are the agent's word ('': one
    outside any test, which leaves no outcome the judge's)."""

    @property
    def independent(self) -> bool:
        """Every outcome is the judge's own (`vouched`): recorded before any code of the
        agent's ran in the runner, or vouched for by a rerun with the agent's modules in a
        process of their own; none took the agent's word. A report without outcomes (a
        binary reward) is independent only if no code of the agent's ran at all."""
        if not self.assertions:
            return not self.agent_code and not self.agent_word
        return len(self.vouched) == len(self.assertions) and "" not in self.agent_word

    @property
    def vouched(self) -> list[AssertionResult]:
        """The assertions recorded before the runner first executed the agent's code (all of
        them when it never did), but those of tests that took the agent's word: the ones the
        judge vouches for."""
        if "" in self.agent_word:
            return []
        head = self.assertions[: self.agent_code[0].after] if self.agent_code else self.assertions
        worded = set(self.agent_word)
        return [a for a in head if a.name not in worded] if worded else head

    @property
    def binary(self) -> bool:
        return self.source == ReportSource.REWARD

    @property
    def passed(self) -> int:
        return sum(a.ok for a in self.assertions)

    @property
    def total(self) -> int:
        return len(self.assertions)


class FailureMode(StrEnum):
    NONE = "none"
    AGENT_TIMEOUT = "agent_timeout"
    VERIFIER_TIMEOUT = "verifier_timeout"
    PARSE_ERROR = "parse_error"
    ENVIRONMENT_ERROR = "environment_error"
    OUT_OF_MEMORY = "out_of_memory"
    OUTPUT_LIMIT = "output_limit"
    DISK_LIMIT = "disk_limit"
    AGENT_ERROR = "agent_error"
    TAMPERED = "tampered"  # the agent wrote where the verifier's run depends on it
    VERIFIER_KILLED = "verifier_killed"  # the verifier died by a signal: its report is void
    VERIFIER_ERROR = "verifier_error"  # the verifier never ran (126/127, no runner, no report)
    SANDBOX_ERROR = "sandbox_error"
    CANCELLED = "cancelled"  # stopped by the caller (straggler cancel, Ctrl-C)
    ENGINE_ERROR = "engine_error"  # the inference engine failed or kept aborting a turn

    @property
    def infrastructure(self) -> bool:
        """Not the agent's doing: such a trial is no evidence about the agent and never
        becomes reward (a 0 would teach the policy that the harness failed)."""
        return self in INFRASTRUCTURE_FAILURES


INFRASTRUCTURE_FAILURES = frozenset(
    {
        FailureMode.ENVIRONMENT_ERROR,
        FailureMode.VERIFIER_ERROR,
        FailureMode.SANDBOX_ERROR,
        FailureMode.CANCELLED,
        FailureMode.ENGINE_ERROR,
    }
)


# Trials whose report is no verdict (TrialResult.passed is 0): the agent wrote where the
# verifier's run depends on it, or the verifier did not finish its own run.
VOID_VERDICTS = frozenset(
    {FailureMode.TAMPERED, FailureMode.VERIFIER_KILLED, FailureMode.VERIFIER_TIMEOUT}
)


class TrialResult(BaseModel):
    """One sandbox trial of one task by one agent."""

    trial_id: str
    task_id: str
    task_hash: str
    agent: str
    backend: str
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    environment_s: float = 0.0
    agent_s: float = 0.0
    verifier_s: float = 0.0
    total_s: float = 0.0
    failure_mode: FailureMode = FailureMode.NONE
    failure_detail: str = ""
    report: VerifierReport = Field(default_factory=VerifierReport)
    agent_exit_code: int | None = None
    verifier_exit_code: int | None = None
    verifier_output: str = ""

    @property
    def assertions(self) -> list[AssertionResult]:
        return self.report.assertions

    @property
    def passed(self) -> int:
        """Dense reward: the number of passing assertions; 0 for a tampered trial, and for one
        whose verifier did not finish (killed by a signal, or stopped until its timeout): a
        report found then was not necessarily written by the verifier's own harness."""
        if self.failure_mode in VOID_VERDICTS:
            return 0
        return self.report.passed

    @property
    def independent_passed(self) -> int:
        """`passed`, counting only the outcomes the judge vouches for (`VerifierReport.
        vouched`: recorded before the runner executed code of the agent's in its own process,
        or vouched for by a rerun with the agent's modules in a process of their own): what
        the agent's code could not have written. The reward a trainer may trust."""
        if self.failure_mode in VOID_VERDICTS:
            return 0
        return sum(a.ok for a in self.report.vouched)

    @property
    def rewardable(self) -> bool:
        """False when the trial says nothing about the agent (an infrastructure failure):
        keep such trials out of rewards, pass rates and training batches."""
        return not self.failure_mode.infrastructure

    @property
    def total(self) -> int:
        return self.report.total

    def pay(self, reference: ReferenceVerdict | None) -> Pay:
        """What this trial earns, measured against the task's reference verdict (`pay`)."""
        return pay(self, reference)

    @property
    def resolved(self) -> bool:
        """All assertions pass (or, for a binary verifier, reward is 1)."""
        if self.failure_mode not in (FailureMode.NONE, FailureMode.AGENT_TIMEOUT):
            return False
        if self.report.binary:
            return (self.report.reward or 0.0) >= 1.0
        return self.total > 0 and self.passed == self.total


# ---- what a trial is paid (the dense reward) -------------------------------------------------


class ReferenceOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    status: AssertionStatus


class ReferenceVerdict(BaseModel):
    """The outcomes the reference solution's verified run earned: what a trial of the task is
    paid for. Recorded by the audit (its oracle trial) and read by the trainer."""

    model_config = ConfigDict(frozen=True)

    outcomes: tuple[ReferenceOutcome, ...]

    @classmethod
    def of(cls, oracle: TrialResult) -> ReferenceVerdict | None:
        """The verdict of a resolved oracle trial whose per-assertion record is the judge's
        own (no code of the agent's ran in the runner); None for any other trial."""
        report = oracle.report
        if not oracle.resolved or report.binary or not report.independent or not oracle.total:
            return None
        return cls(
            outcomes=tuple(
                ReferenceOutcome(name=a.name, status=a.status) for a in report.assertions
            )
        )

    @property
    def total(self) -> int:
        return len(self.outcomes)


@dataclass(frozen=True)
class Pay:
    """What a trial earns: the outcomes paid (by name) of `total`, and whether it resolved the
    task. For a binary verifier `passed` is empty and `total` 0: only `resolved` pays."""

    passed: tuple[str, ...]
    total: int
    resolved: bool


def pay(trial: TrialResult, reference: ReferenceVerdict | None) -> Pay:
    """The dense reward of `trial`: its passing outcomes the judge vouches for (none of a void
    verdict, none recorded after the agent's code ran in the runner).

    With the task's reference verdict, only outcomes the reference also earned are paid, each
    as often as the reference has it, and a skip only where the reference skipped too; `total`
    is the reference's. So neither an outcome the agent's state adds (tests parametrized over
    the files it wrote) nor a skip it provokes (a test that skips when an output is missing)
    is paid, and no trial earns more than the reference solution. Without one (a task never
    audited, or one without a reference solution), every vouched passing outcome but a skip
    is paid, and a trial with a skip is not resolved: without the reference's, a skip is
    evidence of nothing the agent did (`TrialResult.resolved` keeps Terminal-Bench's count,
    for benchmark numbers)."""
    report = trial.report
    resolved = trial.resolved and report.independent
    if report.binary:
        return Pay((), 0, resolved)
    vouched = [] if trial.failure_mode in VOID_VERDICTS else report.vouched
    if reference is None:
        names = tuple(a.name for a in vouched if a.ok and a.status != AssertionStatus.SKIPPED)
        return Pay(names, trial.total, resolved and len(names) == trial.total)
    left = Counter(o.name for o in reference.outcomes)
    skipped = {o.name for o in reference.outcomes if o.status == AssertionStatus.SKIPPED}
    paid = []
    for a in vouched:
        if not a.ok or left[a.name] == 0:
            continue
        if a.status == AssertionStatus.SKIPPED and a.name not in skipped:
            continue
        left[a.name] -= 1
        paid.append(a.name)
    return Pay(tuple(paid), reference.total, resolved and len(paid) == reference.total)
