"""The audit's typed vocabulary: one verdict enum for every stage, finding codes, where a
finding came from, and the finding record itself.

A finding is data, never a sentence to parse: `code` says what it is, `source` who saw it,
`item` what it is about (a literal, a path, a mutant, a rerun condition, a dimension), and
`evidence` the human-readable proof (a quoted span, the per-literal verdict, which
assertions changed). Findings are stored as structured columns of the `audits` table.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from warehouse.records import AuditFinding


class Verdict(StrEnum):
    """Every stage row's verdict. `error` marks a decision that could not be made (an
    infrastructure failure, a crashed judge, an unreachable LLM endpoint): such rows are
    kept apart from decided ones and the next run retries them."""

    PASS = "pass"
    ACCEPTED = "accepted"
    BORDERLINE = "borderline"
    REJECTED = "rejected"
    REPAIRED = "repaired"
    UNREPAIRED = "unrepaired"
    ERROR = "error"


class Source(StrEnum):
    STATIC = "static"  # read from the bundle, nothing ran
    TRIAL = "trial"  # measured in sandbox trials
    LLM = "llm"  # the LLM judge
    INFRA = "infra"  # the harness itself (sandbox, environment build, endpoint)


class Code(StrEnum):
    """Finding codes. The rubric names the hard rejects; the last group is evidence only."""

    # defects and risks
    HIDDEN_REQUIREMENT = "hidden_requirement"
    TEST_LEAKAGE = "test_leakage"
    SOLUTION_SHORTCUT = "solution_shortcut"
    WEAK_VERIFIER = "weak_verifier"
    FLAKY_VERIFIER = "flaky_verifier"
    WALL_CLOCK = "wall_clock"
    SOLUTION_READS_TESTS = "solution_reads_tests"
    NO_SOLUTION = "no_solution"
    BINARY_VERIFIER = "binary_verifier"
    ORACLE_FAILS = "oracle_fails"
    NO_ASSERTIONS = "no_assertions"
    NOP_PASSES = "nop_passes"
    LOW_COVERAGE = "low_coverage"
    SLOW_SOLUTION = "slow_solution"
    HACKABLE = "hackable"  # a scripted hack earns more than the threshold share (audit.hacks)
    FREE_REWARD = "free_reward"  # outputs the image ships earn assertions before any work
    RACE = "race"  # a background job never waited for, a sleep as synchronization (static)
    STOCHASTIC_VERDICT = "stochastic_verdict"  # the verdict changes when all draw one entropy
    NETWORK_USE = "network_use"  # the reference solution connected or resolved a name (traced)
    JUDGE_RUNS_AGENT_CODE = "judge_runs_agent_code"  # the oracle's verdict ran the agent's code
    BROKEN_INPUT = "broken_input"  # a data file its own format's reader refuses (audit.formats)
    # the judge could not decide (never a verdict about the task)
    INFRASTRUCTURE = "infrastructure"
    JUDGE_ERROR = "judge_error"
    LLM_ERROR = "llm_error"
    LLM_UNAVAILABLE = "llm_unavailable"  # the endpoint's circuit breaker is open
    LLM_INVALID = "llm_invalid"  # every answer of a run was malformed (bounded: then abstained)
    # evidence
    LITERAL_STATED = "literal_stated"
    LITERAL_DERIVED = "literal_derived"
    LITERAL_UNVERIFIED = "literal_unverified"
    DISCOVERABLE = "discoverable"
    MUTANT_KILLED = "mutant_killed"
    MUTANT_SURVIVED = "mutant_survived"
    HACK_TRIED = "hack_tried"  # one scripted hack's trial: the assertions it passed
    RERUN_STABLE = "rerun_stable"
    RERUN_SKIPPED = "rerun_skipped"
    INPUTS_PERTURBED = "inputs_perturbed"
    SOLUTION_READ = "solution_read"  # a file the traced solution read that nothing declares
    LLM_SCORE = "llm_score"
    LLM_QUOTE_REFUSED = "llm_quote_refused"  # an LLM hard reject whose quote is not evidence
    LLM_ABSTAINED = "llm_abstained"  # no valid answer in `invalid_runs` runs: exec judge alone
    ORACLE_ANSWER = "oracle_answer"  # a value the verifier checks that the solution computes
    REPAIR_REFUSED = "repair_refused"  # a rewrite that states an answer or drops a requirement
    IMPORTED_FROM = "imported_from"
    LINEAGE = "lineage"
    REPAIRED_AS = "repaired_as"
    DECISION = "decision"


FAILURE_CODES = frozenset(
    {Code.INFRASTRUCTURE, Code.JUDGE_ERROR, Code.LLM_ERROR, Code.LLM_UNAVAILABLE, Code.LLM_INVALID}
)
EVIDENCE_CODES = frozenset(list(Code)[list(Code).index(Code.LITERAL_STATED) :])


class Finding(BaseModel):
    """One typed finding (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: Code
    source: Source = Source.STATIC
    item: str = ""
    evidence: str = ""

    @property
    def defect(self) -> bool:
        return self.code not in EVIDENCE_CODES and self.code not in FAILURE_CODES

    def text(self) -> str:
        """One line for people (reports, the CLI); never parsed back."""
        about = f" {self.item!r}" if self.item else ""
        return f"{self.code.value}[{self.source.value}]{about}: {self.evidence}".rstrip(": ")

    def row(self) -> AuditFinding:
        return AuditFinding(
            code=self.code.value, source=self.source.value, item=self.item, evidence=self.evidence
        )

    @classmethod
    def from_row(cls, row: AuditFinding) -> Finding:
        return cls(code=Code(row.code), source=Source(row.source), item=row.item,
                   evidence=row.evidence)  # fmt: skip


def codes(findings: list[Finding]) -> list[Code]:
    return [f.code for f in findings]
