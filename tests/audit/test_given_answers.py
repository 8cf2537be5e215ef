"""The pure readings behind a computed answer given to the agent in a file it can read
(audit.perturbation.inputs_used, given_expectations; docs/audit.md, "A second blind set")."""

from __future__ import annotations

from audit.perturbation import given_expectations, inputs_used
from audit.verdict import Code
from tasks.literals.model import CoverageVerdict, Literal, LiteralKind

IMAGE = {"app/ci.yml": "/app/ci.yml", "app/data.csv": "/app/data.csv"}


def _stated(value: str, where: str = "environment/app/ci.yml", how: str = "exact"):
    lit = Literal(value=value, kind=LiteralKind.STRING, file="test_outputs.py", line=9)
    return CoverageVerdict(lit, True, where, how=how)


def test_a_named_file_the_solution_never_touched_is_no_input():
    inputs = {"app/data.csv": "/app/data.csv", "app/schema.json": "/app/schema.json"}
    assert inputs_used(inputs, {"/app/data.csv", "/etc/passwd"}, []) == {"app/data.csv"}
    # moved away (never opened) is used; untraced: every named file counts
    assert inputs_used(inputs, set(), ["/app/schema.json"]) == {"app/schema.json"}
    assert inputs_used(inputs, None, []) == set(inputs)


def test_an_expected_value_the_solution_computes_in_a_file_it_never_opened_is_a_leak():
    cov = [_stated("count=83 mean=205.57 max=753")]
    [found] = given_expectations(cov, "awk -F, '{s+=$3}' \"$1\"", True, IMAGE, {"/app/data.csv"})
    assert found.code == Code.TEST_LEAKAGE and "environment/app/ci.yml" in found.evidence


def test_what_is_not_a_given_answer():
    leak = [_stated("count=83 mean=205.57 max=753")]
    solution = "awk -F, '{s+=$3}' \"$1\""
    # the tests' expectation never follows the inputs: a constant stated in a file
    assert given_expectations(leak, solution, False, IMAGE, set()) == []
    # the solution opened the file: a value it copies from an input
    assert given_expectations(leak, solution, True, IMAGE, {"/app/ci.yml"}) == []
    # the solution spells the value: a shortcut's or a constant's, not a computed answer
    assert given_expectations(leak, "echo 'count=83 mean=205.57 max=753'", True, IMAGE, set()) == []
    # no answer-like token (a short word or count stands in many files by chance)
    assert given_expectations([_stated("status=ok n=3")], solution, True, IMAGE, set()) == []
    # stated in the instruction, or only as an example of a pattern, or not in the image
    assert (
        given_expectations([_stated("205.57", "instruction.md")], solution, True, IMAGE, set())
        == []
    )
    assert (
        given_expectations([_stated("205.57", how="example")], solution, True, IMAGE, set()) == []
    )
    assert (
        given_expectations(
            [_stated("205.57", "environment/Dockerfile")], solution, True, IMAGE, set()
        )
        == []
    )
