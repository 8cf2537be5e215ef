"""Rewrite operators: registry shape, the build contract, and every default operator's child
validated in the local sandbox (oracle passes, nop fails, the parent's solution fails a new
assertion, every new assertion needs the parent's output). The chores (`CHORES`, not sampled
by default) keep the build-contract test."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis import coverage as cov
from synthesis.assertion_checks import top_level_tests
from synthesis.operators import (
    CHORES,
    PROGRAMMATIC,
    Parent,
    RewriteContext,
    build_child,
    families,
    new_assertions,
    registry,
)
from synthesis.operators.extension import child_stage
from synthesis.profile import OutputFile, TaskProfile
from synthesis.validate import (
    ParentSolutionAgent,
    ValidationConfig,
    Verdict,
    new_tests_source,
    static_check,
    validate,
)
from tasks.corpus import load_seeds
from tasks.environment import render_dockerfile
from tasks.harbor import task_files
from tests.synthesis.tiny import table_parent

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


def test_registry_has_derived_operators_by_default_and_the_chores_on_request() -> None:
    ops = registry()
    assert set(ops) == {op.name for op in PROGRAMMATIC} and len(families(ops)) >= 4
    with_chores = registry(CHORES)
    assert len(with_chores) >= 15 + len(PROGRAMMATIC), sorted(with_chores)
    assert len(families(with_chores)) >= 5 + len(families(ops))
    assert all(op.family for op in (*PROGRAMMATIC, *CHORES))
    assert len({op.name for op in (*PROGRAMMATIC, *CHORES)}) == len(PROGRAMMATIC) + len(CHORES)


@pytest.mark.parametrize(
    "op", [*PROGRAMMATIC, *CHORES], ids=lambda op: op.name
)  # fmt: skip
def test_child_follows_the_build_contract(op) -> None:
    parent = table_parent() if op in PROGRAMMATIC else fake_parent()
    assert op.feasible(parent) is None
    ext = op.extend(parent, RewriteContext(3, random.Random(1)))
    child = build_child(parent, op.name, op.family, 3, ext)
    # (1) solution extended, parent's steps kept verbatim in front.
    old = parent.task.solution["solve.sh"].decode()
    new = child.solution["solve.sh"].decode()
    assert new.startswith(old.rstrip("\n")) and len(new.splitlines()) > len(old.splitlines())
    # (3) verifier: parent's module is a prefix; new test_ functions were appended, each
    # opening with the guard that runs the parent's checks on what the steps consume.
    added = new_assertions(child, parent.task)
    assert added and all(n.startswith("test_r3_") for n in added), added
    source = new_tests_source(child, parent.task)
    assert ext.consumes and set(ext.consumes) <= set(parent.guards)
    for fn in top_level_tests(source):
        first = fn.body[0].value
        assert first.func.id == "_r3_prerequisites", fn.name
    # (4) instruction: rewritten whole; the core task verbatim as stage 1, this stage as
    # stage 2, no appended "Additional requirement"; every path a new test reads is stated.
    wd = parent.workdir
    assert "Additional requirement" not in child.instruction
    assert parent.task.instruction.strip() in child.instruction
    assert "### Stage 2: " + ext.title[:1].upper() + ext.title[1:] in child.instruction
    assert child.instruction.startswith("This job has 2 stages")
    spec_paths = set(re.findall(rf"'({wd}/[^']+)'", source))
    assert spec_paths, "spec names no paths"
    for path in spec_paths:
        assert path in child.instruction, f"{path} is checked but not stated in the instruction"
    assert static_check(child, parent) is None
    assert not cov.pending(child, source).uncovered, "a literal is stated nowhere"
    # (2) environment: a changed spec is rendered again into the Dockerfile the docker
    # backend builds.
    if "Dockerfile" in parent.task.environment.files:  # the seeds' (the table parent has none)
        assert child.environment.files["Dockerfile"].decode() == render_dockerfile(child)
    # Every tool an operator declares is in the base image: no child gains an apt step (a
    # tool mapped to a package that does not exist fails the build with "RUN exited 100").
    assert "apt-get" not in render_dockerfile(child), ext.requires
    # lineage and identity
    assert child.lineage.parents == [parent.hash] and child.lineage.round == 3
    assert child.lineage.operator == op.name and child.lineage.family == op.family
    assert child.content_hash != parent.hash and task_files(child)["instruction.md"]


def test_operators_are_deterministic_and_compose() -> None:
    parent = table_parent()
    ops = registry()
    a = ops["record_query"].extend(parent, RewriteContext(1, random.Random(5)))
    b = ops["record_query"].extend(parent, RewriteContext(1, random.Random(5)))
    assert (
        build_child(parent, "record_query", "record_query", 1, a).content_hash
        == build_child(parent, "record_query", "record_query", 1, b).content_hash
    )
    # Round 2 on the round-1 child: three stages in one text, both test blocks, no clashes.
    child1 = build_child(parent, "record_query", "record_query", 1, a)
    stage1 = child_stage(parent, "record_query", "record_query", 1, a)
    p2 = Parent(child1, parent.profile, ("record_query",), parent.task.instruction,
                parent.task.name, (stage1,))  # fmt: skip
    ext2 = ops["text_query"].extend(p2, RewriteContext(2, random.Random(5)))
    child2 = build_child(p2, "text_query", "text_query", 2, ext2)
    assert child2.instruction.startswith("This job has 3 stages")
    assert child2.instruction.count("### Stage ") == 3
    assert child2.instruction.count(parent.task.instruction.strip()) == 1
    assert child2.lineage.root_seed == parent.hash and child2.lineage.parents == [
        child1.content_hash
    ]


@pytest.fixture(scope="module")
def validated():
    """Every default operator's child of the table parent, validated concurrently (2 workers)
    in the sandbox with every check (the scripted hacks included)."""
    parent = table_parent()
    cfg = ValidationConfig(reruns=1, max_repairs=0)

    def one(op):
        ext = op.extend(parent, RewriteContext(1, random.Random(op.name)))
        child = build_child(parent, op.name, op.family, 1, ext)
        return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))

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
    ext = by_agent["extension-only"]
    assert oracle.resolved and set(v.new_assertions) <= {a.name for a in oracle.assertions}
    new = set(v.new_assertions)
    m = v.measures
    assert m.flow is not None and m.flow.dependent, m.flow  # data flows from the parent
    dependent = set(m.flow.dependent)
    # Nothing done, or only the parent's work: every new assertion fails; only the new steps
    # (the parent's output stubbed): every dependent one fails.
    for trial, must_fail in ((nop, new), (ext, dependent), (probe, new)):
        assert not [a.name for a in trial.assertions if a.name in must_fail and a.ok], trial.agent
    assert m.dependency_ok and m.coverage == 1.0 and m.free_reward_share == 0.0, m
    # Every new assertion needs the parent's output; no hack earns one after its solution.
    assert m.dependent_share == 1.0 and m.hacked_after_parent == [], m
    # The parent's own assertions still pass under the parent's solution (alignment kept).
    assert all(a.ok for a in probe.assertions if a.name not in v.new_assertions)
