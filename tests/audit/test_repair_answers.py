"""A repair states positions and forms, never the computed answer, and never drops a
requirement (issue 22, item 5). Regression: the instruction-only repair of a hidden
requirement wrote the computed answer into the instruction, and the re-audit accepted it.

The task: the base log report plus a summary file `/app/report/summary.txt` holding
`errors=<the ERROR count>`; the instruction never names the summary (a hidden path), and the
verifier asserts the computed line literally. The LLM is a real loopback server (`llm`)."""

from __future__ import annotations

import json

import pytest

from audit.answers import oracle_answers, stated_answers
from audit.judge_exec import ExecConfig, ExecEvidence, run_exec_judge
from audit.repair import SECTION, repair_instruction, requirement_line
from audit.rubric import load_rubric
from audit.selection import SelectionConfig, Stage, run_selection
from audit.static_checks import static_findings, visible_texts
from audit.verdict import Code, Finding, Verdict
from tasks.literals import LiteralKind
from tests.audit.planted import INSTRUCTION, SOLVE, TESTS, base_task, error_count
from warehouse.recording import record_audits

SUMMARY = "/app/report/summary.txt"
COUNT = str(error_count())


def summary_task():
    tests = (
        TESTS
        + f"""

def test_summary():
    with open("{SUMMARY}") as f:
        assert f.read().strip() == "errors={COUNT}", "wrong summary"
"""
    )
    solve = SOLVE + f"echo \"errors=$(grep -c '^ERROR ' /app/app.log)\" > {SUMMARY}\n"
    base = base_task()
    return base_task(
        "audit-summary",
        solution={"solve.sh": solve.encode()},
        verifier=base.verifier | {"test_outputs.py": tests.encode()},
    )


def oracle_evidence(task):
    """The findings the executable judge records for `task`: its static ones, and the
    answers of the oracle's outputs (computed in Python here as the oracle writes them, and
    as a digit-shifted input changes them)."""
    errors = error_count()
    outputs = {SUMMARY: f"errors={errors}\n", "/app/report/errors.txt": f"{errors}\n"}
    shifted = {p: t.replace(str(errors), str(errors + 37)) for p, t in outputs.items()}
    found = oracle_answers(
        outputs, {"shift-digits": shifted}, visible_texts(task), [f"errors={errors}"]
    )
    return [*static_findings(task).findings, *found]


def test_oracle_answers_are_the_computed_values_nothing_visible_holds():
    task = summary_task()
    outputs = {
        "/app/report/errors.txt": f"{COUNT}\n",
        "/app/report/messages.txt": "disk full\n",
        SUMMARY: "status: complete\n",
    }
    perturbed = {
        # letters rotated: grep finds no ERROR line, exits 1 and `set -e` stops the script
        "rot13-words": {"/app/report/errors.txt": "0\n", "/app/report/messages.txt": ""},
        "drop-lines": {
            "/app/report/errors.txt": "12\n",
            "/app/report/messages.txt": "disk\n",
            SUMMARY: "status: complete\n",
        },  # fmt: skip
    }
    found = oracle_answers(outputs, perturbed, visible_texts(task))
    # the words are the log's own (the agent reads them); the summary's constant is no
    # answer though a run that stopped early never wrote it; the count is computed
    assert [(f.code, f.item, f.evidence) for f in found] == [
        (Code.ORACLE_ANSWER, COUNT, "line 1 of /app/report/errors.txt")
    ]
    answers = {f.item: f.evidence for f in found}
    assert stated_answers(f"There are {COUNT} errors.", answers) == [COUNT]
    assert stated_answers(f"ids 1{COUNT}0 and x{COUNT}", answers) == []  # not the token
    assert stated_answers(f"There are {COUNT}.", answers, original=f"was {COUNT}") == []


def test_programmatic_repair_states_the_position_not_the_answer():
    task = summary_task()
    findings = oracle_evidence(task)
    assert any(f.code == Code.HIDDEN_REQUIREMENT and f.item == SUMMARY for f in findings)
    lit = next(
        v.literal for v in static_findings(task).facts.coverage if v.literal.value == SUMMARY
    )
    assert lit.kind == LiteralKind.PATH
    answers = {f.item: f.evidence for f in findings if f.code == Code.ORACLE_ANSWER}
    assert answers[COUNT] == f"line 1 of {SUMMARY}" or answers[COUNT].endswith("errors.txt")
    new = repair_instruction(task, findings)
    assert new is not None and SECTION in new.instruction and SUMMARY in new.instruction
    assert COUNT not in new.instruction


def test_a_hidden_literal_holding_an_answer_is_stated_by_position_and_form():
    task = summary_task()
    lit = next(
        v.literal
        for v in static_findings(task).facts.coverage
        if v.literal.value == f"errors={COUNT}"
    )
    line = requirement_line(lit, {COUNT: f"line 1 of {SUMMARY}"})
    assert COUNT not in line and line.startswith(f"- Line 1 of {SUMMARY} must hold")
    assert requirement_line(lit) == f"- The output must contain exactly `errors={COUNT}` " + (
        "where it applies (case-sensitive)."
    )


LEAKY = INSTRUCTION + f"\n3. Write `errors={COUNT}` to `{SUMMARY}`.\n"
HONEST = INSTRUCTION + (
    f"\n3. Write one line `errors=N` to `{SUMMARY}`, N being the number of `ERROR` lines.\n"
)
DROPS = INSTRUCTION.split("2. ")[0] + f"2. Write a summary line to `{SUMMARY}`.\n"


def test_an_llm_rewrite_stating_the_answer_is_refused(llm):
    fake, cfg = llm
    fake.script = [LEAKY]
    task, refused = summary_task(), list[Finding]()
    new = repair_instruction(task, oracle_evidence(task), llm=cfg, refused=refused)
    assert len(fake.requests) == 1
    asked = fake.requests[0]["messages"][1]["content"]
    assert COUNT not in asked  # the LLM is not told the answer either
    assert [(f.code, f.item) for f in refused] == [(Code.REPAIR_REFUSED, COUNT)]
    assert "computed answer" in refused[0].evidence
    assert new is not None and COUNT not in new.instruction  # the programmatic repair
    assert SECTION in new.instruction and SUMMARY in new.instruction


def test_an_llm_rewrite_dropping_a_requirement_is_refused(llm):
    fake, cfg = llm
    fake.script = [DROPS]
    task, refused = summary_task(), list[Finding]()
    new = repair_instruction(task, oracle_evidence(task), llm=cfg, refused=refused)
    items = {f.item for f in refused}
    assert "/app/report/messages.txt" in items, refused  # stated before, gone after
    assert all(f.code == Code.REPAIR_REFUSED for f in refused)
    assert new is not None and "/app/report/messages.txt" in new.instruction


def test_an_honest_llm_rewrite_is_kept(llm):
    fake, cfg = llm
    fake.script = [HONEST]
    task, refused = summary_task(), list[Finding]()
    new = repair_instruction(task, oracle_evidence(task), llm=cfg, refused=refused)
    assert refused == [] and new is not None and new.instruction == HONEST
    assert SUMMARY not in {lit.value for lit in static_findings(new).hidden}


def test_the_repair_stage_records_the_refusal(llm, tmp_path):
    fake, cfg = llm
    score = json.dumps({"score": 0.95, "rationale": "fine", "hard_reject": None})
    fake.script = [score] * 6 + [LEAKY, score]
    task = summary_task()
    measures = {"alignment_share": 0.8, "oracle_pass_share": 1.0, "assertions": 6.0,
                "nop_pass_share": 0.0, "effect_coverage": 1.0, "mutation_kill_rate": 1.0,
                "solution_steps": 6.0, "rerun_stable": 1.0}  # fmt: skip
    ev = ExecEvidence(
        task_hash=task.content_hash, measures=measures, findings=oracle_evidence(task)
    )
    store = tmp_path / "store"
    record_audits(store, [ev.to_record()])
    sel = SelectionConfig(rubric=load_rubric("t1"), llm=cfg, until=Stage.REPAIR)
    result = run_selection(store, [task], sel)
    assert result.measured == []  # the stored evidence was used
    (sem,) = result.by_stage(Stage.SEMANTIC)
    assert sem.verdict == Verdict.REJECTED and "hard reject: hidden_requirement" in sem.reasons
    (rep,) = result.by_stage(Stage.REPAIR)
    assert rep.verdict == Verdict.REPAIRED
    refused = [f for f in rep.findings if f.code == Code.REPAIR_REFUSED]
    assert [f.item for f in refused] == [COUNT]


@pytest.mark.sandbox
def test_the_executable_judge_records_the_oracle_answers():
    task = summary_task()
    ev = run_exec_judge(task, ExecConfig(reruns=0, conditions=False, chance=False, max_mutants=0,
                                         max_output_mutants=0))  # fmt: skip
    answers = {f.item: f.evidence for f in ev.findings if f.code == Code.ORACLE_ANSWER}
    assert COUNT in answers, ev.findings
    assert answers[COUNT].startswith("line 1 of /app/report/")
    assert not any(a in INSTRUCTION for a in answers)
