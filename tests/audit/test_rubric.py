"""Rubric config and the pure scoring math, against hand-computed numbers."""

from __future__ import annotations

import pytest

from audit.rubric import (
    Dimension,
    Rubric,
    Verdict,
    blend,
    composite,
    decide,
    load_rubric,
    repairable,
)

D = Dimension


def scores(**kw: float) -> dict[Dimension, float]:
    return {d: kw.get(d.value, 1.0) for d in Dimension}


def test_preset_weights_alignment_largest_and_training_value_exempt():
    r = load_rubric("t1")
    assert abs(sum(r.weights.values()) - 1) < 1e-9
    assert max(r.weights, key=r.weights.get) == D.ALIGNMENT and r.weights[D.ALIGNMENT] == 0.35
    assert D.TRAINING_VALUE not in r.critical_min
    assert set(r.critical_min) == set(Dimension) - {D.TRAINING_VALUE}


def test_composite_by_hand():
    r = load_rubric("t1")
    s = scores(alignment=0.5, fairness=1.0, coverage=0.4, correctness=1.0, reasonableness=0.5,
               training_value=0.0)  # fmt: skip
    # 0.35*0.5 + 0.15*1 + 0.15*0.4 + 0.15*1 + 0.10*0.5 + 0.10*0 = 0.585
    assert composite(s, r) == pytest.approx(0.585)
    assert blend(0.8, 0.4, 0.5) == pytest.approx(0.6) and blend(0.8, None, 0.5) == 0.8


def test_verdict_thresholds_hard_rejects_and_cutoffs():
    r = load_rubric("t1")
    assert decide(scores(), [], r).verdict == Verdict.ACCEPTED
    # composite 0.35*1 + 0.15*(1+0.4+1) + 0.1*(1+0) = 0.81 -> accepted; training value 0 is exempt
    assert decide(scores(coverage=0.4, training_value=0.0), [], r).verdict == Verdict.ACCEPTED
    mid = decide(scores(coverage=0.3, reasonableness=0.5, training_value=0.2), [], r)
    assert mid.verdict == Verdict.BORDERLINE  # 0.35+0.15+0.045+0.15+0.05+0.02 = 0.765
    low = decide(scores(alignment=0.4), [], r)
    assert low.verdict == Verdict.REJECTED and low.below_min == [D.ALIGNMENT]
    hard = decide(scores(), ["test_leakage", "wall_clock"], r)
    assert hard.verdict == Verdict.REJECTED and hard.hard == ["test_leakage"]
    assert repairable(decide(scores(), ["hidden_requirement"], r), r)
    assert not repairable(hard, r)
    assert repairable(mid, r)


def test_invalid_rubrics_are_refused():
    base = load_rubric("t1").model_dump()
    bad_sum = base | {"weights": base["weights"] | {"alignment": 0.5}}
    with pytest.raises(ValueError, match="sum to 1"):
        Rubric.model_validate(bad_sum)
    flat = {d.value: 1 / 6 for d in Dimension}
    with pytest.raises(ValueError, match="largest"):
        Rubric.model_validate(base | {"weights": flat})
    with pytest.raises(ValueError, match="exempt"):
        Rubric.model_validate(base | {"critical_min": {"training_value": 0.1}})
    with pytest.raises(ValueError, match="no rubric"):
        load_rubric("no-such-preset")
