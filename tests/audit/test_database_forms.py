"""A SQLite database that is both the input and where the answer goes: the blind set's
`shortcut--sql-literal-insert` (its solution inserts the five answer rows as literals) is
rejected as a shortcut once the database's tables are perturbed and read as outputs; its
twin that computes the same rows with `INSERT ... SELECT` is not.

Before: the perturbations changed text inputs only, and a database changed in place was no
new output, so neither task had any shortcut evidence (docs/audit.md, "Measured on a blind
set")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.databases import view_name
from audit.verdict import Code, Verdict
from tests.audit.forms import decision, judge_set, texts

pytestmark = pytest.mark.sandbox

BLIND = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind"
FORM = "shortcut--sql-literal-insert"
TWIN = "clean--sql-computed-insert"
COMPUTED = """#!/bin/bash
set -e
sqlite3 /app/shop.db <<'SQL'
DROP TABLE IF EXISTS region_revenue;
CREATE TABLE region_revenue (
    region TEXT PRIMARY KEY, paid_orders INTEGER NOT NULL, revenue_cents INTEGER NOT NULL);
INSERT INTO region_revenue
SELECT c.region, count(o.id), coalesce(sum(o.amount_cents), 0)
FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.status = 'paid'
GROUP BY c.region;
SQL
"""
TABLE = view_name("/app/shop.db", "region_revenue")


@pytest.fixture(scope="module")
def evidence(tmp_path_factory):
    root = tmp_path_factory.mktemp("sql-forms")
    shutil.copytree(BLIND / FORM, root / FORM)
    shutil.copytree(BLIND / FORM, root / TWIN)
    (root / TWIN / "solution" / "solve.sh").write_text(COMPUTED)
    return judge_set(root, {FORM: dict(perturb=True), TWIN: dict(perturb=True)})


def test_answer_rows_inserted_as_literals_are_a_shortcut_by_the_table(evidence):
    ev = evidence[FORM]
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, texts(ev)
    assert Code.SOLUTION_SHORTCUT.value in decided.hard, texts(ev)
    hit = [f for f in ev.findings if f.code == Code.SOLUTION_SHORTCUT]
    assert [f.item for f in hit] == [TABLE], texts(ev)
    # revenues solve.sh spells and the tests recompute from the (perturbed) orders
    assert "1070239" in hit[0].evidence and "463830" in hit[0].evidence


def test_the_same_rows_computed_by_a_query_are_not(evidence):
    ev = evidence[TWIN]
    decided = decision(ev)
    assert decided.verdict != Verdict.REJECTED and not decided.hard, texts(ev)
    moved = [f.item for f in ev.findings if f.code == Code.INPUTS_PERTURBED]
    assert moved == [TABLE], texts(ev)
