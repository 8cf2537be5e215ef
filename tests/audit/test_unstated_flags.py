"""Options the tests pass to the agent's program that nothing given to the agent states are a
hidden requirement: an interface it has to guess.

Before (exec judge 24, `benchmarks/results/audit_recall_blind2_exec24.txt`): the second blind
set's `hidden--cli-flag-interface` was accepted. Its instruction asks for a converter
`/app/tsv2json.py` and says nothing of how it is called; the tests run it as
`python3 /app/tsv2json.py --in SRC --out DST`. The literal check reads paths, keys, headers
and values, never an argument list's options. Now the options after a program the
instruction names and the agent writes (run itself, or through its interpreter) are checked
against the instruction and the environment's files. Reach, measured statically: of the
3,563 public tasks that load, none passes an option to the agent's own program at all (the
options there are git's, duckdb's, a shipped binary's: not the agent's program), and of the
fixtures and seeds only this task is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.static_checks import program_flags, unstated_flags
from audit.verdict import Code, Verdict
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, texts
from tests.factories import make_task

PROGRAMS = {"/app/conv.py", "/app/bin/conv"}
TESTS = """import subprocess
def test_a():
    subprocess.run(["python3", "/app/conv.py", "--in", src, "-o", dst, "-3"], check=True)
    subprocess.run("/app/bin/conv --fast a b && wc -l --total=never b", shell=True)
    subprocess.run(["git", "-C", "/app/conv.py", "log", "--oneline"])
    subprocess.run(["python3", "-u", "/app/conv.py", "--help"])
"""


def test_the_options_passed_to_a_named_program_are_read():
    found = [(line, program, flag) for line, program, flag in program_flags(TESTS, PROGRAMS)]
    assert found == [
        (3, "/app/conv.py", "--in"),
        (3, "/app/conv.py", "-o"),  # `-3` is a number, not an option
        (4, "/app/bin/conv", "--fast"),  # the command string ends at `&&`
    ]  # git's options and the interpreter's `-u` are not the program's; `--help` is anyone's


def _task(instruction: str):
    task = make_task(extra_tests={"test_outputs.py": TESTS.encode()})
    return task.model_copy(update={"instruction": instruction})


def test_an_option_nothing_states_is_a_hidden_requirement():
    found = unstated_flags(_task("Write `/app/conv.py` and `/app/bin/conv`: converters."))
    assert [f.item for f in found] == ["--in", "-o", "--fast"]
    assert all(f.code == Code.HIDDEN_REQUIREMENT for f in found)
    stated = "Write `/app/conv.py` (`--in FILE`, `-o FILE`) and `/app/bin/conv` (`--fast`)."
    assert unstated_flags(_task(stated)) == []


@pytest.mark.sandbox
def test_the_blind_converter_is_rejected_for_its_unstated_interface():
    blind2 = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind2"
    [task] = [t for t in import_dir(blind2)[0] if t.id == "hidden--cli-flag-interface"]
    ev = run_exec_judge(task, ExecConfig(**{**OFF, "perturb": True}, workers=2))
    decided = decision(ev)
    assert decided.verdict == Verdict.REJECTED, texts(ev)
    assert Code.HIDDEN_REQUIREMENT.value in decided.hard, texts(ev)
    assert {f.item for f in ev.findings if f.code == Code.HIDDEN_REQUIREMENT} == {"--in", "--out"}
