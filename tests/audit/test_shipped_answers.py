"""An answer the task ships where the solution never looked (`perturbation.shipped_answers`):
the third blind set's two leaks, written by helpers who never read the audit, were accepted
at exec judge 25. An editor's backup of the fixed nginx site (`shop.conf~`, byte-identical to
what the reference leaves) and a log generator's record of its data (`.gen_manifest.json`,
whose `error_counts` is the expected JSON in another key order) are neither named like an
answer nor labelled: what marks them is that the solution's own output stands in them, and
that the solution never opened them (traced) and the instruction never names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
from audit.perturbation import shipped_answers
from audit.verdict import Code
from tasks.corpus import load_task
from tests.audit.forms import OFF, decision, judge_set, texts

BLIND3 = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind3"
CONF = "server {\n    listen 8080;\n    root /srv/shop;\n}\n"
COUNTS = {"auth": 23, "billing": 19, "notify": 0}


def leaks(outputs, shipped, instruction="Fix the site.", unread=None):
    found = shipped_answers(
        outputs, shipped, instruction, set(shipped) if unread is None else unread
    )
    return [(f.code, f.item) for f in found]


def test_a_shipped_copy_of_the_fixed_file_is_a_leak():
    shipped = {"/app/site.conf": CONF.replace("8080;", "8080"), "/app/site.conf~": CONF}
    assert leaks({"/app/site.conf": CONF}, shipped) == [(Code.TEST_LEAKAGE, "/app/site.conf~")]


def test_the_data_of_a_json_output_inside_a_shipped_json_file_is_a_leak():
    out = json.dumps(dict(sorted(COUNTS.items())), indent=2)
    record = json.dumps({"seed": 7, "lines": 600, "error_counts": dict(reversed(COUNTS.items()))})
    assert leaks({"/app/counts.json": out}, {"/app/logs/.record.json": record}) == [
        (Code.TEST_LEAKAGE, "/app/logs/.record.json")
    ]


@pytest.mark.parametrize(
    "why",
    ["read by the solution or named", "the instruction spells it", "its own shipped text",
     "one short line", "other data", "two values only"],
)  # fmt: skip
def test_what_is_not_a_shipped_answer(why):
    shipped = {"/app/site.conf~": CONF}
    outputs = {"/app/site.conf": CONF}
    unread = None
    instruction = "Fix the site."
    if why == "read by the solution or named":
        unread = set()
    elif why == "the instruction spells it":
        instruction = f"Write this config:\n\n{CONF}"
    elif why == "its own shipped text":
        shipped = {"/app/site.conf": CONF, "/app/site.conf~": CONF}
    elif why == "one short line":
        outputs, shipped = {"/app/n.txt": "42\n"}, {"/app/notes.txt": "42\n"}
    elif why == "other data":
        outputs = {"/app/c.json": json.dumps(COUNTS, indent=2)}
        shipped = {"/app/r.json": json.dumps({"error_counts": {**COUNTS, "auth": 24}})}
    elif why == "two values only":
        outputs = {"/app/c.json": json.dumps({"a": 1, "b": 2}, indent=1)}
        shipped = {"/app/r.json": json.dumps({"x": {"b": 2, "a": 1}})}
    assert leaks(outputs, shipped, instruction, unread) == []


LEAKS = {
    "leakage--nginx-site-tilde-backup": "/app/nginx/sites/shop.conf~",
    "leakage--datagen-manifest": "/app/logs/.gen_manifest.json",
}
CONTROLS = ["clean--session-gaps", "clean--make-header-dependencies"]


@pytest.fixture(scope="module")
def evidence() -> dict[str, ExecEvidence]:
    """The reference solution's traced run alone: every other probe off."""
    return judge_set(BLIND3, {name: {} for name in [*LEAKS, *CONTROLS]})


@pytest.mark.sandbox
@pytest.mark.parametrize("name", list(LEAKS))
def test_the_blind_sets_shipped_answers_are_leaks(evidence, name):
    ev = evidence[name]
    assert [f.item for f in ev.findings if f.code == Code.TEST_LEAKAGE] == [LEAKS[name]], texts(ev)
    assert Code.TEST_LEAKAGE.value in decision(ev).hard


@pytest.mark.sandbox
@pytest.mark.parametrize("name", CONTROLS)
def test_a_clean_control_ships_no_answer(evidence, name):
    assert Code.TEST_LEAKAGE not in evidence[name].codes() and not decision(evidence[name]).hard


@pytest.mark.sandbox
@pytest.mark.docker
def test_the_editors_backup_is_a_leak_on_the_docker_backend(docker_engine):
    name = "leakage--nginx-site-tilde-backup"
    ev = run_exec_judge(load_task(BLIND3 / name), ExecConfig(**OFF, backend="docker", workers=2))
    assert [f.item for f in ev.findings if f.code == Code.TEST_LEAKAGE] == [LEAKS[name]], texts(ev)
