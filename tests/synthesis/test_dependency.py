"""Dependency is measured by data flow, not declared (docs/synthesis.md, "Dependent extensions").

The attack: an extension that declares the parent's output in `consumes` but whose steps never
read it (it hashes `seq 1 40`). Before the data-flow probe it was accepted with
`dependency_ok=True`: the prerequisite guard tied its reward to the parent's work, so the
extension-only probe (stubbed inputs) failed it, although no byte of the parent's output
reaches its result. The probe (`synthesis.probes.DataFlowAgent`) runs the parent's solution,
perturbs the consumed files, runs the new steps, restores the files exactly, then verifies: a
new assertion that now fails had the parent's output flow into what it checks.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import Validation, ValidationConfig, Verdict, validate
from tests.synthesis.tiny import tiny_parent


class Scripted(Operator):
    """A test-only operator returning a fixed extension."""

    family = "test"

    def __init__(
        self, name: str, steps: list[str], tests: str, text: str, consumes: list[str]
    ) -> None:
        self.name = name  # type: ignore[misc]  # one test operator per case
        self.steps, self.tests, self.text, self.consumes = steps, tests, text, consumes

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension("scripted", self.steps, self.tests, self.text, self.consumes)


SEQ_TEST = (
    "def test_r1_seq_digest():\n"
    "    import hashlib\n"
    "    import subprocess\n\n"
    "    data = subprocess.run(['seq', '1', '40'], capture_output=True, check=True).stdout\n"
    "    want = hashlib.sha256(data).hexdigest() + '\\n'\n"
    "    assert open('/app/seq_r1.txt').read() == want\n"
)
SEQ_STEP = "seq 1 40 | sha256sum | cut -d' ' -f1 > /app/seq_r1.txt"
SEQ_TEXT = (
    "Write the SHA-256 hex digest of what `seq 1 40` prints, and a newline, to "
    "`/app/seq_r1.txt`."
)
COPY_TEST = "def test_r1_copy():\n    assert open('/app/copy_r1.txt').read() == 'hello\\n'\n"

CASES = {
    # The attack: `consumes` declared, the steps ignore it.
    "declared_unused": Scripted(
        "declared_unused", [SEQ_STEP], SEQ_TEST, SEQ_TEXT, ["/app/out.txt"]
    ),
    # A real dependent extension: the copy carries the parent's bytes.
    "dependent": Scripted(
        "dependent",
        ["cp /app/out.txt /app/copy_r1.txt"],
        COPY_TEST,
        "Copy it to `/app/copy_r1.txt`.",
        ["/app/out.txt"],
    ),
    # A dependent assertion and an independent one: only the first keeps the guard.
    "mixed": Scripted(
        "mixed",
        ["cp /app/out.txt /app/copy_r1.txt", SEQ_STEP],
        COPY_TEST + "\n\n" + SEQ_TEST,
        "Copy it to `/app/copy_r1.txt`. " + SEQ_TEXT,
        ["/app/out.txt"],
    ),
}


def _validate(op: Scripted) -> Validation:
    parent = tiny_parent("tiny-dependency", verifier_timeout_s=10)
    ext = op.extend(parent, RewriteContext(1, random.Random(0)))
    child = build_child(parent, op.name, op.family, 1, ext)
    cfg = ValidationConfig(reruns=1, max_repairs=0, hacks=False)
    return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Validation]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(_validate, CASES.values()), strict=True))


@pytest.mark.sandbox
def test_declared_but_unused_consumes_is_rejected(outcomes) -> None:
    v = outcomes["declared_unused"]
    assert v.verdict == Verdict.DEPENDENCY_MISSING, (v.verdict, v.detail)
    m = v.measures
    assert m.dependency_ok is False
    assert m.flow_dependent == [] and m.flow_independent == ["test_r1_seq_digest"]
    assert m.flow_perturbed == ["/app/out.txt"]
    assert v.offending == ["test_r1_seq_digest"]
