"""Broken inputs (`audit.formats`, `static_checks.broken_inputs`): a data file the task names
that does not begin as the format its name claims. The public corpus ships hundreds: a
`.db` that is a model's prose about a database, an `.npy` that is the script meant to make
it (docs/audit.md, "Broken inputs")."""

from __future__ import annotations

import gzip
import io
import pickle
import sqlite3
import tarfile

import pytest

from audit.formats import format_problem
from audit.judge_exec import ExecConfig, run_exec_judge
from audit.static_checks import broken_inputs, verifier_facts
from audit.verdict import Code
from tasks.model import EnvironmentSpec
from tests.audit.forms import OFF
from tests.factories import make_task

PROSE = b"I'll create a SQLite database with the required schema and sample data. Here is\n"


def _sqlite(tmp_path) -> bytes:
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    return (tmp_path / "a.db").read_bytes()


def _tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("a.txt")
        info.size = 3
        t.addfile(info, io.BytesIO(b"abc"))
    return buf.getvalue()


def test_prose_or_a_script_in_place_of_a_binary_format_is_named_for_what_it_is():
    why = format_problem("data/customers.db", PROSE)
    assert why is not None and "a SQLite database (.db)" in why and "I'll create" in why
    assert format_problem("x.npy", b"import numpy as np\nnp.save('x.npy', ...)\n") is not None
    assert format_problem("backup.tar.gz", b"This represents a tar.gz archive.\n") is not None
    # a text round trip that turned the header's NUL into a space
    assert format_problem("global.db", b"SQLite format 3 @  \xef\xbf\xbd") is not None
    assert format_problem("s.pkl", b"import pickle\nclass Payload:\n    pass\n") is not None


def test_real_files_and_damage_past_a_valid_signature_are_not_judged(tmp_path):
    db = _sqlite(tmp_path)
    assert format_problem("a.db", db) is None
    assert format_problem("a.db", db[:200]) is None  # a truncated database: a recovery task
    assert format_problem("a.gz", gzip.compress(b"x" * 1000)[:20]) is None  # cut short
    assert format_problem("a.tar", _tar()[:600]) is None
    assert format_problem("a.pkl", pickle.dumps({"a": 1}, protocol=0)) is None  # text protocol
    assert format_problem("a.pkl", pickle.dumps({"a": 1})) is None
    assert format_problem("libc.so", b"/* GNU ld script\n */\nGROUP ( libc.so.6 )\n") is None
    assert format_problem("notes.txt", PROSE) is None  # no format claimed


def _task(instruction: str, files: dict[str, bytes], solve: str = "true\n", name: str = "b"):
    env = EnvironmentSpec(files=files, workdir="/app")
    return make_task(name, environment=env, solve=solve).model_copy(
        update={"instruction": instruction}
    )


def test_an_input_named_one_by_one_is_judged_and_stand_ins_in_a_named_directory_are_not():
    named = _task("Report the row count of `/app/shop.db` in /app/n.txt.", {"app/shop.db": PROSE})
    (f,) = broken_inputs(named, verifier_facts(named))
    assert f.code == Code.BROKEN_INPUT and f.item == "/app/shop.db"
    photos = _task("Sort the photos in `/app/inbox/` by the date in their names.",
                   {"app/inbox/IMG_20230412.jpg": b"file 00: IMG_20230412.jpg\n"})  # fmt: skip
    assert broken_inputs(photos, verifier_facts(photos)) == []
    build = b"FROM debian\nCOPY shop.db /app/\nRUN sqlite3 x < /app/shop.db && mv x /app/shop.db\n"
    built = _task(
        "Report the row count of `/app/shop.db`.",
        {"app/shop.db": b"CREATE TABLE t (x);\n", "Dockerfile": build},
    )
    assert broken_inputs(built, verifier_facts(built)) == []


@pytest.mark.sandbox
def test_a_broken_input_the_traced_solution_never_opens_is_no_defect():
    files = {"app/report.pdf": b"I cannot generate a binary PDF file, but here is a summary\n"}
    moves = _task("Move `/app/report.pdf` into /app/done/.", files,
                  "mkdir -p /app/done && mv /app/report.pdf /app/done/\n", "moves")  # fmt: skip
    reads = _task("Count the pages of `/app/report.pdf` into /app/done.", files,
                  "wc -c < /app/report.pdf > /app/done\n", "reads")  # fmt: skip
    cfg = ExecConfig(**OFF, workers=1)
    kept = {t.id: run_exec_judge(t, cfg).codes() for t in (moves, reads)}
    assert Code.BROKEN_INPUT in {f.code for f in broken_inputs(moves, verifier_facts(moves))}
    assert Code.BROKEN_INPUT not in kept[moves.id]
    assert Code.BROKEN_INPUT in kept[reads.id]
