"""Requirements on a file's form (`tasks.literals.conventions`): mode, owner, order,
encoding. The attack: a verifier demands them in forms the plain literal reader turns into
numbers or misses (`0o640` folds to 416, which the solution never spells, so it read as a
computed value), and nothing states them; each must be a hidden requirement of its own kind,
and each stated form must cover it."""

from __future__ import annotations

import pytest

from audit.planted import FORM_HIDDEN, Defect, generate
from audit.static_checks import static_findings
from audit.verdict import Code
from tasks.literals import LiteralKind, asserted_literals, literal_coverage

PY = b"""import os, pwd, stat
def test_mode():
    assert stat.S_IMODE(os.stat("/app/out/x.txt").st_mode) == 0o640
def test_mode_string():
    mode = oct(os.stat("/app/out/y.sh").st_mode)
    assert mode[-3:] == "750"
def test_owner():
    assert pwd.getpwuid(os.stat("/app/out/x.txt").st_uid).pw_name == "svc"
    assert os.stat("/app/out/x.txt").st_gid == 1001
def test_order():
    lines = open("/app/out/x.txt").read().splitlines()
    assert lines == sorted(lines, reverse=True)
def test_encoding():
    text = open("/app/out/x.txt", encoding="latin-1").read()
    assert text.endswith("\\r\\n")
    assert "\\r" not in open("/app/out/y.sh").read()
"""
SH = b"""#!/bin/bash
[ "$(stat -c %a /app/out/z)" = 600 ] || exit 1
[ "$(stat -c '%U:%G' /app/out/z)" = "svc:staff" ] || exit 1
check perm 'find /app/out/w -perm 0751 | grep -q .'
LC_ALL=C sort -c /app/out/z
iconv -f UTF-16 /app/out/u > /dev/null
"""


def _forms(files):
    return {(lit.kind, lit.value) for lit in asserted_literals(files)
            if lit.kind in (LiteralKind.MODE, LiteralKind.OWNER, LiteralKind.ORDER,
                            LiteralKind.ENCODING)}  # fmt: skip


def test_python_forms_are_read_with_their_kinds():
    got = _forms({"test_outputs.py": PY})
    assert got == {
        (LiteralKind.MODE, "640"),
        (LiteralKind.MODE, "750"),
        (LiteralKind.OWNER, "svc"),
        (LiteralKind.OWNER, "1001"),
        (LiteralKind.ORDER, "descending"),
        (LiteralKind.ENCODING, "iso8859-1"),
        (LiteralKind.ENCODING, "crlf"),
    }
    # the folded octal is a mode, not a number to compute
    numbers = {
        lit.value for lit in asserted_literals({"t.py": PY}) if lit.kind == LiteralKind.NUMBER
    }
    assert "416" not in numbers and "1001" not in numbers


def test_shell_forms_are_read_with_their_kinds():
    assert _forms({"test.sh": SH}) == {
        (LiteralKind.MODE, "600"),
        (LiteralKind.OWNER, "svc:staff"),
        (LiteralKind.MODE, "751"),
        (LiteralKind.ORDER, "ascending"),
        (LiteralKind.ENCODING, "utf-16"),
    }


@pytest.mark.parametrize(
    "statement",
    ["mode 640", "permissions 0640", "mode 0o640", "-rw-r-----", "u=rw,g=r,o= please"],
)
def test_every_form_of_a_mode_states_it(statement: str):
    lits = [lit for lit in asserted_literals({"t.py": PY}) if lit.value == "640"]
    (v,) = literal_coverage(lits, f"Make x.txt {statement}.", {}, "/app")
    assert v.covered, statement


def test_a_mode_in_data_is_not_a_statement_but_chmod_in_a_given_script_is():
    lits = [lit for lit in asserted_literals({"t.py": PY}) if lit.value == "640"]
    data = {"app/in.log": b"alpha 640 12\nbeta 17 640\n"}
    assert not literal_coverage(lits, "Process the log.", data, "/app")[0].covered
    script = {"app/setup.sh": b"#!/bin/sh\nchmod 640 /app/out/x.txt\n"}
    assert literal_coverage(lits, "Process the log.", script, "/app")[0].covered


def test_order_and_encoding_words_state_them():
    lits = {lit.value: lit for lit in asserted_literals({"t.py": PY})}
    said = "Write x.txt in descending order, ISO-8859-1 encoded, with CRLF line endings."
    for key in ("descending", "iso8859-1", "crlf"):
        assert literal_coverage([lits[key]], said, {}, "/app")[0].covered, key
        assert not literal_coverage([lits[key]], "Write x.txt.", {}, "/app")[0].covered, key
    # a verifier reading a given Latin-1 input in its encoding demands nothing of the agent
    given = {"app/in.txt": "café\n".encode("latin-1")}
    assert literal_coverage([lits["iso8859-1"]], "Write x.txt.", given, "/app")[0].covered


@pytest.mark.parametrize("variant", FORM_HIDDEN)
@pytest.mark.parametrize("seed", [3, 14, 25, 36, 47, 58])
def test_planted_form_requirements_are_hidden(variant: str, seed: int):
    task = generate(seed, Defect.HIDDEN, variant).task
    hidden = [f for f in static_findings(task).findings if f.code == Code.HIDDEN_REQUIREMENT]
    assert hidden, (variant, seed)
    clean = generate(seed, None).task
    assert not [f for f in static_findings(clean).findings if f.code == Code.HIDDEN_REQUIREMENT]


OWNER_PY = b"""import os
def test_owner_pair():
    st = os.stat("/app/out/x.txt")
    assert (os.stat("/app/out/x.txt").st_uid, os.stat("/app/out/x.txt").st_gid) == (34, 1500)
"""
OWNER_SH = b"""#!/bin/bash
check owner 'find /app/out/x.txt -user www-data | grep -q .'
find /app/out/y.txt -gid 33 | grep -q . || exit 1
"""


def test_owner_pairs_and_find_predicates_are_owners():
    # a tuple of (uid, gid) compared at once, and find's -user/-gid: each element an owner,
    # none a number to compute
    assert _forms({"test_outputs.py": OWNER_PY}) == {
        (LiteralKind.OWNER, "34"),
        (LiteralKind.OWNER, "1500"),
    }
    numbers = {
        lit.value for lit in asserted_literals({"t.py": OWNER_PY}) if lit.kind == LiteralKind.NUMBER
    }
    assert not numbers & {"34", "1500"}
    assert _forms({"test.sh": OWNER_SH}) == {
        (LiteralKind.OWNER, "www-data"),
        (LiteralKind.OWNER, "33"),
    }


def test_an_owner_id_is_stated_only_as_an_owner():
    # `1.` of a numbered list is no statement of uid 1; `owned by uid 1` is
    lits = [lit for lit in asserted_literals({"t.py": OWNER_PY}) if lit.value == "34"]
    listed = "Do the following.\n\n1. Write x.txt.\n34. Keep the input.\n"
    assert not literal_coverage(lits, listed, {}, "/app")[0].covered
    assert literal_coverage(lits, "Make x.txt owned by uid 34.", {}, "/app")[0].covered
    assert literal_coverage(lits, "x.txt: owner 34, group 1500.", {}, "/app")[0].covered
