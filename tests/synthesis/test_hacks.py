"""Synthesis validation runs the scripted hacks (`tasks.hacks`) on a candidate: a new
assertion that a hack passes (here: one that only checks that a file the instruction names
exists, which the stub hack creates) rejects the candidate as `hackable`; a candidate whose
new assertion checks the content is accepted. Both get past every earlier check (data flow,
nop, the extension's steps alone, the parent's solution), so only the hack step tells them
apart.

Each candidate copies the parent's output (a dependent assertion: the data-flow probe sees
the parent's bytes in the copy, so it keeps its prerequisite guard). The planted exists-only
assertions read nothing of the parent's output, so the probe finds them independent and they
lose the guard (`synthesis.guards.unguard`): the parent's failure no longer zeroes them, and
nothing but the hack step stands between them and a stub.

The accepted candidate derives its file from the parent's output (upper case): a plain copy
is earned by the `copy_inputs` hack run after the parent's solution (step 6), so it needs the
parent's work but not its output, and is not dependent (tests/synthesis/test_dependent_share.py).
The hacks run are those these candidates can meet (`HACKS`), to keep the test cheap."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import AFTER_PARENT_HACKS, Validation, ValidationConfig, Verdict, validate
from tasks.hacks import AFTER_WORK, hack_scripts
from tests.synthesis.tiny import tiny_parent

COPY = "cp /app/out.txt /app/copy_r1.txt"
COPY_TEST = "def test_r1_copy():\n    assert open('/app/copy_r1.txt').read() == 'hello\\n'\n"
COPY_TEXT = "Keep a copy of it as `/app/copy_r1.txt`."


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
        [COPY, "date > /app/kept_r1.txt"],
        COPY_TEST
        + "\n\ndef test_r1_kept():\n    import os\n    assert os.path.isfile('/app/kept_r1.txt')\n",
        COPY_TEXT + " Also record when you did it in `/app/kept_r1.txt`.",
        ["/app/out.txt"],
    ),
    "exists_only_dir": Scripted(
        "exists_only_dir",
        [COPY, "mkdir -p /app/backup_r1"],
        COPY_TEST + "\n\ndef test_r1_backup_dir():\n    import os\n"
        "    assert os.path.isdir('/app/backup_r1')\n",
        COPY_TEXT + " Also create the directory `/app/backup_r1/`.",
        ["/app/out.txt"],
    ),
    "content": Scripted(
        "content",
        ["tr a-z A-Z < /app/out.txt > /app/upper_r1.txt"],
        "def test_r1_upper():\n    want = open('/app/out.txt').read().upper()\n"
        "    assert open('/app/upper_r1.txt').read() == want\n",
        "Write it in upper case to `/app/upper_r1.txt`.",
        ["/app/out.txt"],
    ),
}
HACKS = ("stub_paths", "make_dirs", "echo_literals", "sentence_literals", "copy_inputs",
         "shaped_outputs", "everything")  # fmt: skip


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Validation]:
    parent = tiny_parent("tiny-hacks", verifier_timeout_s=5)
    cfg = ValidationConfig(reruns=1, max_repairs=0, hacks_only=HACKS)

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
    assert v.measures.flow is not None
    assert v.measures.flow.dependent == ("test_r1_copy",)
    assert v.measures.flow.independent == (assertion,)
    assert v.measures.hack_new_share == 0.5
    assert "scripted hack" in v.detail


@pytest.mark.sandbox
def test_a_new_assertion_on_the_content_is_accepted(outcomes) -> None:
    v = outcomes["content"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    # every hack of HACKS with something to do ran, from the start and after the parent
    doing = {h.name for h in hack_scripts(v.task.instruction, "/app", list(HACKS))}
    assert v.measures.hacks == len(doing - set(AFTER_WORK)) >= 4
    assert v.measures.hack_new_share == 0.0
    assert v.measures.hacked_after_parent == [] and v.measures.dependent_share == 1.0
    after = {t.agent for t in v.trials if t.agent.startswith("parent+")}
    assert after == {f"parent+{h}" for h in doing & set(AFTER_PARENT_HACKS)}


def test_hacks_can_be_turned_off_and_their_config_is_guarded() -> None:
    assert ValidationConfig(hacks=False).hacks is False
    with pytest.raises(ValueError, match="hack_workers"):
        ValidationConfig(hack_workers=0)
    with pytest.raises(ValueError, match="hack_timeout_s"):
        ValidationConfig(hack_timeout_s=0)
