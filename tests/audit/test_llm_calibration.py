"""The LLM judge's calibration against a real loopback OpenAI-compatible server (the `llm`
fixture, and here a server that accepts connections and never answers): its scores held to
their own minimums, quotes that cannot be spoofed, the request timeout and the circuit
breaker (issue 22, item 4)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from audit.judge_exec import ExecEvidence
from audit.judge_llm import (
    DIMENSION_PROMPTS,
    QUOTE_MIN_CHARS,
    SYSTEM,
    LlmConfig,
    LlmHardReject,
    Region,
    judge_task,
    quote_problem,
    quote_regions,
)
from audit.rubric import Dimension, load_rubric
from audit.selection import SelectionConfig, Stage, StageOutcome, run_selection
from audit.verdict import Code
from tests.audit.planted import TESTS, base_task, leakage_task
from warehouse.recording import record_audits

RUBRIC = load_rubric("t1")
# what a clean task's executable evidence measures (the oracle passes, mutants die, ...)
CLEAN = {"alignment_share": 1.0, "oracle_pass_share": 1.0, "assertions": 6.0,
         "nop_pass_share": 0.0, "effect_coverage": 1.0, "mutation_kill_rate": 1.0,
         "solution_steps": 6.0, "rerun_stable": 1.0}  # fmt: skip
ORDER = list(Dimension)  # judge_task asks the dimensions in this order


def answer(score: float, hard: dict | None = None, why: str = "looks right") -> str:
    return json.dumps({"score": score, "rationale": why, "hard_reject": hard})


def semantic_rows(store, tasks, cfg: LlmConfig, measures=None) -> list[StageOutcome]:
    """Stage 3 over `tasks` on stored executable evidence (no sandbox)."""
    record_audits(
        store,
        [
            ExecEvidence(task_hash=t.content_hash, measures=measures or CLEAN).to_record()
            for t in tasks
        ],  # fmt: skip
    )
    sel = SelectionConfig(rubric=RUBRIC, llm=cfg, until=Stage.SEMANTIC)
    rows = run_selection(store, tasks, sel).by_stage(Stage.SEMANTIC)
    by_hash = {r.task_hash: r for r in rows}
    return [by_hash[t.content_hash] for t in tasks]


# ---- 1. separate minimums ---------------------------------------------------------------------


def test_every_critical_dimension_has_an_llm_minimum_below_a_good_grade():
    assert set(RUBRIC.llm_critical_min) == set(RUBRIC.critical_min)
    assert RUBRIC.critical_min[Dimension.CORRECTNESS] == 0.99  # the measured pass share
    assert all(m < 0.9 for m in RUBRIC.llm_critical_min.values())


@pytest.mark.parametrize("grade", [0.85, 0.9, 0.95])
def test_a_judge_grading_a_clean_task_well_accepts_it(llm, tmp_path, grade):
    """Regression: the 0.99 correctness minimum of the executable pass share was applied to
    the LLM's grade, so a judge scoring 0.95 everywhere rejected every clean task."""
    fake, cfg = llm
    fake.script = [answer(grade)]
    (row,) = semantic_rows(tmp_path / "store", [base_task()], cfg)
    assert row.verdict == "accepted", row.reasons
    assert row.scores["llm/correctness"] == grade and row.scores["exec/correctness"] == 1.0
    assert row.scores["correctness"] == pytest.approx(0.5 * grade + 0.5)


@pytest.mark.parametrize("dim", [d for d in ORDER if d in RUBRIC.llm_critical_min])
def test_one_dimension_graded_broken_still_rejects(llm, tmp_path, dim):
    fake, cfg = llm
    low = round(RUBRIC.llm_critical_min[dim] / 2, 3)
    fake.script = [answer(low if d == dim else 0.95, why=f"{d.value} graded") for d in ORDER]
    (row,) = semantic_rows(tmp_path / "store", [base_task()], cfg)
    assert row.verdict == "rejected"
    assert any(
        r.startswith(f"llm/{dim.value} {low:.2f} < LLM critical minimum") for r in row.reasons
    )
    assert row.scores[dim.value] == pytest.approx(low)  # the blend never lifts a failed grade


def test_the_executable_minimums_still_hold_measured_evidence(llm, tmp_path):
    fake, cfg = llm
    fake.script = [answer(1.0)]
    (row,) = semantic_rows(
        tmp_path / "store", [base_task()], cfg, CLEAN | {"oracle_pass_share": 0.9}
    )
    assert row.verdict == "rejected"
    assert any(r.startswith("correctness 0.90 < critical minimum 0.99") for r in row.reasons)


# ---- 2. quotes that cannot be spoofed ----------------------------------------------------------

PROPER_LEAK = 'assert f.read().strip() == str(len(errors())), "wrong ERROR count"'
HIDDEN_SPAN = 'assert f.read().startswith("status: complete")'


def _hard(code: str, quote: str) -> dict:
    return {"code": code, "quote": quote}


SPOOFS = {
    "the judge's own prompt": _hard(
        "hidden_requirement", DIMENSION_PROMPTS[Dimension.ALIGNMENT][:70]
    ),
    "the system prompt": _hard("test_leakage", SYSTEM[:60]),
    "a 3-character span": _hard("test_leakage", "/app"),
    "a short word of the log": _hard("test_leakage", "ERROR disk"),
    "a leak found only in tests/": _hard("test_leakage", PROPER_LEAK),
    "a hidden requirement quoted from the instruction": _hard(
        "hidden_requirement", "Write every distinct `ERROR` message"
    ),
}


@pytest.mark.parametrize("name", sorted(SPOOFS))
def test_spoofed_quotes_are_not_evidence(llm, tmp_path, name):
    fake, cfg = llm
    hard = SPOOFS[name]
    fake.script = [answer(0.95, hard, why="certainly defective")] + [answer(0.95)]
    (row,) = semantic_rows(tmp_path / "store", [base_task()], cfg)
    assert row.verdict == "accepted", row.reasons  # no hard reject happened
    assert not [f for f in row.findings if f.code == hard["code"]]
    refused = [f for f in row.findings if f.code == Code.LLM_QUOTE_REFUSED]
    assert len(refused) == 1 and refused[0].item == "alignment"
    assert refused[0].evidence.startswith(hard["code"])
    assert len(fake.requests) == 6  # the score stands; nothing is asked again


def test_a_proper_leakage_quote_hard_rejects(llm, tmp_path):
    """The same span that is refused on the clean task (it lies only in tests/) is evidence
    where a copy of the tests sits in the environment."""
    fake, cfg = llm
    fake.script = [answer(0.95, _hard("test_leakage", PROPER_LEAK))] + [answer(0.95)]
    (row,) = semantic_rows(tmp_path / "store", [leakage_task()], cfg)
    assert row.verdict == "rejected" and "hard reject: test_leakage" in row.reasons
    leak = [f for f in row.findings if f.code == Code.TEST_LEAKAGE and f.source == "llm"]
    assert leak and PROPER_LEAK in leak[0].evidence
    assert not [f for f in row.findings if f.code == Code.LLM_QUOTE_REFUSED]


def test_a_hidden_requirement_quoted_from_the_tests_hard_rejects(llm, tmp_path):
    from tests.audit.planted import hidden_requirement_task

    fake, cfg = llm
    fake.script = [answer(0.95, _hard("hidden_requirement", HIDDEN_SPAN))] + [answer(0.95)]
    (row,) = semantic_rows(tmp_path / "store", [hidden_requirement_task()], cfg)
    assert row.verdict == "rejected" and "hard reject: hidden_requirement" in row.reasons


def test_quote_regions_and_problems_are_pure():
    task, leaky = base_task(), leakage_task()
    assert quote_regions(task, PROPER_LEAK) == {Region.TESTS}
    assert quote_regions(leaky, PROPER_LEAK) == {Region.TESTS, Region.ENVIRONMENT}
    assert quote_regions(task, "grep -c '^ERROR '   /app/app.log") == {Region.SOLUTION}
    spaced = LlmHardReject(code=Code.TEST_LEAKAGE, quote="  /  a p p  " * 2)
    assert "non-whitespace" in (quote_problem(task, spaced) or "")
    exact = LlmHardReject(code=Code.TEST_LEAKAGE, quote="x" * QUOTE_MIN_CHARS)
    assert "none of the task's files" in (quote_problem(task, exact) or "")
    assert quote_problem(leaky, LlmHardReject(code=Code.TEST_LEAKAGE, quote=PROPER_LEAK)) is None
    where = quote_problem(task, LlmHardReject(code=Code.TEST_LEAKAGE, quote=PROPER_LEAK))
    assert where and "lies in tests" in where
    assert PROPER_LEAK.split(",")[0] in TESTS


# ---- 3. timeout and circuit breaker -------------------------------------------------------------


class HungServer:
    """Accepts TCP connections and never answers (a hung endpoint); counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    try:
        yield server
    finally:
        server.close()


def test_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("T1_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("T1_LLM_MODEL", "m")
    monkeypatch.delenv("T1_LLM_TIMEOUT_S", raising=False)
    cfg = LlmConfig.from_env()
    assert cfg is not None and cfg.timeout_s == LlmConfig.model_fields["timeout_s"].default
    monkeypatch.setenv("T1_LLM_TIMEOUT_S", "2.5")
    cfg = LlmConfig.from_env()
    assert cfg is not None and cfg.timeout_s == 2.5
    for bad in ("soon", "0", "-1"):
        monkeypatch.setenv("T1_LLM_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match="T1_LLM_TIMEOUT_S"):
            LlmConfig.from_env()


def test_a_hung_endpoint_costs_seconds_and_opens_the_breaker(hung, monkeypatch, tmp_path):
    """Regression: the endpoint timeout could not be set from the environment and every
    dimension of every task waited it out (~18 min a task)."""
    monkeypatch.setenv("T1_LLM_BASE_URL", hung.url)
    monkeypatch.setenv("T1_LLM_MODEL", "judge-test")
    monkeypatch.setenv("T1_LLM_TIMEOUT_S", "1")
    cfg = LlmConfig.from_env()
    assert cfg is not None
    tasks = [base_task(f"audit-hung-{i}", instruction=base_task().instruction + f"\nRun {i}.\n")
             for i in range(4)]  # fmt: skip
    start = time.monotonic()
    rows = semantic_rows(tmp_path / "store", tasks, cfg)
    took = time.monotonic() - start
    # without the breaker: 4 tasks x 6 dimensions x 3 attempts x 1 s = 72 s at least
    assert took < 20, f"{took:.1f}s"
    assert hung.accepted == cfg.breaker_failures  # then the endpoint is not called again
    for row in rows:
        assert row.verdict == "error"  # undecided (retried by the next run), not a low score
        gone = [f for f in row.findings if f.code == Code.LLM_UNAVAILABLE]
        assert {f.item for f in gone} == {d.value for d in Dimension}
        assert "circuit open" in gone[-1].evidence
        assert not any(k.startswith("llm/") for k in row.scores)


def test_refused_connections_open_the_breaker_too(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = LlmConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=1,
                    backoff_s=0, breaker_failures=2)  # fmt: skip
    out = judge_task(base_task(), cfg)
    assert [j.status for j in out.values()] == ["unavailable"] * 6
    assert out[Dimension.ALIGNMENT].attempts == 2
    assert all(j.attempts == 0 for d, j in out.items() if d != Dimension.ALIGNMENT)


def test_an_answering_endpoint_resets_the_count(llm):
    """HTTP errors are answers: the endpoint is there, the breaker stays closed."""
    fake, cfg = llm
    fake.status = 500
    out = judge_task(base_task(), cfg.model_copy(update={"breaker_failures": 1}))
    assert {j.status for j in out.values()} == {"error"}
    assert len(fake.requests) == 6 * cfg.max_retries


def test_a_malformed_timeout_is_a_one_line_cli_error(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from pipelines.cli import _register, app
    from tasks.harbor import write_harbor

    _register()
    write_harbor(base_task(), tmp_path / "corpus" / "clean")
    monkeypatch.setenv("T1_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("T1_LLM_MODEL", "m")
    monkeypatch.setenv("T1_LLM_TIMEOUT_S", "soon")
    args = ["audit", str(tmp_path / "corpus"), "--static", "--store", str(tmp_path / "s")]
    r = CliRunner().invoke(app, args)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "T1_LLM_TIMEOUT_S" in lines[0], r.output
