"""The solution-first LLM operator against a scripted OpenAI-compatible server over real HTTP
(`tests.synthesis.fake_llm`, the fake of the remote LLM API).

The protocol tests cover the client (schema repair, backoff, giving up). The walk tests run
every step for real: proposed steps that fail in the sandbox go back to the model; the
corrected steps run in a sandbox and the tests are written from what the server is SHOWN of
the observed state; the instruction comes last; validation rejects it and the finding goes
back to the model, once with a failed repair, and either a later repair is accepted or the
revisions run out and the candidate is discarded with its reason.
"""

from __future__ import annotations

import random
import re

import pytest

from synthesis.llm import (
    LLMClient,
    LLMError,
    LLMRewrite,
    LLMSettings,
    StepsProposal,
    VerifierProposal,
    llm_operators,
)
from synthesis.operators import Parent, RewriteContext, RewriteError
from synthesis.rounds import SynthConfig, build_and_validate
from synthesis.sampler import Assignment
from synthesis.validate import ValidationConfig, Verdict
from tests.synthesis.fake_llm import FakeEndpoint, ok
from tests.synthesis.tiny import tiny_parent as make_tiny_parent

STEPS = {
    "title": "count the words of the greeting",
    "solution_steps": ["wc -w < /app/out.txt | tr -d ' ' > /app/words_r1.txt"],
    "consumes": ["/app/out.txt"],
    "creates": ["/app/words_r1.txt"],
    "requires": ["wc"],
}
BROKEN_STEPS = STEPS | {"solution_steps": ["wc -w < /app/greeting_r1.txt > /app/words_r1.txt"]}
TESTS = {
    "tests": "def test_r1_word_count():\n"
    "    want = str(len(open('/app/out.txt').read().split())) + '\\n'\n"
    "    assert open('/app/words_r1.txt').read() == want\n"
}
CORE = "Write `hello` and a newline to /app/out.txt."
GOOD = (
    f"{CORE} Then count the words of /app/out.txt and write the count, as a bare number and "
    "a newline, to `/app/words_r1.txt`."
)
VAGUE = f"{CORE} Then count the words of that file and save the count next to it, as a number."


def client_for(server: FakeEndpoint, sleeps: list[float], attempts: int = 4) -> LLMClient:
    settings = LLMSettings(
        base_url=server.url, model="fake-model", api_key="k", max_attempts=attempts,
        backoff_s=0.5, timeout_s=10,
    )  # fmt: skip
    return LLMClient(settings, sleep=sleeps.append)


def tiny_parent() -> Parent:
    return make_tiny_parent("tiny-llm")


# ---- the client ---------------------------------------------------------------------------


def test_malformed_json_is_sent_back_and_retried() -> None:
    with FakeEndpoint([ok("{not json"), ok(STEPS)]) as server:
        sleeps: list[float] = []
        proposal = client_for(server, sleeps).ask("prompt", StepsProposal)
    assert proposal.title == STEPS["title"]
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["body"]["model"] == "fake-model"
    assert first["body"]["response_format"] == {"type": "json_object"}
    second = server.requests[1]["body"]["messages"]
    assert second[-2] == {"role": "assistant", "content": "{not json"}
    assert "invalid" in second[-1]["content"]
    assert sleeps == []  # a bad reply is not a transport error: no backoff


@pytest.mark.parametrize(
    "bad",
    [
        {k: v for k, v in STEPS.items() if k != "consumes"},  # missing field
        STEPS | {"consumes": []},  # consumes nothing
        STEPS | {"env_files": {"../escape.sh": "x"}},  # unsafe path
        STEPS | {"surprise": 1},  # extra field
    ],
    ids=["missing", "consumes-nothing", "unsafe-path", "extra-field"],
)
def test_step_schema_violations_are_retried(bad) -> None:
    with FakeEndpoint([ok(bad), ok(STEPS)]) as server:
        proposal = client_for(server, []).ask("prompt", StepsProposal)
    assert proposal.consumes == STEPS["consumes"] and len(server.requests) == 2


@pytest.mark.parametrize(
    "bad",
    ["def helper():\n    pass\n", "def test_r1_x(:\n    pass\n"],
    ids=["no-tests", "syntax"],
)
def test_test_schema_violations_are_retried(bad) -> None:
    with FakeEndpoint([ok({"tests": bad}), ok(TESTS)]) as server:
        reply = client_for(server, []).ask("prompt", VerifierProposal)
    assert reply.tests == TESTS["tests"] and len(server.requests) == 2


def test_429_and_500_are_retried_with_backoff() -> None:
    replies = [(429, "slow down", {"retry-after": "0.25"}), (500, "boom", {}), ok(STEPS)]
    with FakeEndpoint(replies) as server:
        sleeps: list[float] = []
        proposal = client_for(server, sleeps).ask("prompt", StepsProposal)
    assert proposal.title == STEPS["title"]
    assert len(server.requests) == 3
    assert sleeps == [0.25, 1.0]  # Retry-After honoured, then backoff_s * 2**attempt


def test_gives_up_after_max_attempts() -> None:
    with FakeEndpoint([(500, "down", {})] * 3) as server:
        sleeps: list[float] = []
        client = client_for(server, sleeps, attempts=3)
        with pytest.raises(LLMError, match="after 3 attempts.*HTTP 500"):
            client.ask("prompt", StepsProposal)
    assert len(server.requests) == 3 and len(sleeps) == 3


def test_client_error_fails_at_once() -> None:
    with FakeEndpoint([(400, "bad request", {}), ok(STEPS)]) as server:
        with pytest.raises(LLMError, match="HTTP 400"):
            client_for(server, []).ask("prompt", StepsProposal)
    assert len(server.requests) == 1


def test_consuming_a_file_no_parent_check_reads_is_sent_back() -> None:
    """The operator's own check: consumed files must be parent outputs a check reads."""
    with FakeEndpoint([ok(STEPS | {"consumes": ["/etc/hostname"]}), ok("[]")]) as server:
        op = LLMRewrite(client_for(server, [], attempts=2))
        with pytest.raises(RewriteError, match="llm_rewrite"):
            op.extend(tiny_parent(), RewriteContext(1, random.Random(0)))
    assert "consumes must name files" in server.last_user_message(1)


def test_settings_from_env() -> None:
    assert LLMSettings.from_env({}) is None
    assert llm_operators(None) == () or LLMSettings.from_env() is not None
    s = LLMSettings.from_env({"T1_LLM_BASE_URL": "http://x/v1", "T1_LLM_MODEL": "m"})
    assert s is not None and s.model == "m" and s.api_key == "unused"


# ---- the solution-first walk, in the sandbox ----------------------------------------------


def write_tests_from_observation(body: dict) -> dict:
    """What a model does at step 3: write tests for the file the observation shows."""
    shown = body["messages"][-1]["content"]
    created = re.findall(r"^--- (/app/\S+) \(created", shown, re.M)
    assert created == ["/app/words_r1.txt"], shown  # the observed state reached the model
    assert re.search(r"^1$", shown, re.M), shown  # ... with the file's content
    return TESTS


def walk(revisions: list[str]) -> list:
    """Replies for one full rewrite: failing steps, fixed steps, tests, a vague instruction,
    then one revision reply per entry of `revisions` (an instruction text)."""
    return [
        ok(BROKEN_STEPS),
        ok(STEPS),
        ok(write_tests_from_observation),
        ok({"instruction": VAGUE}),
        *[ok({"solution_steps": None, "tests": None, "instruction": r}) for r in revisions],
    ]


def run_walk(server: FakeEndpoint):
    op = LLMRewrite(client_for(server, []))
    parent = tiny_parent()
    cfg = SynthConfig(validation=ValidationConfig(reruns=1, max_repairs=2))
    a = Assignment(1, 0, parent.hash, op.name, op.family, parent.root_seed, "x")
    return build_and_validate(cfg, a, parent, op, None)


@pytest.mark.sandbox
def test_walk_with_a_failed_repair_then_an_accepted_one() -> None:
    with FakeEndpoint(walk([VAGUE + " Keep it short.", GOOD])) as server:
        built, v = run_walk(server)
    prompts = [server.last_user_message(i) for i in range(len(server.requests))]
    assert [p.split(":")[0].split("\n")[0] for p in prompts[:2]] == [
        "STEP 1",
        "Those steps failed when run after the existing solution",
    ]
    assert "greeting_r1.txt" in prompts[1]  # the failure it saw is in the feedback
    assert prompts[2].startswith("STEP 3") and prompts[3].startswith("STEP 4")
    # Two revisions: both told what validation found (the typed verdict, the literal).
    for p in prompts[4:6]:
        assert p.startswith("Validation rejected the task: solution_artifact")
        assert "/app/words_r1.txt" in p
    assert len(server.requests) == 6
    assert v is not None and v.verdict == Verdict.ACCEPTED, (v.verdict, v.detail)
    assert built.task is not None and built.task.instruction.strip() == GOOD
    assert built.stage is not None and built.stage.instruction == GOOD
    assert v.repairs == [
        "solution_artifact: revised by llm_rewrite",
        "solution_artifact: revised by llm_rewrite",
    ]
    assert v.measures.coverage == 1.0 and v.measures.dependency_ok
    hacks = ("hack-", "parent+")  # the scripted hacks run last, then again after the parent
    agents = [t.agent for t in v.trials if not t.agent.startswith(hacks)]
    assert agents.count("oracle") == 3 and agents[-1] == "parent-solution"


@pytest.mark.sandbox
def test_walk_whose_repairs_all_fail_is_discarded_with_its_reason() -> None:
    with FakeEndpoint(walk([VAGUE, VAGUE + " Really."])) as server:
        built, v = run_walk(server)
    assert len(server.requests) == 6  # no third revision: max_repairs = 2
    assert v is not None and v.verdict == Verdict.SOLUTION_ARTIFACT
    assert v.offending == ["/app/words_r1.txt"]
    assert len(v.repairs) == 2 and not v.accepted
