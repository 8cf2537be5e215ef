"""The LLM judge measured on a labelled set of 48 judgements (tests/audit/llm_agreement.py;
the figures are in docs/audit.md, printed by benchmarks/llm_judge_agreement.py): every
judgement decided, no hard reject where a correct judge names none, and agreement with the
labels on the hard-reject class and the broken flag together."""

from __future__ import annotations

from tests.audit.llm_agreement import agreement, fake_model, judge_all, labelled, script_of


def test_the_judge_agrees_with_the_labelled_judgements():
    doc = labelled()
    assert len(doc["judgements"]) >= 40
    with fake_model() as model:
        model.set_script(script_of(doc))
        outcomes = judge_all(model.config(), doc)
    got = agreement(outcomes)
    wrong = [o for o in outcomes if not o.agrees]
    assert got.undecided == 0, [o for o in outcomes if o.broken is None]
    assert got.false_hard == 0, [o for o in wrong if o.hard]
    assert got.missed_hard == 0, [o for o in wrong if o.label_hard]
    # the misses left are the model's own misjudgements of a score (labelled in the fixture)
    notes = {j["id"]: j["note"] for j in doc["judgements"]}
    assert all(notes[o.id].startswith("model ") for o in wrong), wrong
    assert got.rate >= 0.9, got
