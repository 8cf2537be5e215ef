"""Extensions whose new reward needs the parent's work (issue 33, item 4): the scripted hacks
also run AFTER the parent's solution, an assertion one of them earns there is independent,
and at least `min_dependent_share` of the new assertions must need the parent's output.

The attack: "validate the parent's output, then write a constant". The step writes `ready`
only when the parent's output is right, so the data-flow probe (the output perturbed before
the step) sees the assertion fail and calls it dependent, and the prerequisite guard made
it fail without the parent's work; yet an agent that has done the parent's work earns it
with `echo ready > status.txt`, no byte of the parent's output used. Before, it was accepted
(`dependency_ok`); the hack run after the parent's solution now earns it, so it is
independent and the candidate has no dependent assertion left.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from synthesis.operators import Extension, Operator, Parent, RewriteContext, build_child
from synthesis.operators.extension import child_stage
from synthesis.validate import DataFlow, Validation, ValidationConfig, Verdict, validate
from tasks.hacks import hack_script, instruction_names
from tests.synthesis.tiny import tiny_parent


class Scripted(Operator):
    """A test-only operator returning a fixed extension."""

    family = "test"

    def __init__(self, name: str, steps: list[str], tests: str, text: str) -> None:
        self.name = name  # type: ignore[misc]  # one test operator per case
        self.steps, self.tests, self.text = steps, tests, text

    def extend(self, parent: Parent, ctx: RewriteContext) -> Extension:
        return Extension("scripted", self.steps, self.tests, self.text, ["/app/out.txt"])


CASES = {
    "checked_then_constant": Scripted(
        "checked_then_constant",
        ['test "$(cat /app/out.txt)" = hello && echo ready > /app/status_r1.txt'],
        "def test_r1_status():\n    assert open('/app/status_r1.txt').read() == 'ready\\n'\n",
        "Check that `/app/out.txt` says hello, then write `ready` to `/app/status_r1.txt`.",
    ),
    "derived": Scripted(
        "derived",
        ["tr a-z A-Z < /app/out.txt > /app/upper_r1.txt"],
        "def test_r1_upper():\n    want = open('/app/out.txt').read().upper()\n"
        "    assert open('/app/upper_r1.txt').read() == want\n",
        "Write `/app/out.txt` in upper case to `/app/upper_r1.txt`.",
    ),
}
# the hacks that matter here (the full set runs in synthesis; `hacks_only` keeps this cheap)
HACKS = ("stub_paths", "echo_literals", "sentence_literals", "copy_inputs")


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Validation]:
    parent = tiny_parent("tiny-share", verifier_timeout_s=10)
    cfg = ValidationConfig(reruns=1, max_repairs=0, hacks_only=HACKS)

    def one(op: Scripted) -> Validation:
        ext = op.extend(parent, RewriteContext(1, random.Random(0)))
        child = build_child(parent, op.name, op.family, 1, ext)
        return validate(child, parent, cfg, child_stage(parent, op.name, op.family, 1, ext))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(one, CASES.values()), strict=True))


@pytest.mark.sandbox
def test_a_constant_written_after_checking_the_parent_is_not_dependent(outcomes) -> None:
    v = outcomes["checked_then_constant"]
    assert v.verdict == Verdict.DEPENDENCY_MISSING, (v.verdict, v.detail)
    m = v.measures
    assert m.hacked_after_parent == ["test_r1_status"]
    assert m.flow is not None and m.flow.dependent == () and m.flow.hacked == ("test_r1_status",)
    assert m.flow.independent == ("test_r1_status",)
    assert m.dependent_share == 0.0 and m.dependency_ok is False
    assert "sentence_literals" not in v.detail and "after the parent's solution" in v.detail
    hacks = sorted(t.agent for t in v.trials if t.agent.startswith("parent+"))
    assert hacks == [f"parent+{h}" for h in ("copy_inputs", "echo_literals", "sentence_literals",
                                             "stub_paths")]  # fmt: skip


@pytest.mark.sandbox
def test_an_extension_computed_from_the_parents_output_is_accepted(outcomes) -> None:
    v = outcomes["derived"]
    assert v.verdict == Verdict.ACCEPTED, v.detail
    m = v.measures
    assert m.hacked_after_parent == [] and m.dependent_share == 1.0
    assert m.flow is not None and m.flow.dependent == ("test_r1_upper",)
    assert m.parent_share == 0.5  # the parent's one assertion of two


def test_the_share_and_the_move_are_pure() -> None:
    flow = DataFlow(dependent=("a", "b", "c"), independent=("d",), perturbed=("/app/x",))
    assert flow.share(4) == 0.75 and DataFlow().share(0) == 0.0
    moved = flow.after_hacks({"b", "d"})
    assert moved.dependent == ("a", "c") and moved.independent == ("d", "b")
    assert moved.hacked == ("b", "d") and moved.share(4) == 0.5 and moved.perturbed == ("/app/x",)


def test_the_gate_and_the_hack_subset_are_guarded() -> None:
    with pytest.raises(ValueError, match="min_dependent_share"):
        ValidationConfig(min_dependent_share=1.5)
    with pytest.raises(ValueError, match="unknown hacks"):
        ValidationConfig(hacks_only=("stub_paths", "no_such_hack"))


def test_the_sentence_hack_writes_the_constant_stated_beside_its_file() -> None:
    text = (
        "Write `hello` and a newline to /app/out.txt.\n\n"
        "Check that `/app/out.txt` says hello, then write `ready` to `/app/status_r1.txt`. "
        "Keep the run's log in `/app/run_r1.log`."
    )
    named = instruction_names(text)
    assert dict(named.beside)["/app/status_r1.txt"] == ("ready",)
    assert "/app/run_r1.log" not in dict(named.beside)  # its sentence states no constant
    script = hack_script("sentence_literals", named, "/app").script
    assert "cat > /app/status_r1.txt <<'T1_HACK_EOF'\nready\nT1_HACK_EOF" in script
