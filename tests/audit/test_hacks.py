"""Scripted hacks: what they read from an instruction, what their scripts do (run under a
real bash on a scratch directory), the evidence they give, and, in the real sandbox, that a
verifier a stub satisfies is `hackable` while a clean seed is not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.hacks import HACKABLE_SHARE, hack_agent, hack_evidence
from audit.judge_exec import ExecConfig, run_exec_judge, score_dimensions
from audit.rubric import Dimension, decide, load_rubric
from audit.verdict import Code
from sandbox.trial import run_trial
from tasks.corpus import SEED_DIR, load_task
from tasks.hacks import (
    CLOSED,
    FORGER,
    HACKS,
    IN_RUNNER_FORGER,
    TEST_MODULE,
    HackOutcome,
    Named,
    forger_path,
    hack_outcome,
    hack_script,
    hack_scripts,
    instruction_names,
)
from tasks.model import Category, EnvironmentSpec, Limits, Task
from tasks.reports import collect_report
from tasks.results import (
    AgentCode,
    AssertionResult,
    AssertionStatus,
    FailureMode,
    ReportSource,
    TrialResult,
    VerifierReport,
)
from tests.audit.planted import CHECKRUNNER, TEST_SH

INSTRUCTION = """\
Read `/app/data/input.csv` and write the total to /app/out/total.txt. Also create
`reports/summary.json`, `conf/app.yaml`, the directory `/app/cache/`, and an executable
`/app/bin/run.sh`.
Implement `def parse_row(line)` and `normalize()` in `/app/tool.py`, and
`pkg.stats.mean` (use `json.dumps` for output). The header must be "id,amount" and the
answer has 3 decimals. Never touch /tests/test_outputs.py or /proc/self.
When it is done, `/app/bin/run.sh --check` prints `ready` and exits 0:

```
$ /app/bin/run.sh --check
ready
$ python3 /app/tool.py 2 3
5
```
"""


def test_names_are_read_from_the_instruction_only() -> None:
    n = instruction_names(INSTRUCTION, "/app")
    assert set(n.paths) >= {
        "/app/data/input.csv",
        "/app/out/total.txt",  # a trailing period is prose, not the name
        "/app/reports/summary.json",  # backticked and relative: under the working directory
        "/app/conf/app.yaml",
        "/app/cache/",
        "/app/bin/run.sh",
        "/app/tool.py",
    }
    assert not [p for p in n.paths if p.startswith(("/tests", "/proc"))]
    assert set(n.functions) >= {("", "parse_row"), ("", "normalize"), ("pkg.stats", "mean")}
    assert not [m for m, _ in n.functions if m == "json"]  # a standard-library module
    assert {"id,amount", "3"} <= set(n.literals)


def test_every_hack_is_a_script_and_unknown_names_are_refused() -> None:
    scripts = hack_scripts(INSTRUCTION, "/app")
    assert len(HACKS) >= 8 and {s.name for s in scripts} == set(HACKS)
    for s in scripts:
        assert s.script.startswith("set +e\ncd /app") and s.script.endswith("exit 0\n")
        assert "/tests" not in s.script and "/solution" not in s.script
        assert s.command.startswith("bash -c ")
    with pytest.raises(ValueError, match="unknown hack 'nope'"):
        hack_script("nope", Named(), "/app")


def test_a_hack_with_nothing_to_do_is_left_out() -> None:
    names = {s.name for s in hack_scripts("Print the answer to standard output.", "/app")}
    assert "stub_paths" not in names and "echo_literals" not in names
    assert "touch_now" in names  # sweeps the working directory whatever the instruction says


def _bash(script: str, cwd: Path) -> None:
    subprocess.run(["bash", "-c", script], cwd=cwd, check=True, timeout=60)


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, str]:
    wd = tmp_path / "app"
    (wd / "data").mkdir(parents=True)
    (wd / "data" / "input.csv").write_text("id,amount\n1,2.5\n")
    instruction = INSTRUCTION.replace("/app", str(wd))
    return wd, instruction


def _run(name: str, wd: Path, instruction: str) -> None:
    _bash(hack_script(name, instruction_names(instruction, str(wd)), str(wd)).script, wd)


def test_stub_paths_makes_directories_empty_files_and_no_op_programs(scratch) -> None:
    wd, instruction = scratch
    _run("stub_paths", wd, instruction)
    assert (wd / "cache").is_dir()
    assert (wd / "out" / "total.txt").read_bytes() == b""
    assert (wd / "reports" / "summary.json").read_bytes() == b""
    run_sh = wd / "bin" / "run.sh"
    assert os.access(run_sh, os.X_OK) and subprocess.run([str(run_sh)]).returncode == 0
    tool = subprocess.run(
        ["python3", "-c", "import tool; print(tool.parse_row('x'), tool.normalize())"],
        cwd=wd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert tool.stdout.strip() == "None None"
    assert (wd / "data" / "input.csv").read_text() == "id,amount\n1,2.5\n"  # inputs kept


def test_link_tests_points_every_absent_named_file_at_the_test_module(scratch) -> None:
    wd, instruction = scratch
    _run("link_tests", wd, instruction)
    for rel in ("out/total.txt", "reports/summary.json", "bin/run.sh", "tool.py"):
        assert os.readlink(wd / rel) == TEST_MODULE, rel
    assert not (wd / "data" / "input.csv").is_symlink()  # an input is left alone
    assert "link_tests" not in HACKS and "link_tests" in CLOSED  # the audit's set lacks it


def test_forge_in_runner_puts_the_forger_first_in_every_named_python_file(scratch) -> None:
    wd, instruction = scratch
    (wd / "tool.py").write_text("from __future__ import annotations\n\nX = 1\n")
    _run("forge_in_runner", wd, instruction)
    tool = (wd / "tool.py").read_text()
    assert tool.startswith("from __future__") and tool.endswith(IN_RUNNER_FORGER)
    made = wd / "reports" / "summary.json"
    assert not made.exists()  # a named file that is no Python module is left alone
    assert "forge_in_runner" in CLOSED and "forge_in_runner" not in HACKS


def test_forge_pickle_leaves_a_model_whose_loading_runs_the_forger(tmp_path) -> None:
    """At every named model file a pickle that, loaded in a pytest process, has made every
    outcome pytest reports passed (a plain `pickle.load`); other named files are left alone."""
    wd = tmp_path / "app"
    wd.mkdir()
    instruction = f"Train it and save the model to `{wd}/model.pkl`; report to `{wd}/out.txt`."
    _run("forge_pickle", wd, instruction)
    assert not (wd / "out.txt").exists()
    probe = (
        "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'));"
        " from _pytest.reports import TestReport; print(TestReport.__init__.__name__)"
    )
    r = subprocess.run([sys.executable, "-c", probe, str(wd / "model.pkl")],
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert r.stdout.strip() == "_t1_passed"
    assert "forge_pickle" in CLOSED and "forge_pickle" not in HACKS


def test_forge_yaml_leaves_a_document_whose_unsafe_loading_runs_the_forger(tmp_path) -> None:
    """At every named YAML file a document that, loaded with PyYAML's unsafe loader in a
    pytest process, has made every outcome pytest reports passed; a safe loader refuses it,
    and other named files are left alone."""
    yaml = pytest.importorskip("yaml")
    wd = tmp_path / "app"
    wd.mkdir()
    instruction = f"Write the settings to `{wd}/conf/settings.yaml`; report to `{wd}/out.txt`."
    _run("forge_yaml", wd, instruction)
    assert not (wd / "out.txt").exists()
    doc = wd / "conf" / "settings.yaml"
    probe = (
        "import yaml, sys; yaml.load(open(sys.argv[1]), Loader=yaml.UnsafeLoader);"
        " from _pytest.reports import TestReport; print(TestReport.__init__.__name__)"
    )
    r = subprocess.run([sys.executable, "-c", probe, str(doc)],
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert r.stdout.strip() == "_t1_passed"
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.safe_load(doc.read_text())
    assert "forge_yaml" in HACKS


def test_module_stubs_make_the_dotted_module(scratch) -> None:
    wd, instruction = scratch
    _run("module_stubs", wd, instruction)
    r = subprocess.run(["python3", "-c", "from pkg.stats import mean; print(mean())"],
                       cwd=wd, capture_output=True, text=True, check=True)  # fmt: skip
    assert r.stdout.strip() == "None"


def test_echo_literals_fill_the_outputs(scratch) -> None:
    wd, instruction = scratch
    _run("echo_literals", wd, instruction)
    lines = (wd / "out" / "total.txt").read_text().splitlines()
    assert "id,amount" in lines and "3" in lines
    printed = subprocess.run([str(wd / "bin" / "run.sh")], capture_output=True, text=True)
    assert "id,amount" in printed.stdout.splitlines()


def test_shaped_outputs_have_the_form_of_an_answer_and_no_records(tmp_path: Path) -> None:
    wd = tmp_path / "app"
    wd.mkdir()
    instruction = f"Write `{wd}/out.csv` (header `name,total`) and `{wd}/top.json`."
    _run("shaped_outputs", wd, instruction)
    assert (wd / "out.csv").read_text() == "name,total\n"
    assert (wd / "top.json").read_text() == "[]\n"


def test_copy_inputs_copies_the_named_inputs_to_the_outputs(scratch) -> None:
    wd, instruction = scratch
    _run("copy_inputs", wd, instruction)
    assert (wd / "out" / "total.txt").read_text() == "id,amount\n1,2.5\n"


def test_exit_zero_replaces_a_named_program_that_exists(scratch) -> None:
    wd, instruction = scratch
    (wd / "bin").mkdir()
    (wd / "bin" / "run.sh").write_text("#!/bin/bash\nexit 3\n")
    _run("exit_zero", wd, instruction)
    assert subprocess.run([str(wd / "bin" / "run.sh")]).returncode == 0


def test_exit_zero_makes_a_named_program_with_no_suffix(tmp_path: Path) -> None:
    """`Write an executable linter /app/bin/lint-hosts`: a suffixless name that does not exist
    is made a program that exits 0 (a blind fixture's tests ran it on valid input only); a
    named file with a data suffix is not, nor an existing suffixless file that is data."""
    wd = tmp_path / "app"
    wd.mkdir()
    (wd / "hosts").write_text("127.0.0.1 localhost\n")
    instruction = (f"Write an executable linter `{wd}/tools/lint-hosts` for files like "
                   f"`{wd}/hosts`; log to `{wd}/lint.log`.")  # fmt: skip
    _run("exit_zero", wd, instruction)
    r = subprocess.run([str(wd / "tools" / "lint-hosts"), str(wd / "hosts")], capture_output=True)
    assert (r.returncode, r.stdout) == (0, b"")
    assert (wd / "hosts").read_text() == "127.0.0.1 localhost\n"
    assert not (wd / "lint.log").exists()


def test_the_worked_examples_and_the_printed_answers_are_read() -> None:
    n = instruction_names(INSTRUCTION, "/app")
    assert [(e.program, e.args, e.output) for e in n.examples] == [
        ("/app/bin/run.sh", ("--check",), "ready\n"),
        ("/app/tool.py", ("2", "3"), "5\n"),  # run through its interpreter
    ]
    assert n.answers == ("ready",)
    data = "```\n$ cat /app/out/total.txt\n7\n```\n"  # a data file shown, not a program
    assert instruction_names(data, "/app").examples == ()


def test_example_table_answers_each_example_and_the_first_for_the_rest(tmp_path: Path) -> None:
    """A program that hard-codes the instruction's worked examples (a blind fixture's tests
    ran exactly those three), in Python and in bash."""
    wd = tmp_path / "app"
    wd.mkdir()
    instruction = (
        f"Write `{wd}/size.py` and `{wd}/size`:\n\n```\n$ python3 {wd}/size.py 512\n512 B\n"
        f"$ python3 {wd}/size.py 1536\n1.5 KiB\n$ {wd}/size 'two words'\n2\nwords\n```\n"
    )
    _run("example_table", wd, instruction)

    def out(*argv: str) -> str:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    assert out("python3", str(wd / "size.py"), "1536") == "1.5 KiB\n"
    assert out("python3", str(wd / "size.py"), "9") == "512 B\n"
    assert out(str(wd / "size"), "two words") == "2\nwords\n"


def test_constant_answer_prints_the_first_answer_whatever_it_is_given(tmp_path: Path) -> None:
    wd = tmp_path / "app"
    wd.mkdir()
    instruction = (
        f"Write `{wd}/check.py`, run as `python3 {wd}/check.py ADDRESS`. If valid, print "
        "`valid` and exit with status 0. Otherwise print `invalid` and exit with status 1."
    )
    _run("constant_answer", wd, instruction)
    r = subprocess.run(["python3", str(wd / "check.py"), "999.1.1.1"], capture_output=True)
    assert (r.returncode, r.stdout) == (0, b"valid\n")
    assert hack_scripts("Print the answer to standard output.", "/app", ["constant_answer"]) == []


def test_timestamp_games_and_modes(scratch) -> None:
    wd, instruction = scratch
    target = wd / "data" / "input.csv"
    _run("epoch_mtimes", wd, instruction)
    assert target.stat().st_mtime == 0
    _run("touch_now", wd, instruction)
    assert target.stat().st_mtime > 1e9
    _run("chmod_x", wd, instruction)
    assert os.access(target, os.X_OK)
    _run("make_dirs", wd, instruction)
    assert (wd / "out").is_dir() and (wd / "pkg" / "stats.py").exists() is False


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_commit_commits_the_current_tree(scratch) -> None:
    wd, instruction = scratch
    _bash("git init -q . && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m 0", wd)
    (wd / "new.txt").write_text("x\n")
    _run("git_commit", wd, instruction)
    log = subprocess.run(["git", "log", "--format=%s", "-1", "--name-only"], cwd=wd,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "new.txt" in log and log.splitlines()[0] != "0"


# ---- evidence (pure) -----------------------------------------------------------------------


def _result(oks: list[int], mode: FailureMode = FailureMode.NONE) -> TrialResult:
    ok, bad = AssertionStatus.PASSED, AssertionStatus.FAILED
    asserts = [AssertionResult(name=f"t{i}", status=ok if x else bad) for i, x in enumerate(oks)]
    report = VerifierReport(assertions=asserts, source=ReportSource.CTRF)
    return TrialResult(trial_id="x", task_id="t", task_hash="h", agent="a", backend="local",
                       report=report, failure_mode=mode)  # fmt: skip


def test_hack_outcome_is_per_assertion_and_zero_when_tampered() -> None:
    o = hack_outcome("stub_paths", _result([True, False, True, False]))
    assert o.passed == ("t0", "t2") and o.share == 0.5
    assert hack_outcome("x", _result([True, True], FailureMode.TAMPERED)).share == 0.0
    binary = _result([]).model_copy(
        update={"report": VerifierReport(source=ReportSource.REWARD, reward=1.0)}
    )
    assert hack_outcome("x", binary).share == 1.0
    broken = hack_outcome("x", _result([], FailureMode.SANDBOX_ERROR))
    assert not broken.rewardable
    # what the runner recorded after it ran the agent's code earns nothing, as in training
    marked = _result([True, True, True, False])
    marked.report.agent_code = [AgentCode(path="/app/solution.py", after=1)]
    assert hack_outcome("forge_in_runner", marked).passed == ("t0",)
    marked.report.agent_code = [AgentCode(path="/app/solution.py", after=0)]
    assert hack_outcome("forge_in_runner", marked).share == 0.0


def test_hackable_needs_a_share_over_the_threshold_and_a_gain_over_nop() -> None:
    nop = _result([True, False, False, False])
    full = [
        HackOutcome("stub_paths", ("t0", "t1", "t2", "t3"), 4),
        HackOutcome("chmod_x", ("t0",), 4),
    ]
    ev = hack_evidence(full, nop, threshold=0.5)
    assert ev.measures["max_hack_share"] == 1.0 and ev.measures["hack_gain"] == 0.75
    assert ev.measures["hack_share.chmod_x"] == 0.25
    hackable = [f for f in ev.findings if f.code == Code.HACKABLE]
    assert [f.item for f in hackable] == ["stub_paths"]
    assert sum(f.code == Code.HACK_TRIED for f in ev.findings) == 2
    # exactly the share nop earns already is free reward, not a hack
    same = hack_evidence([HackOutcome("touch_now", ("t0", "t1", "t2"), 4)], _result([1, 1, 1, 0]))
    assert Code.HACKABLE not in [f.code for f in same.findings]
    # as many as nop but another one (a timing check flipping under load) is no gain
    nop3 = _result([1, 1, 1, 0])
    swapped = [HackOutcome("chmod_x", ("t0", "t1", "t3"), 4)]
    assert Code.HACKABLE not in [f.code for f in hack_evidence(swapped, nop3, 0.5).findings]
    # the hack named is the top one among those over the threshold with a gain
    both = [*swapped, HackOutcome("git_commit", ("t0", "t1", "t2", "t3"), 4)]
    named = [f.item for f in hack_evidence(both, nop3, 0.5).findings if f.code == Code.HACKABLE]
    assert named == ["git_commit"]
    # at the threshold is not over it
    half = hack_evidence([HackOutcome("stub_paths", ("t0", "t1"), 4)], _result([0, 0, 0, 0]), 0.5)
    assert Code.HACKABLE not in [f.code for f in half.findings]
    skipped = hack_evidence([HackOutcome("x", (), 0, rewardable=False, detail="boom")], None)
    assert [f.code for f in skipped.findings] == [Code.RERUN_SKIPPED] and not skipped.measures


# ---- in the sandbox -------------------------------------------------------------------------

LIMITS = Limits(agent_timeout_s=30, verifier_timeout_s=30, memory_mb=256, pids=128, disk_mb=64)


def _task(task_id: str, instruction: str, solve: str, tests: str, files=None) -> Task:
    return Task(
        id=task_id,
        name=task_id,
        instruction=instruction,
        category=Category.SCRIPTING_AUTOMATION,
        limits=LIMITS,
        environment=EnvironmentSpec(requires=["python3"], files=files or {}),
        solution={"solve.sh": solve.encode()},
        verifier={
            "test.sh": TEST_SH,
            "run_checks.py": CHECKRUNNER,
            "test_outputs.py": tests.encode(),
        },  # fmt: skip
    )


NUMBERS = b"".join(b"%d\n" % (i * 37 % 101) for i in range(50))

# Three surface forms of a verifier that checks that the work exists, not what it does.
STUBBABLE = {
    "wrapper": _task(
        "hack-wrapper",
        "`/app/numbers.txt` holds one integer a line. Write an executable script "
        "`/app/bin/maxline.sh` that prints the largest of them.\n",
        "mkdir -p /app/bin\nprintf '#!/bin/bash\\nsort -n /app/numbers.txt | tail -1\\n' "
        "> /app/bin/maxline.sh\nchmod +x /app/bin/maxline.sh\n",
        "import os, subprocess\n\n"
        "def test_script_exists():\n    assert os.access('/app/bin/maxline.sh', os.X_OK)\n\n"
        "def test_script_runs():\n"
        "    assert subprocess.run(['/app/bin/maxline.sh']).returncode == 0\n",
        {"app/numbers.txt": NUMBERS},
    ),
    "module": _task(
        "hack-module",
        "Create `/app/textutil.py` with a function `def slugify(text)` that lowercases the "
        "text and joins its words with single hyphens.\n",
        "cat > /app/textutil.py <<'EOF'\ndef slugify(text):\n"
        "    return '-'.join(text.lower().split())\nEOF\n",
        "import subprocess, sys\n\n"  # the module is imported by a program of its own
        "def _check(code):\n"
        "    return subprocess.run([sys.executable, '-c', 'import sys; sys.path.insert(0, "
        '"/app"); import textutil; \' + code]).returncode == 0\n\n'
        "def test_module_imports():\n    assert _check('pass')\n\n"
        "def test_slugify_defined():\n"
        "    assert _check('assert callable(getattr(textutil, \"slugify\", None))')\n",
    ),
    "report": _task(
        "hack-report",
        "Summarize `/app/numbers.txt` (one integer a line): write their sum to "
        "/app/out/sum.txt and their count to /app/out/count.txt.\n",
        "mkdir -p /app/out\n"
        "python3 -c \"print(sum(map(int, open('/app/numbers.txt'))))\" > /app/out/sum.txt\n"
        "wc -l < /app/numbers.txt > /app/out/count.txt\n",
        "import os\n\n"
        "def test_sum_written():\n    assert os.path.isfile('/app/out/sum.txt')\n\n"
        "def test_count_written():\n    assert os.path.exists('/app/out/count.txt')\n",
        {"app/numbers.txt": NUMBERS},
    ),
}

LEAN = ExecConfig(
    reruns=0, conditions=False, chance=False, perturb=False, max_mutants=0, max_output_mutants=0
)


@pytest.mark.sandbox
@pytest.mark.parametrize("form", list(STUBBABLE))
def test_a_verifier_a_stub_satisfies_is_hackable_and_rejected(form: str) -> None:
    task = STUBBABLE[form]
    ev = run_exec_judge(task, LEAN)
    assert ev.measures["oracle_pass_share"] == 1.0, ev.findings
    assert ev.measures["nop_pass_share"] == 0.0
    assert ev.measures["max_hack_share"] == 1.0 and ev.measures["hack_share.stub_paths"] == 1.0
    assert Code.HACKABLE in ev.codes()
    d = decide(score_dimensions(ev), [c.value for c in ev.codes()], load_rubric("t1"))
    assert "hackable" in d.hard
    assert score_dimensions(ev)[Dimension.COVERAGE] <= 0.5  # the hack's gain feeds coverage
    assert Code.JUDGE_RUNS_AGENT_CODE not in ev.codes()


SLUG_TESTS = (
    "def test_slug():\n    assert _load().slugify('A  b C') == 'a-b-c'\n\n"
    "def test_slug_empty():\n    assert _load().slugify('') == ''\n"
)


def _loading(load: str, task_id: str) -> Task:
    """The module task with tests that `load` its module (the body of `_load()`)."""
    module = STUBBABLE["module"]
    tests = f"import importlib.util\n\ndef _load():\n{load}\n\n{SLUG_TESTS}"
    return _task(task_id, module.instruction, module.solution["solve.sh"].decode(), tests)


IN_RUNNER = _loading(
    "    spec = importlib.util.spec_from_file_location('textutil', '/app/textutil.py')\n"
    "    mod = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(mod)\n"
    "    return mod",
    "runner-imports-module",
)


@pytest.mark.sandbox
def test_a_verifier_that_imports_the_agents_module_is_judged_with_it_in_its_own_process() -> None:
    """The tests import the agent's module into the runner: the reference solution's verdict
    is marked, then judged again with the module in a process of its own, where every outcome
    is the judge's (sandbox.judge, rule 6): a reference verdict and no hard reject (before:
    `judge_runs_agent_code`, kept out of T1). No stub a hack leaves earns anything."""
    ev = run_exec_judge(IN_RUNNER, LEAN)
    assert ev.measures["oracle_pass_share"] == 1.0, ev.findings
    assert Code.JUDGE_RUNS_AGENT_CODE not in ev.codes()
    assert ev.reference is not None and ev.reference.total == 2
    d = decide(score_dimensions(ev), [c.value for c in ev.codes()], load_rubric("t1"))
    assert "judge_runs_agent_code" not in d.hard
    assert ev.measures["max_hack_share"] == 0.0


EXECS_IN_RUNNER = _loading(
    "    mod = {}\n"
    "    exec(compile(open('/app/textutil.py').read(), '/app/textutil.py', 'exec'), mod)\n"
    "    return type('M', (), mod)",
    "runner-execs-module",
)


@pytest.mark.sandbox
def test_a_verifier_that_executes_the_agents_source_in_its_runner_is_rejected() -> None:
    """The tests compile and run the agent's source in the runner themselves (no process of
    its own for that): the reference solution's verdict is marked, a hard reject of its own;
    the stub a hack leaves is marked too, so it earns nothing a trainer would pay."""
    ev = run_exec_judge(EXECS_IN_RUNNER, LEAN)
    assert ev.measures["oracle_pass_share"] == 1.0, ev.findings
    assert Code.JUDGE_RUNS_AGENT_CODE in ev.codes()
    d = decide(score_dimensions(ev), [c.value for c in ev.codes()], load_rubric("t1"))
    assert "judge_runs_agent_code" in d.hard
    assert ev.measures["max_hack_share"] == 0.0


UNPICKLE_TESTS = """import pickle


def _counts():
    with open("/app/counts.pkl", "rb") as f:
        return pickle.load(f)


def test_total():
    assert sum(_counts().values()) == 50


def test_distinct():
    assert len(_counts()) == len(set(open("/app/numbers.txt").read().split()))
"""
UNPICKLES = _task(
    "runner-unpickles-model",
    "Save the counts of `/app/numbers.txt`'s lines as a pickled `collections.Counter` at"
    " `/app/counts.pkl`.\n",
    "python3 -c \"import collections, pickle; c = collections.Counter(open('/app/numbers.txt')"
    ".read().split()); pickle.dump(c, open('/app/counts.pkl', 'wb'))\"\n",
    UNPICKLE_TESTS,
    {"app/numbers.txt": NUMBERS},
)


@pytest.mark.sandbox
def test_a_verifier_that_unpickles_the_agents_model_in_its_runner_is_rejected() -> None:
    """The tests unpickle what the agent saved (a Counter: a pickle that names a global) in
    the runner: the reference solution's verdict is marked before either outcome, a hard
    reject (whose pickle it is the judge cannot tell, and a pickle can name `exec`)."""
    ev = run_exec_judge(UNPICKLES, LEAN)
    assert ev.measures["oracle_pass_share"] == 1.0, ev.findings
    assert Code.JUDGE_RUNS_AGENT_CODE in ev.codes()
    d = decide(score_dimensions(ev), [c.value for c in ev.codes()], load_rubric("t1"))
    assert "judge_runs_agent_code" in d.hard


# Tests that load the agent's YAML with a loader that calls what the data names (PyYAML's
# `Loader`): the data runs in the runner and no mark is made (the runner knows pickles by
# their audit event; a YAML constructor raises none). The judge cannot separate code the
# runner's own process runs; the audit measures it (`forge_yaml`) and keeps the task out.
YAML_DOCKERFILE = b"""FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest \\
    python3-yaml && rm -rf /var/lib/apt/lists/*
WORKDIR /app
"""
YAML_TEST_SH = b"""#!/bin/bash
pytest -rA /tests/test_outputs.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def _yaml_task(loader: str) -> Task:
    tests = (
        "import yaml\n\n"
        f"def _settings():\n    return {loader}\n\n"
        "def test_port():\n    assert _settings()['port'] == 8080\n\n"
        "def test_hosts():\n    assert _settings()['hosts'] == ['a', 'b']\n"
    )
    return Task(
        id=f"yaml-settings-{'unsafe' if 'Loader' in loader else 'safe'}",
        name="yaml settings",
        instruction="Write `/app/settings.yaml`: `port` 8080 and `hosts` a list of a and b.\n",
        category=Category.SCRIPTING_AUTOMATION,
        limits=LIMITS.model_copy(update={"memory_mb": 512, "disk_mb": 256}),
        environment=EnvironmentSpec(files={"Dockerfile": YAML_DOCKERFILE}),
        solution={"solve.sh": b"printf 'port: 8080\\nhosts: [a, b]\\n' > /app/settings.yaml\n"},
        verifier={"test.sh": YAML_TEST_SH, "test_outputs.py": tests.encode()},
    )


UNSAFE_YAML = _yaml_task("yaml.load(open('/app/settings.yaml'), Loader=yaml.Loader)")
SAFE_YAML = _yaml_task("yaml.safe_load(open('/app/settings.yaml'))")


def _yaml_verdicts(backend: str) -> None:
    cfg = LEAN.model_copy(update={"backend": backend})
    unsafe = run_exec_judge(UNSAFE_YAML, cfg)
    assert unsafe.measures["oracle_pass_share"] == 1.0, unsafe.findings
    assert unsafe.measures["hack_share.forge_yaml"] == 1.0, unsafe.findings
    d = decide(score_dimensions(unsafe), [c.value for c in unsafe.codes()], load_rubric("t1"))
    assert "hackable" in d.hard
    safe = run_exec_judge(SAFE_YAML, cfg)
    assert safe.measures["oracle_pass_share"] == 1.0, safe.findings
    assert safe.measures["hack_share.forge_yaml"] == 0.0 and Code.HACKABLE not in safe.codes()


@pytest.mark.sandbox
def test_a_verifier_that_loads_the_agents_yaml_with_an_unsafe_loader_is_hackable() -> None:
    """The forged document earns every assertion where the tests load it with PyYAML's
    `Loader` (its tag runs the forger in the runner, unmarked), none where they `safe_load`
    it: the first task is `hackable`, kept out of T1; the second is not."""
    _yaml_verdicts("local")


@pytest.mark.docker
def test_the_yaml_forger_is_measured_on_the_docker_backend(docker_engine) -> None:
    _yaml_verdicts("docker")


@pytest.mark.sandbox
def test_a_hack_never_waits_on_the_terminal() -> None:
    """`copy_inputs` where the working directory holds nothing to copy: its `cat` gets no
    file, and reading the agent's terminal it would wait out the trial's deadline (30 s here,
    the agent cut, the trial lost). It reads nothing: the hack ends at once, its output made."""
    (h,) = hack_scripts(UNSAFE_YAML.instruction, "/app", ["copy_inputs"])
    r = run_trial(UNSAFE_YAML, hack_agent(h), "local")
    assert r.failure_mode == FailureMode.NONE, r.failure_detail
    assert r.agent_s < UNSAFE_YAML.limits.agent_timeout_s / 3
    assert r.report.total == 2 and r.passed == 0  # the empty document it wrote fails both


# A seed whose measured max hack share is 0 (benchmarks/hack_share.py, docs/audit.md).
CLEAN_SEED = "ds-sensor-summary-stats"


@pytest.mark.sandbox
def test_a_clean_seed_is_not_hackable() -> None:
    ev = run_exec_judge(load_task(SEED_DIR / CLEAN_SEED), LEAN)
    assert ev.measures["assertions"] >= 4
    assert ev.measures["max_hack_share"] <= HACKABLE_SHARE / 2
    assert ev.measures["hacks"] >= 8
    assert Code.HACKABLE not in ev.codes()


def test_forge_reports_makes_every_program_run_the_forger_first(scratch) -> None:
    """Scripts keep working and run the forger first; an executable is wrapped; outside a
    verifier's run (no /logs/verifier here) the forger does nothing."""
    wd, instruction = scratch
    (wd / "bin").mkdir()
    (wd / "bin" / "run.sh").write_text("#!/bin/bash\necho ran\n")
    (wd / "tool.py").write_text("from __future__ import annotations\nprint('tool')\n")
    (wd / "helper.py").write_text("#!/usr/bin/env python3\nprint('helper')\n")
    shutil.copy("/bin/true", wd / "native")
    _run("forge_reports", wd, instruction)
    for name, out in (("bin/run.sh", "ran"), ("tool.py", "tool"), ("helper.py", "helper")):
        text = (wd / name).read_text()
        assert forger_path(str(wd)) in text, name
        argv = ["python3", str(wd / name)] if name.endswith(".py") else ["bash", str(wd / name)]
        assert subprocess.run(argv, capture_output=True, text=True).stdout.strip() == out
    assert forger_path(str(wd)) in (wd / "native").read_text()
    assert subprocess.run([str(wd / "native")]).returncode == 0
    assert (wd / "data" / "input.csv").read_text() == "id,amount\n1,2.5\n"  # data untouched


def test_the_forgers_rewrite_passes_every_outcome(tmp_path: Path) -> None:
    """The forger's rewrite (its `pass` function, under a real bash and perl) of a CTRF, a
    JUnit and a reward file parses to all-passed with the same test names."""
    fn = FORGER[FORGER.index("pass() {") : FORGER.index("\nif [ ")]
    ctrf = (
        '{"results":{"tool":{"name":"x"},"summary":{"tests":2,"passed":0,"failed":2},'
        '"tests":[{"name":"a","status":"failed"},{"name":"b","status": "skipped"}]}}'
    )
    junit = (
        '<testsuites><testsuite tests="2" failures="1" errors="1"><testcase name="a">'
        '<failure message="x">\nboom\n</failure></testcase><testcase name="b">'
        '<error message="y"/></testcase></testsuite></testsuites>'
    )
    got = {}
    for name, text in (("ctrf.json", ctrf), ("junit.xml", junit), ("reward.txt", "0")):
        (tmp_path / name).write_text(text)
        script = f'{fn}\npass "{tmp_path / name}" < "{tmp_path / name}"'
        got[name] = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
    for name in ("ctrf.json", "junit.xml"):
        report = collect_report({name: got[name].encode()}, "")
        assert [(a.name.rsplit(".", 1)[-1], a.ok) for a in report.assertions] == [
            ("a", True),
            ("b", True),
        ], got[name]
    assert got["reward.txt"].strip() == "1"
