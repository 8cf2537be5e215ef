"""Synthesis validation runs the scripted hacks (`tasks.hacks`) on a candidate: a new
assertion that a hack passes (here: one that only checks that a file the instruction names
exists, which the stub hack creates) rejects the candidate as `hackable`; a candidate whose
new assertion checks the content is accepted. Both get past every earlier check (nop, the
extension's steps alone, the parent's solution), so only the hack step tells them apart.

The planted assertions read nothing of the parent's output, so they carry no prerequisite
guard (`synthesis.guards`: a guarded assertion also needs the parent's work done, which no
hack here does for the tiny parent)."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import Validation, ValidationConfig, Verdict, validate
from tests.synthesis.tiny import tiny_parent

# The step works only on the parent's output (the extension-only probe's stub fails grep).
STEP = "grep -qx hello /app/out.txt && cp /app/out.txt /app/{name}"


class Scripted(Operator):
    """A test-only operator returning a fixed extension."""

    family = "test"

    def __init__(
        self, name: str, steps: list[str], tests: str, text: str, consumes: list[str]
    ) -> None:
        self.name = name  # type: ignore[misc]  # one test operator per case
        self.steps, self.tests, self.text = steps, tests, text
        self.consumes = consumes

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension("scripted", self.steps, self.tests, self.text, self.consumes)


CASES = {
    "exists_only": Scripted(
        "exists_only",
        [STEP.format(name="kept_r1.txt")],
        "def test_r1_kept():\n    import os\n    assert os.path.isfile('/app/kept_r1.txt')\n",
        "Keep a copy of it as `/app/kept_r1.txt`.",
        [],
    ),
    "exists_only_dir": Scripted(
        "exists_only_dir",
        [
            STEP.replace("cp /app/out.txt", "mkdir -p /app/backup_r1 && cp /app/out.txt").format(
                name="backup_r1/"
            )
        ],
        "def test_r1_backup_dir():\n    import os\n    assert os.path.isdir('/app/backup_r1')\n",
        "Back it up into the directory `/app/backup_r1/`.",
        [],
    ),
    "content": Scripted(
        "content",
        [STEP.format(name="copy_r1.txt")],
        "def test_r1_copy():\n    assert open('/app/copy_r1.txt').read() == 'hello\\n'\n",
        "Keep a copy of it as `/app/copy_r1.txt`.",
        ["/app/out.txt"],
    ),
}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Validation]:
    parent = tiny_parent("tiny-hacks", verifier_timeout_s=5)
    cfg = ValidationConfig(reruns=1, max_repairs=0)

    def one(op: Scripted) -> Validation:
        ext = op.extend(parent, RewriteContext(1, random.Random(0)))
        child = build_child(parent, op.name, op.family, 1, ext)
        return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(one, CASES.values()), strict=True))


@pytest.mark.sandbox
@pytest.mark.parametrize(
    "case, assertion", [("exists_only", "test_r1_kept"), ("exists_only_dir", "test_r1_backup_dir")]
)
def test_a_new_assertion_a_stub_passes_is_rejected_as_hackable(outcomes, case, assertion) -> None:
    v = outcomes[case]
    assert v.verdict == Verdict.HACKABLE, v.detail
    assert v.offending == [assertion]
    assert v.measures.dependency_ok and v.measures.nop_share == 0  # earlier checks held
    assert v.measures.hack_new_share == 1.0
    assert "scripted hack" in v.detail


@pytest.mark.sandbox
def test_a_new_assertion_on_the_content_is_accepted(outcomes) -> None:
    v = outcomes["content"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    assert v.measures.hacks is not None and v.measures.hacks >= 8
    assert v.measures.hack_new_share == 0.0


def test_hacks_can_be_turned_off_and_their_config_is_guarded() -> None:
    assert ValidationConfig(hacks=False).hacks is False
    with pytest.raises(ValueError, match="hack_workers"):
        ValidationConfig(hack_workers=0)
    with pytest.raises(ValueError, match="hack_timeout_s"):
        ValidationConfig(hack_timeout_s=0)
