"""tasks.literals: which literals a verifier asserts on, and whether they are stated.

Material varies on purpose: pytest asserts, unittest methods, `if ...: pytest.fail`, check
helpers returning booleans, shell tests with `[ ]`, grep and jq, expected-output files, and a
real Terminal-Bench-style Dockerfile layout.
"""

from __future__ import annotations

import pytest

from tasks.literals import (
    CoverageVerdict,
    Literal,
    LiteralKind,
    asserted_literals,
    literal_coverage,
    task_literal_coverage,
)
from tasks.model import EnvironmentSpec, Task

K = LiteralKind


def lits(files: dict[str, str]) -> dict[str, Literal]:
    out = asserted_literals({n: t.encode() for n, t in files.items()})
    return {lit.value: lit for lit in out}


def cover(
    files: dict[str, str], instruction: str, env: dict[str, str] | None = None, workdir="/app"
) -> dict[str, CoverageVerdict]:
    found = asserted_literals({n: t.encode() for n, t in files.items()})
    envb = {n: t.encode() for n, t in (env or {}).items()}
    return {v.literal.value: v for v in literal_coverage(found, instruction, envb, workdir)}


# ---- reading: Python ----------------------------------------------------------------------


def test_pytest_asserts_give_typed_literals():
    src = """
import json, re
OUT = "/app/out/report.json"

def test_report():
    data = json.load(open(OUT))
    assert data["status"] == "complete"
    assert data["total"] == 1200
    assert re.fullmatch(r"\\d{4}-\\d{2}-\\d{2}", data["day"])
    assert data["owner"].startswith("team-")
"""
    found = lits({"test_outputs.py": src})
    assert found["/app/out/report.json"].kind == K.PATH
    assert found["status"].kind == K.KEY and found["total"].kind == K.KEY
    assert found["complete"].kind == K.NAME
    assert found["1200"].kind == K.NUMBER
    assert found[r"\d{4}-\d{2}-\d{2}"].kind == K.FORMAT
    assert found["team-"].kind == K.STRING
    assert found["complete"].where == "tests/test_outputs.py:7"


def test_negative_and_control_flow_comparisons_demand_nothing():
    src = """
def test_x():
    lines = [ln for ln in open("/app/log.txt") if ln.startswith("DEBUG")]
    for ln in lines:
        if ln == "skip me":
            continue
    assert "Traceback" not in open("/app/out.txt").read()
    assert open("/app/out.txt").read() != "placeholder"
"""
    found = lits({"test_x.py": src})
    assert {"DEBUG", "skip me", "Traceback", "placeholder"}.isdisjoint(found)
    assert "/app/out.txt" in found and "/app/log.txt" in found


def test_if_fail_blocks_flip_polarity_and_unittest_methods_count():
    src = """
import sys, unittest, pytest

def test_a():
    v = open("/srv/state").read().strip()
    if v != "READY":
        pytest.fail("not ready")
    if "DONE" not in v:
        sys.exit(1)

class T(unittest.TestCase):
    def test_b(self):
        self.assertEqual(open("/srv/mode").read(), "strict")
        self.assertIn("ok=yes", open("/srv/log").read())
        self.assertNotIn("forbidden", open("/srv/log").read())
"""
    found = lits({"test_y.py": src})
    assert {"READY", "DONE", "strict", "ok=yes"} <= set(found)
    assert "forbidden" not in found


def test_alternatives_share_a_group_and_char_classes_are_not_literals():
    src = """
def test_z():
    s = open("/app/result.txt").read().strip()
    assert s in ("SUCCESS", "FAILED")
    ok = s.endswith(".done") or s.endswith(".ok")
    assert ok
    assert all(c in "0123456789abcdef" for c in s)
"""
    found = lits({"t.py": src})
    assert found["SUCCESS"].group is not None
    assert found["SUCCESS"].group == found["FAILED"].group
    assert found[".done"].group == found[".ok"].group
    assert "0123456789abcdef" not in found


def test_an_alternative_that_asserts_no_literal_makes_the_others_optional():
    # a public task's check (office_macro_malware_analysis_hard): "://" was read as a
    # requirement the instruction never states, a false `hidden_requirement`; the first
    # operand holds for a URL without "&", whatever else it contains
    src = """
def test_url():
    url = data["download_url"]
    assert "&" not in url or "://" in url
    assert done or "gamma" in url
    assert url == "delta" or url.startswith("epsilon")
    assert data.get("status") or done
"""
    found = lits({"t.py": src})
    assert "://" not in found and "gamma" not in found
    assert found["status"].kind == K.KEY  # a key read under an `or` is read, not grouped
    assert found["delta"].group == found["epsilon"].group is not None


def test_folding_names_fstrings_joins_and_own_writes():
    src = """
import os
from pathlib import Path
ROOT = "/opt/app"
HEADER = "id,name,total"

def test_w():
    scratch = "/opt/app/tmp/input.csv"
    with open(scratch, "w") as f:
        f.write("a,b\\n")
    assert Path(ROOT) / "bin" / "tool"
    out = open(os.path.join(ROOT, "out", "summary.csv")).read().splitlines()
    assert out[0] == HEADER
    assert out[1] == f"total: {len(out)} rows"
    assert "a,b\\n" == open(scratch).read()
"""
    found = lits({"t.py": src})
    assert {"/opt/app/bin/tool", "/opt/app/out/summary.csv", "id,name,total"} <= set(found)
    assert "/opt/app/tmp/input.csv" not in found  # the verifier wrote it itself
    assert "a,b\n" not in found and "a,b" not in found
    assert "total: \u2026 rows" in found


def test_guarded_keys_and_verifier_built_dicts_are_not_demanded():
    src = """
import json
def test_k():
    doc = json.load(open("/app/cfg.json"))
    expected = {"retries": 3}
    assert doc["retries"] == expected["retries"]
    if "proxy" in doc:
        assert doc["proxy"]["port"] > 0
"""
    found = lits({"t.py": src})
    assert "proxy" not in found and "retries" not in found  # retries: the verifier's own dict
    assert "port" in found  # demanded once the optional block runs


def test_multiline_expected_strings_become_lines_and_docstrings_are_ignored():
    src = '''
"""Checks /app/not/a/check."""
def test_m():
    """Also not /app/a/check."""
    assert open("/app/o.txt").read() == "alpha: 1\\nbeta: 22\\n"
'''
    found = lits({"t.py": src})
    assert found["alpha: 1"].kind == K.LINE and found["beta: 22"].kind == K.LINE
    assert "/app/not/a/check" not in found and "/app/a/check" not in found


# ---- reading: shell, jq, expected files ----------------------------------------------------


def test_shell_tests_grep_jq_and_expected_files():
    sh = """#!/bin/bash
set -e
[ -f /srv/out/report.txt ] || exit 1
[ "$(head -n1 /srv/out/report.txt)" = "REPORT v2" ]
test "$(wc -l < /srv/out/report.txt)" -eq 12
grep -q "Checksum: OK" /srv/out/report.txt
grep -Eq '^[0-9]+ items$' /srv/out/report.txt
! grep -q "ERROR" /srv/out/report.txt
jq -e '.summary.count == 12 and .mode == "fast"' /srv/out/meta.json
diff /srv/out/listing.txt /tests/expected_listing.txt
"""
    found = lits({"test.sh": sh, "expected_listing.txt": "alpha\nbeta\n", "notes.txt": "zzz\n"})
    assert found["/srv/out/report.txt"].kind == K.PATH
    assert found["REPORT v2"].kind == K.STRING
    assert found["12"].kind == K.NUMBER
    assert found["Checksum: OK"].kind == K.STRING
    assert found["^[0-9]+ items$"].kind == K.FORMAT
    assert "ERROR" not in found
    assert {"summary", "count", "mode"} <= set(found) and "fast" in found
    assert found["alpha"].kind == K.LINE and found["alpha"].file == "expected_listing.txt"
    assert "zzz" not in found  # never referenced by the verifier's code


def test_expected_json_gives_keys_and_values():
    py = 'import json\ndef test_j():\n    assert json.load(open("/app/o.json")) == ' + (
        'json.load(open("/tests/expected_output.json"))\n'
    )
    found = lits({"test_j.py": py, "expected_output.json": '{"top_user": "alice", "n": 42}'})
    assert found["top_user"].kind == K.KEY
    assert found["alice"].kind == K.NAME and found["42"].kind == K.NUMBER


def test_unparseable_python_still_gives_paths():
    found = lits({"t.py": "def broken(:\n    open('/app/x/y.txt')\n"})
    assert "/app/x/y.txt" in found


# ---- coverage ------------------------------------------------------------------------------


TESTS = """
def test_t():
    s = open("/app/report/summary.txt").read()
    assert s.startswith("Status: Complete")
"""


def test_coverage_is_exact_and_case_sensitive_with_a_near_miss_quoted():
    v = cover({"t.py": TESTS}, "Write `status: complete` to /app/report/summary.txt.")
    assert v["/app/report/summary.txt"].covered
    miss = v["Status: Complete"]
    assert not miss.covered and "status: complete" in (miss.near or "")
    ok = cover({"t.py": TESTS}, "Write `Status:   Complete` (then details) to report/summary.txt")
    assert ok["Status: Complete"].covered and ok["/app/report/summary.txt"].covered


def test_word_boundaries_prevent_accidental_coverage():
    t = {"t.py": 'def test_x():\n    assert open("/app/o").read() == "ok"\n'}
    assert not cover(t, "Print the token to the terminal.")["ok"].covered
    assert cover(t, "Print ok when done.")["ok"].covered


def test_environment_files_and_dockerfile_copies_cover_literals_and_paths():
    tests = """
def test_e():
    assert open("/workspace/data/input.csv").readline().strip() == "ts,sensor,value"
    assert open("/workspace/out.txt").read() == "sensor-17"
"""
    docker = "FROM ubuntu:24.04\nWORKDIR /workspace\nCOPY data/ /workspace/data/\n"
    env = {"Dockerfile": docker, "data/input.csv": "ts,sensor,value\n1,sensor-17,3\n"}
    v = cover({"t.py": tests}, "Find the noisiest sensor; write its id to out.txt.", env, "/x")
    assert v["/workspace/data/input.csv"].covered
    assert v["ts,sensor,value"].where == "environment/data/input.csv"
    assert v["sensor-17"].covered
    assert v["/workspace/out.txt"].covered  # WORKDIR /workspace + "out.txt" named


def test_paths_relative_to_workdir_and_dir_plus_name():
    tests = """
def test_p():
    open("/app/build/out/lib.so")
    open("/app/logs/run.log")
    open("/app/secret/flag.txt")
"""
    instr = "Build into `build/out/lib.so`. Logs go to /app/logs/, as run.log."
    v = cover({"t.py": tests}, instr)
    assert v["/app/build/out/lib.so"].covered and v["/app/logs/run.log"].covered
    assert not v["/app/secret/flag.txt"].covered


def test_numbers_match_numerically_and_as_words_and_templates():
    tests = """
def test_n():
    lines = open("/app/o.txt").read().splitlines()
    assert len(lines) == 3
    assert lines[0] == "total: 4812"
    assert float(lines[1]) == 2.5
    assert int(lines[2]) == 977
"""
    instr = "Write three lines to /app/o.txt: `total: N`, the ratio (e.g. 2.50), then the max."
    v = cover({"t.py": tests}, instr)
    assert v["3"].covered and v["3"].how == "number"
    assert v["total: 4812"].covered and v["total: 4812"].how == "template"
    assert v["2.5"].covered
    assert not v["977"].covered  # a computed answer: the caller judges it


def test_formats_by_example_by_fragments_and_by_written_format():
    tests = r"""
import re
def test_f():
    s = open("/app/o.txt").read()
    assert re.search(r"^run-\d{4}-\d{2}-\d{2}$", s, re.M)
    assert re.match(r"failed_volumes=(\d+)$", s)
    assert re.match(r"\d{2}:\d{2}:\d{2}", s)
    assert re.match(r"(ALPHA|BETA)-\d+", s)
"""
    instr = "In /app/o.txt: `run-YYYY-MM-DD`, `failed_volumes=5`, a time like 12:30:00, BETA-<n>."
    v = cover({"t.py": tests}, instr)
    assert all(x.covered for x in v.values()), {k: x for k, x in v.items() if not x.covered}
    bare = cover({"t.py": tests}, "Write the report.")
    assert not bare[r"failed_volumes=(\d+)$"].covered
    assert not bare[r"(ALPHA|BETA)-\d+"].covered


def test_ignore_case_regex_and_grep_i_are_covered_in_any_case():
    sh = "#!/bin/bash\ngrep -qi 'all tests passed' /app/log\n"
    v = cover({"test.sh": sh}, "The log must say ALL TESTS PASSED.")
    assert v["all tests passed"].covered


def test_alternatives_are_covered_by_any_member():
    tests = 'def test_a():\n    assert open("/app/s").read() in ("SUCCESS", "FAILED")\n'
    v = cover({"t.py": tests}, "Write SUCCESS if it ran.")
    assert v["SUCCESS"].covered and v["FAILED"].covered and v["FAILED"].how == "alternative"
    assert not cover({"t.py": tests}, "Write the outcome.")["FAILED"].covered


def test_task_coverage_reads_setup_steps_as_environment():
    tests = 'def test_s():\n    assert open("/app/motd").read().strip() == "welcome aboard"\n'
    task = Task(
        id="lit-setup",
        name="lit-setup",
        instruction="Fix the motd.",
        environment=EnvironmentSpec(setup=["echo 'welcome aboard' > /app/motd.orig"]),
        verifier={"test.sh": b"#!/bin/bash\n", "test_outputs.py": tests.encode()},
    )
    v = {c.literal.value: c for c in task_literal_coverage(task)}
    assert v["welcome aboard"].covered and "Dockerfile" in (v["welcome aboard"].where or "")


@pytest.mark.parametrize("value", ["ok", "Total", "a-b_c.d", "x y  z"])
def test_every_literal_gets_exactly_one_verdict(value: str):
    tests = f'def test_v():\n    assert open("/app/v").read() == {value!r}\n'
    found = asserted_literals({"t.py": tests.encode()})
    verdicts = literal_coverage(found, "nothing here", {})
    assert [v.literal for v in verdicts] == found
    assert {v.literal.value: v.covered for v in verdicts}[value] is False


def test_candidate_paths_searched_with_any_are_alternatives():
    src = """
from pathlib import Path
def test_u():
    possible = [Path("/home/a/x.unpacked"), Path("/home/a/x_out")]
    assert any(p.exists() for p in possible)
def test_all():
    for p in ["/app/r/a.txt", "/app/r/b.txt"]:
        assert Path(p).exists()
"""
    found = lits({"t.py": src})
    assert found["/home/a/x.unpacked"].group == found["/home/a/x_out"].group is not None
    assert found["/app/r/a.txt"].group is None and found["/app/r/b.txt"].group is None


def test_http_requests_are_not_dict_keys():
    src = """
import requests
def test_h():
    r = requests.get("http://localhost:5000/health")
    assert r.json().get("status") == "up"
"""
    found = lits({"t.py": src})
    assert "http://localhost:5000/health" not in found
    assert found["status"].kind == K.KEY and "up" in found


def test_numbered_names_match_a_stated_pattern():
    tests = 'def test_q():\n    d = load()\n    assert d["query_4"] == "x"\n'
    v = cover({"t.py": tests}, "Keys are `query_1`, `query_2`, etc. Values like x.")
    assert v["query_4"].covered and v["query_4"].how == "template"
    assert not cover({"t.py": tests}, "Keys are named after the queries. x")["query_4"].covered


def test_checks_passed_to_eval_helpers_are_read_too():
    sh = """#!/bin/bash
check() { if eval "$2"; then echo "PASSED $1"; else echo "FAILED $1"; fi; }
check title '[ "$(cat /app/out/t.txt)" = "BASIL REPORT" ]'
check meta 'grep -q generated_by /app/out/m.json'
check banner 'head -n1 /app/out/r.txt | grep -Eq "^# report v[0-9]+"'
"""
    found = lits({"test.sh": sh})
    assert found["BASIL REPORT"].kind == K.STRING
    assert found["generated_by"].kind == K.NAME
    assert found["^# report v[0-9]+"].kind == K.FORMAT


def test_multi_line_expected_values_in_shell_become_lines():
    sh = """#!/bin/bash
check totals '[ "$(cat /app/out/t.csv)" = '"'"'region,total
amber,1204
kelp,77'"'"' ]'
[ "$(cat /app/out/u.txt)" = "first line
second line" ] || exit 1
"""
    found = lits({"test.sh": sh})
    assert found["amber,1204"].kind == K.LINE and found["second line"].kind == K.LINE


def test_a_path_bound_to_a_name_nobody_reads_is_not_asserted():
    src = """
from pathlib import Path
def test_d():
    candidates = [Path("/home/a/one"), Path("/home/a/two")]
    original = Path("/home/a/packed")
    assert original.exists()
"""
    found = lits({"t.py": src})
    assert "/home/a/packed" in found and "/home/a/one" not in found and "/home/a/two" not in found


def test_modules_imported_inline_are_recognized():
    src = """
CHECKS = [("banner", lambda: __import__("re").match(r"^# report v\\d+", open("/app/r").read()))]
"""
    assert lits({"verify.py": src})[r"^# report v\d+"].kind == K.FORMAT


def test_a_program_output_the_verifier_names_is_its_own():
    src = """
import subprocess
from pathlib import Path

def test_builds():
    r = subprocess.run(["go", "build", "-o", "/tmp/t1bin/sub", "/app/sub.go"])
    assert r.returncode == 0 and Path("/tmp/t1bin/sub").exists()
    assert Path("/app/out/report.txt").exists()
"""
    found = lits({"test_outputs.py": src})
    assert "/tmp/t1bin/sub" not in found
    assert "/app/out/report.txt" in found and "/app/sub.go" in found


def test_a_field_filled_in_covers_a_key_with_a_computed_part():
    key = Literal("\u2026_auc", K.KEY, "t.py", 9)  # a key built from a loop variable

    def covered(instruction: str) -> bool:
        return literal_coverage([key], instruction, {}, "/app")[0].covered

    assert covered("Write /app/m.json with the keys setosa_auc and macro_avg_auc.")
    assert not covered("Write /app/m.json with one AUC per class (`auc`) and their mean.")
