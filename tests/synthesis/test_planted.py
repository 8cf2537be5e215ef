"""Validation can fail: planted bad candidates (`synthesis.planted`), six defect classes with
randomized surface forms, at least five variants each, over three real parents, must each be
rejected with the right typed reason naming what is wrong; the generator's defect-free
controls must be accepted (so a rejection is the planted defect's doing, not the generator's).

Set T1_PLANTED_SEED to draw other surface forms (the default keeps CI reproducible);
`benchmarks/planted_candidates.py` runs many seeds and reports catches and misses.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Parent, build_child
from synthesis.operators.extension import child_stage
from synthesis.planted import CLAIMED, Defect, Planted, base, plant
from synthesis.profile import profile_task
from synthesis.validate import ValidationConfig, Verdict, static_check, validate
from tasks.corpus import load_seeds
from tests.synthesis.tiny import tiny_parent

SEED = int(os.environ.get("T1_PLANTED_SEED", "20240611"))
REAL = ("ds-multiple-regression", "sa-access-log-csv-report")
VARIANTS = 6  # per class


@pytest.fixture(scope="module")
def parents() -> list[Parent]:
    out = [tiny_parent("tiny-planted")]
    for seed in (t for t in load_seeds() if t.id in REAL):
        profile, trials = profile_task(seed)
        assert profile.ok, trials[0].failure_detail
        out.append(Parent(seed, profile))
    return out


def candidates(parents: list[Parent]) -> list[tuple[Planted, Parent]]:
    rng = random.Random(SEED)
    out = []
    for defect in Defect:
        forms = list(CLAIMED[defect])
        rng.shuffle(forms)
        for i in range(VARIANTS):
            parent = parents[i % len(parents)]
            out.append((plant(defect, parent, rng, forms[i % len(forms)]), parent))
    out += [(base(p, rng), p) for p in parents]
    return out


@pytest.fixture(scope="module")
def outcomes(parents):
    cfg = ValidationConfig(reruns=2, max_repairs=0)

    def one(item):
        planted, parent = item
        ext = planted.extension
        child = build_child(parent, "planted", "test", 1, ext)
        return planted, validate(child, parent, cfg, child_stage(parent, "planted", "test", 1, ext))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, candidates(parents)))


def test_the_generator_varies_surface_forms(parents) -> None:
    items = candidates(parents)
    for defect in Defect:
        mine = [p for p, _ in items if p.defect == defect]
        assert len(mine) >= 5
        assert len({p.form for p in mine}) >= 4, [p.form for p in mine]
        assert len({p.extension.tests for p in mine}) == len(mine)  # no two alike
    # Another seed draws other forms and names.
    rng = random.Random(SEED + 1)
    other = plant(Defect.HIDDEN_REQUIREMENT, parents[0], rng)
    assert other.extension.tests not in {p.extension.tests for p, _ in items}


def test_static_classes_need_no_sandbox(parents) -> None:
    for planted, parent in candidates(parents):
        if planted.defect not in (Defect.VACUOUS_ASSERTION, Defect.FLAKY_CHECK):
            continue
        child = build_child(parent, "planted", "test", 1, planted.extension)
        found = static_check(child, parent)
        assert found is not None and found.verdict == planted.expect, planted.form
        assert planted.subject in found.offending


@pytest.mark.sandbox
def test_controls_are_accepted(outcomes) -> None:
    controls = [(p, v) for p, v in outcomes if p.defect is None]
    assert len(controls) == 3
    for planted, v in controls:
        assert v.verdict == Verdict.ACCEPTED, (planted.form, v.verdict, v.detail)
        assert v.measures.dependency_ok and v.measures.coverage == 1.0


@pytest.mark.sandbox
@pytest.mark.parametrize("defect", list(Defect), ids=lambda d: d.value)
def test_every_planted_candidate_is_rejected_with_the_right_reason(outcomes, defect) -> None:
    mine = [(p, v) for p, v in outcomes if p.defect == defect]
    assert len(mine) >= 5
    wrong = [
        (p.form, v.verdict.value, v.detail[:200])
        for p, v in mine
        if v.verdict != p.expect or (p.subject is not None and p.subject not in v.offending)
    ]
    assert not wrong, wrong
