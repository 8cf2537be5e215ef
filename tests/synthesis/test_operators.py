"""Rewrite operators: registry shape, the build contract, and every operator's child validated
in the local sandbox (oracle passes, nop fails, the parent's solution fails a new assertion)."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import (
    PROGRAMMATIC,
    Parent,
    RewriteContext,
    build_child,
    families,
    new_assertions,
    registry,
)
from synthesis.profile import OutputFile, TaskProfile, profile_task
from synthesis.validate import ParentSolutionAgent, ValidationConfig, Verdict, validate
from tasks.corpus import load_seeds
from tasks.harbor import task_files

SEED = "ds-multiple-regression"  # writes model.json and predictions.csv: every operator fits


def _seed(task_id: str = SEED):
    return next(t for t in load_seeds() if t.id == task_id)


def fake_parent(task_id: str = SEED) -> Parent:
    """A parent with a hand-written profile (no sandbox): one JSON and one CSV output."""
    task = _seed(task_id)
    wd = task.environment.workdir
    outputs = [
        OutputFile(path=f"{wd}/model.json", rel="model.json", size=241, mode=0o644,
                   sha256="0" * 64, created=True, kind="json", lines=12, header="{"),
        OutputFile(path=f"{wd}/predictions.csv", rel="predictions.csv", size=2808, mode=0o644,
                   sha256="1" * 64, created=True, kind="csv", lines=101, header="id,y_pred",
                   columns=2),
    ]  # fmt: skip
    return Parent(task, TaskProfile(task_hash=task.content_hash, workdir=wd, ok=True,
                                    outputs=outputs))  # fmt: skip


def test_registry_has_15_operators_in_5_families() -> None:
    ops = registry()
    fams = families(ops)
    assert len(ops) >= 15, sorted(ops)
    assert len(fams) >= 5, fams
    assert all(op.family for op in PROGRAMMATIC)
    assert len({op.name for op in PROGRAMMATIC}) == len(PROGRAMMATIC)


@pytest.mark.parametrize("op", PROGRAMMATIC, ids=lambda op: op.name)
def test_child_follows_the_build_contract(op) -> None:
    parent = fake_parent()
    assert op.feasible(parent) is None
    ext = op.extend(parent, RewriteContext(3, random.Random(1)))
    child = build_child(parent, op.name, op.family, 3, ext)
    # (1) solution extended, parent's steps kept verbatim in front.
    old = parent.task.solution["solve.sh"].decode()
    new = child.solution["solve.sh"].decode()
    assert new.startswith(old.rstrip("\n")) and len(new.splitlines()) > len(old.splitlines())
    # (3) verifier: parent's module is a prefix; new test_ functions were appended.
    added = new_assertions(child, parent.task)
    assert added and all(n.startswith("test_r3_") for n in added), added
    # (4) instruction: parent's text kept, a requirement section appended, naming every
    # absolute path the new assertions read.
    assert child.instruction.startswith(parent.task.instruction.rstrip())
    section = child.instruction[len(parent.task.instruction.rstrip()) :]
    tests = child.verifier["test_outputs.py"].decode().split("# ---- round 3:")[1]
    spec_paths = set(re.findall(r"'(/app/[^']+)'", tests))
    assert spec_paths, "spec names no paths"
    for path in spec_paths:
        assert path in section, f"{path} is checked but not stated in the instruction"
    # lineage and identity
    assert child.lineage.parents == [parent.hash] and child.lineage.round == 3
    assert child.lineage.operator == op.name and child.lineage.family == op.family
    assert child.content_hash != parent.hash and task_files(child)["instruction.md"]


def test_operators_are_deterministic_and_compose() -> None:
    parent = fake_parent()
    ops = registry()
    a = ops["tar_outputs"].extend(parent, RewriteContext(1, random.Random(5)))
    b = ops["tar_outputs"].extend(parent, RewriteContext(1, random.Random(5)))
    assert (
        build_child(parent, "tar_outputs", "packaging", 1, a).content_hash
        == build_child(parent, "tar_outputs", "packaging", 1, b).content_hash
    )
    # Round 2 on the round-1 child: both sections, both test blocks, no name clashes.
    child1 = build_child(parent, "tar_outputs", "packaging", 1, a)
    p2 = Parent(child1, parent.profile, ("tar_outputs",))
    ext2 = ops["sha256_manifest"].extend(p2, RewriteContext(2, random.Random(5)))
    child2 = build_child(p2, "sha256_manifest", "integrity", 2, ext2)
    assert child2.instruction.count("## Additional requirement") == 2
    assert child2.lineage.root_seed == parent.hash and child2.lineage.parents == [
        child1.content_hash
    ]


@pytest.fixture(scope="module")
def validated():
    """Every operator's child of the seed, validated concurrently (2 workers) in the sandbox."""
    seed = _seed()
    profile, trial = profile_task(seed)
    assert profile.ok, trial.failure_detail
    parent = Parent(seed, profile)
    cfg = ValidationConfig(reruns=1, max_repairs=0)

    def one(op):
        ext = op.extend(parent, RewriteContext(1, random.Random(op.name)))
        return validate(build_child(parent, op.name, op.family, 1, ext), parent, cfg)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return parent, dict(
            zip([op.name for op in PROGRAMMATIC], pool.map(one, PROGRAMMATIC), strict=True)
        )


@pytest.mark.sandbox
@pytest.mark.parametrize("name", [op.name for op in PROGRAMMATIC])
def test_operator_child_is_valid_in_the_sandbox(validated, name) -> None:
    parent, results = validated
    v = results[name]
    assert v.verdict == Verdict.ACCEPTED, (v.verdict, v.detail)
    by_agent = {t.agent: t for t in v.trials}
    oracle, nop, probe = by_agent["oracle"], by_agent["nop"], by_agent[ParentSolutionAgent.name]
    assert oracle.resolved and set(v.new_assertions) <= {a.name for a in oracle.assertions}
    assert nop.passed < nop.total
    failed_new = [a.name for a in probe.assertions if a.name in v.new_assertions and not a.ok]
    assert failed_new, "the parent's solution passes every new assertion"
    # The parent's own assertions still pass under the parent's solution (alignment kept).
    assert all(a.ok for a in probe.assertions if a.name not in v.new_assertions)
