"""The pure reading behind a reference solution bound to the given bytes
(audit.behaviour.bound_to_given_bytes; docs/audit.md, "A second blind set"): it writes its
outputs on the given inputs and on neither variant that keeps every line of them."""

from __future__ import annotations

from audit.behaviour import bound_to_given_bytes
from audit.verdict import Code

OUT = "/app/summary.json"
BASE = {OUT: "h0"}


def test_failing_on_both_line_keeping_variants_is_a_shortcut():
    runs = [("drop-lines", {OUT: None}, 1), ("reverse-records", {OUT: None}, 1)]
    found = bound_to_given_bytes(BASE, runs)
    assert found is not None and found.code == Code.SOLUTION_SHORTCUT and found.item == OUT
    # an exit status alone, or an output left unwritten alone, is a failure too
    runs = [("drop-lines", {OUT: "h1"}, 2), ("reverse-records", {OUT: None}, 0)]
    assert bound_to_given_bytes(BASE, runs) is not None


def test_what_is_not_bound_to_the_given_bytes():
    failed = ("drop-lines", {OUT: None}, 1)
    # runs through on one variant: it reads what the lines say (a required line dropped, or
    # an order it checks, fails the other)
    assert bound_to_given_bytes(BASE, [failed, ("reverse-records", {OUT: "h2"}, 0)]) is None
    # one variant not measured (its records cannot be reversed): no evidence
    assert bound_to_given_bytes(BASE, [failed]) is None
    # a form-changing perturbation failing is not counted
    assert bound_to_given_bytes(BASE, [failed, ("rot13-words", {OUT: None}, 1)]) is None
    # nothing written on the given inputs either
    runs = [failed, ("reverse-records", {OUT: None}, 1)]
    assert bound_to_given_bytes({OUT: None}, runs) is None
