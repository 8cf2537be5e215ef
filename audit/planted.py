# ruff: noqa: E501 - the templates of generated task text and code read better unwrapped
"""Planted-defect tasks with randomized surface forms: material the audit was not written
against, for measuring what it catches (recall) and what it wrongly rejects.

`generate(seed)` draws one task: a table of records serialized as a space-separated log, a
CSV with a header, or JSON lines (random field names, words, sizes, paths); one to three
outputs computed from it (a count, per-key totals with a header, distinct labels, the label
of the largest value), described in randomly phrased instructions; a verifier in one of three
styles (Python test functions run by the stdlib runner, a shell script printing a test
summary, a script writing JUnit XML; with `real_pytest`, a stock Harbor test.sh running
pytest itself) that either hard-codes the expected values or recomputes them from the input;
and a reference solution from one line to a long script.

Then, for a defect class, one of its variants (at least five each, see `VARIANTS`) is planted
with random literals (kinds and lengths); `defect=None` gives the clean twin. The generator
knows nothing of how the audit decides; the classes follow their definitions in issue 13 and
docs/audit.md.
"""

from __future__ import annotations

import base64
import json
import random
import shlex
import textwrap
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from tasks.model import Category, EnvironmentSpec, Limits, Task

CHECKRUNNER = (Path(__file__).resolve().parents[1] / "tasks" / "checkrunner.py").read_bytes()


class Defect(StrEnum):
    HIDDEN = "hidden_requirement"
    LEAKAGE = "test_leakage"
    SHORTCUT = "solution_shortcut"
    WEAK = "weak_verifier"
    FLAKY = "flaky_verifier"


VARIANTS: dict[Defect, tuple[str, ...]] = {
    Defect.HIDDEN: ("extra-file", "case-mismatch", "json-key", "line-format", "status-line",
                    "subdirectory", "file-mode", "ownership", "ordering", "encoding"),
    Defect.LEAKAGE: ("test-copy", "expected-file", "answer-file", "labelled-note",
                     "asserts-in-instruction", "bare-value-file", "archive-member",
                     "git-history", "encoded-note", "serialized-cache"),
    Defect.SHORTCUT: ("echo-number", "heredoc-output", "partial", "printf-values",
                      "python-literal", "word-answer", "answer-cache"),
    Defect.WEAK: ("exists-only", "non-empty", "first-line", "line-count", "substring",
                  "swallowed", "loose-tolerance"),
    Defect.FLAKY: ("coin", "python-random", "date-compare", "timezone", "locale-sort",
                   "listdir-order", "mtime-age"),
}  # fmt: skip

STYLES = ("pytest", "shell", "junit")  # drawn; "real-pytest" is chosen by the caller
SOLUTION_FORMS = ("oneliner", "steps", "python", "long")
FORMATS = ("log", "csv", "jsonl")

_WORDS = (
    "amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lumen maple nectar "
    "onyx pepper quartz raven saffron tundra umber violet willow xenon yarrow zephyr acorn "
    "bramble cobalt dune falcon glacier hazel iris jasper kestrel lotus meadow nimbus orchid "
    "pebble quill ridge sable thistle urchin vale wren"
).split()
_KEY_FIELDS = ("region", "team", "level", "kind", "queue", "zone", "site", "channel")
_LABEL_FIELDS = ("item", "user", "host", "task", "sku", "tag", "node", "service")
_VALUE_FIELDS = ("amount", "bytes", "qty", "cost", "latency", "score", "hits", "size")
_DIRS = ("out", "report", "results", "summary", "build/stats", "output", "data/out")


@dataclass
class Table:
    key: str
    label: str
    value: str
    rows: list[tuple[str, str, int]]
    fmt: str
    path: str  # absolute, under /app

    def text(self) -> str:
        if self.fmt == "log":
            return "".join(f"{k} {lab} {v}\n" for k, lab, v in self.rows)
        if self.fmt == "csv":
            head = f"{self.key},{self.label},{self.value}\n"
            return head + "".join(f"{k},{lab},{v}\n" for k, lab, v in self.rows)
        return "".join(
            json.dumps({self.key: k, self.label: lab, self.value: v}) + "\n"
            for k, lab, v in self.rows
        )

    def describe(self) -> str:
        if self.fmt == "log":
            return (
                f"`{self.path}` holds one record per line: the {self.key}, the {self.label} "
                f"and the {self.value} (an integer), separated by single spaces."
            )
        if self.fmt == "csv":
            return (
                f"`{self.path}` is a CSV file with the header `{self.key},{self.label},"
                f"{self.value}`; `{self.value}` is an integer."
            )
        return (
            f"`{self.path}` holds one JSON object per line with the keys `{self.key}`, "
            f"`{self.label}` and `{self.value}` (an integer)."
        )


@dataclass
class Output:
    """One output file: what it holds, how to compute it (Python over rows, awk over the
    file), and how the instruction describes it."""

    kind: str  # count | totals | distinct | argmax
    path: str
    arg: str  # the key value it is about (count, distinct)
    header: str  # totals only
    content: str  # the exact expected file content
    sentence: str


@dataclass
class Planted:
    task: Task
    defect: Defect | None
    variant: str
    style: str
    solution_form: str
    fmt: str
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.defect.value if self.defect else 'clean'}/{self.variant}"


# ---- data and outputs --------------------------------------------------------------------


def _table(rng: random.Random) -> Table:
    key, label, value = (
        rng.choice(_KEY_FIELDS),
        rng.choice(_LABEL_FIELDS),
        rng.choice(_VALUE_FIELDS),
    )
    keys = rng.sample(_WORDS, rng.randint(3, 5))
    labels = rng.sample([w for w in _WORDS if w not in keys], rng.randint(5, 9))
    n = rng.randint(20, 120)
    rows = [(rng.choice(keys), rng.choice(labels), rng.randint(1, 999)) for _ in range(n)]
    top = max(v for _, _, v in rows)
    rows.append((rng.choice(keys), rng.choice(labels), top + rng.randint(1, 50)))  # unique max
    rng.shuffle(rows)
    fmt = rng.choice(FORMATS)
    ext = {"log": rng.choice([".log", ".txt", ".dat"]), "csv": ".csv", "jsonl": ".jsonl"}[fmt]
    path = f"/app/{rng.choice(['data', 'input', 'in', 'raw'])}/{rng.choice(_WORDS)}{ext}"
    return Table(key, label, value, rows, fmt, path)


def _outputs(rng: random.Random, t: Table) -> list[Output]:
    d = f"/app/{rng.choice(_DIRS)}"
    keys = sorted({k for k, _, _ in t.rows})
    kinds = rng.sample(["count", "totals", "distinct", "argmax"], rng.randint(1, 3))
    out = []
    for kind in kinds:
        name = f"{rng.choice(_WORDS)}_{kind}{rng.choice(['.txt', '.out', '.csv' if kind == 'totals' else '.txt'])}"
        path = f"{d}/{name}"
        k = rng.choice(keys)
        if kind == "count":
            n = sum(1 for r in t.rows if r[0] == k)
            content = f"{n}\n"
            sentence = rng.choice([
                f"Write the number of records whose {t.key} is `{k}` to `{path}` (only the number, then a newline).",
                f"`{path}` must contain how many records have {t.key} `{k}`, as a bare integer on one line.",
            ])  # fmt: skip
        elif kind == "totals":
            header = f"{t.key},total"
            sums: dict[str, int] = {}
            for kk, _, v in t.rows:
                sums[kk] = sums.get(kk, 0) + v
            content = header + "\n" + "".join(f"{kk},{sums[kk]}\n" for kk in sorted(sums))
            sentence = rng.choice([
                f"Write the total {t.value} per {t.key} to `{path}`: a CSV with the header `{header}`, one line per {t.key}, sorted by {t.key}.",
                f"Create `{path}`, a CSV whose first line is `{header}` followed by one `{t.key},total` line per {t.key} (sum of {t.value}), ordered by {t.key}.",
            ])  # fmt: skip
            out.append(Output(kind, path, "", header, content, sentence))
            continue
        elif kind == "distinct":
            labels = sorted({lab for kk, lab, _ in t.rows if kk == k})
            content = "".join(f"{lab}\n" for lab in labels)
            sentence = rng.choice([
                f"List every distinct {t.label} that appears with {t.key} `{k}`, sorted, one per line, in `{path}`.",
                f"`{path}`: the sorted, de-duplicated {t.label} values of the records whose {t.key} is `{k}`, one per line.",
            ])  # fmt: skip
        else:
            top = max(t.rows, key=lambda r: r[2])
            content = f"{top[1]}\n"
            k = ""
            sentence = rng.choice([
                f"Write the {t.label} of the record with the largest {t.value} to `{path}` (one word).",
                f"`{path}` must name the {t.label} whose record has the highest {t.value}.",
            ])  # fmt: skip
        out.append(Output(kind, path, k, "", content, sentence))
    return out


# ---- computing outputs: shell and Python ---------------------------------------------------


def _awk_src(t: Table) -> tuple[str, str]:
    """(awk options, record-field prefix) reading the input: fields $1 key, $2 label, $3 value."""
    if t.fmt == "log":
        return "", ""
    if t.fmt == "csv":
        return "-F, ", "NR>1 && "
    return "", ""


def _shell_cmd(t: Table, o: Output) -> str:
    """A shell pipeline printing the output's content (jsonl goes through python3)."""
    f = shlex.quote(t.path)
    if t.fmt == "jsonl":
        return f"python3 -c {shlex.quote(_py_expr(t, o))} {f}"
    opt, pre = _awk_src(t)
    if o.kind == "count":
        return f"awk {opt}'{pre}$1==\"{o.arg}\"{{n++}} END{{print n+0}}' {f}"
    if o.kind == "totals":
        return (
            f"{{ echo '{o.header}'; awk {opt}'{pre}1{{s[$1]+=$3}} END{{for(k in s) print k\",\"s[k]}}' "
            f"{f} | LC_ALL=C sort; }}"
        )
    if o.kind == "distinct":
        return f"awk {opt}'{pre}$1==\"{o.arg}\"{{print $2}}' {f} | LC_ALL=C sort -u"
    return f"awk {opt}'{pre}$3>m{{m=$3; l=$2}} END{{print l}}' {f}"


def _py_rows(t: Table) -> str:
    if t.fmt == "log":
        return "[(a, b, int(c)) for a, b, c in (ln.split() for ln in open(p) if ln.strip())]"
    if t.fmt == "csv":
        return "[(a, b, int(c)) for a, b, c in (ln.strip().split(',') for ln in list(open(p))[1:] if ln.strip())]"
    return (
        f"[(d[{t.key!r}], d[{t.label!r}], int(d[{t.value!r}])) "
        "for d in (__import__('json').loads(ln) for ln in open(p) if ln.strip())]"
    )


def _py_expr(t: Table, o: Output) -> str:
    """A python3 -c program printing the output's content for the input path argv[1]."""
    rows = _py_rows(t)
    body = f"import sys; p = sys.argv[1]; rows = {rows}; "
    if o.kind == "count":
        return body + f"print(sum(1 for r in rows if r[0] == {o.arg!r}))"
    if o.kind == "totals":
        return body + (
            "s = {}\nfor r in rows: s[r[0]] = s.get(r[0], 0) + r[2]\n"
            f"print({o.header!r}); [print(f'{{k}},{{s[k]}}') for k in sorted(s)]"
        )
    if o.kind == "distinct":
        return body + f"[print(x) for x in sorted({{r[1] for r in rows if r[0] == {o.arg!r}}})]"
    return body + "print(max(rows, key=lambda r: r[2])[1])"


def _py_function(t: Table, o: Output, name: str) -> str:
    """A Python function `name()` returning the expected content, recomputed from the input."""
    rows = _py_rows(t).replace("open(p)", f"open({t.path!r})")
    if o.kind == "count":
        expr = f"str(sum(1 for r in rows if r[0] == {o.arg!r})) + '\\n'"
    elif o.kind == "totals":
        expr = f"{o.header!r} + '\\n' + ''.join(f'{{k}},{{v}}\\n' for k, v in sorted(_sums(rows).items()))"
    elif o.kind == "distinct":
        expr = f"''.join(x + '\\n' for x in sorted({{r[1] for r in rows if r[0] == {o.arg!r}}}))"
    else:
        expr = "max(rows, key=lambda r: r[2])[1] + '\\n'"
    return f"def {name}():\n    rows = {rows}\n    return {expr}\n"


_SUMS = "def _sums(rows):\n    s = {}\n    for r in rows:\n        s[r[0]] = s.get(r[0], 0) + r[2]\n    return s\n"


# ---- solutions -----------------------------------------------------------------------------


def _solution(rng: random.Random, t: Table, outs: list[Output], form: str, extra: list[str]) -> str:
    """solve.sh computing every output in the given form; `extra` shell lines run last."""
    dirs = sorted({o.path.rsplit("/", 1)[0] for o in outs})
    mk = "mkdir -p " + " ".join(dirs)
    cmds = [f"{_shell_cmd(t, o)} > {o.path}" for o in outs]
    if form == "oneliner" and not extra:
        return "#!/bin/bash\n" + " && ".join([mk, *cmds]) + "\n"
    if form in ("oneliner", "steps"):
        return "#!/bin/bash\nset -e\n" + "\n".join([mk, *cmds, *extra]) + "\n"
    if form == "python":
        lines = ["import json, os", f"p = {t.path!r}", f"rows = {_py_rows(t)}"]
        for d in dirs:
            lines.append(f"os.makedirs({d!r}, exist_ok=True)")
        for o in outs:
            fn = _py_function(t, o, "expected").replace(f"open({t.path!r})", "open(p)")
            lines += [_SUMS.rstrip(), fn.rstrip(), f"open({o.path!r}, 'w').write(expected())"]
        body = "\n".join(lines)
        return "#!/bin/bash\nset -e\npython3 - <<'PY'\n" + body + "\nPY\n" + "\n".join(extra) + "\n"
    # long: functions, logging, a scratch dir, a final self-check
    steps = [
        "#!/bin/bash",
        "set -euo pipefail",
        f"# reference solution ({rng.choice(['verbose', 'step by step', 'defensive'])})",
        'log() { echo "[solve] $*" >&2; }',
        "scratch=$(mktemp -d)",
        "trap 'rm -rf \"$scratch\"' EXIT",
        f"log reading {t.path}",
        f"test -s {t.path}",
        f'cp {t.path} "$scratch/input"',
        mk,
    ]
    for i, (o, c) in enumerate(zip(outs, cmds, strict=True)):
        steps += [f"log output {i + 1}: {o.path}", f"{c}.tmp", f"mv {o.path}.tmp {o.path}"]
    steps += extra
    steps += [f"test -f {o.path}" for o in outs] + ["log done"]
    return "\n".join(steps) + "\n"


# ---- verifiers -----------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    py: str  # a Python boolean expression (helpers: read(path), exists(path))
    sh: str  # a shell condition


def _checks(t: Table, outs: list[Output], hardcode: bool) -> tuple[list[Check], str]:
    """One check per output (its exact content), plus helper definitions for Python styles."""
    helpers = [_SUMS]
    checks = []
    for i, o in enumerate(outs):
        fn = f"expected_{i}"
        if hardcode:
            py = f"read({o.path!r}) == {o.content!r}"
            sh = f'[ "$(cat {o.path})" = {shlex.quote(o.content.rstrip(chr(10)))} ]'
        else:
            helpers.append(_py_function(t, o, fn))
            py = f"read({o.path!r}) == {fn}()"
            sh = f'[ "$(cat {o.path})" = "$({_shell_cmd(t, o)})" ]'
        checks.append(Check(f"{o.kind}_{i}", py, sh))
    checks.append(Check("input_kept", f"exists({t.path!r})", f"[ -f {t.path} ]"))
    return checks, "\n".join(helpers)


PY_PRELUDE = """import os


def read(path):
    with open(path) as f:
        return f.read()


def exists(path):
    return os.path.exists(path)
"""


# The test.sh of a stock Harbor task (terminal-bench-env and Harbor's own templates).
HARBOR_TEST_SH = """#!/bin/bash

# Run tests (test dependencies already installed in Dockerfile)
pytest /tests/test_outputs.py -rA

_EXIT_CODE=$?
if [ $_EXIT_CODE -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit $_EXIT_CODE
"""


def _verifier(
    style: str, checks: list[Check], helpers: str, extra_py: str = ""
) -> dict[str, bytes]:
    if style == "pytest":
        body = PY_PRELUDE + "\n" + helpers + "\n" + extra_py + "\n"
        for c in checks:
            body += f"\ndef test_{c.name}():\n    assert {c.py}, {c.name!r}\n"
        sh = "#!/bin/bash\npython3 /tests/run_checks.py /tests/test_outputs.py --out /logs/verifier\n"
        return {
            "test.sh": sh.encode(),
            "run_checks.py": CHECKRUNNER,
            "test_outputs.py": body.encode(),
        }
    if style == "real-pytest":  # stock Harbor: test.sh runs pytest itself, then reward.txt
        body = PY_PRELUDE + "\n" + helpers + "\n" + extra_py + "\n"
        for c in checks:
            body += f"\ndef test_{c.name}():\n    assert {c.py}, {c.name!r}\n"
        return {"test.sh": HARBOR_TEST_SH.encode(), "test_outputs.py": body.encode()}
    if style == "junit":
        body = PY_PRELUDE + "\n" + helpers + "\n" + extra_py + "\nCHECKS = [\n"
        body += "".join(f"    ({c.name!r}, lambda: {c.py}),\n" for c in checks) + "]\n"
        body += textwrap.dedent("""
            def main():
                from xml.sax.saxutils import quoteattr
                cases = []
                for name, fn in CHECKS:
                    try:
                        ok = bool(fn())
                    except Exception:
                        ok = False
                    fail = "" if ok else '<failure message="check failed"/>'
                    cases.append(f"<testcase classname=\\"verify\\" name={quoteattr(name)}>{fail}</testcase>")
                os.makedirs("/logs/verifier", exist_ok=True)
                with open("/logs/verifier/junit.xml", "w") as f:
                    f.write(f'<testsuite name="verify" tests="{len(cases)}">' + "".join(cases) + "</testsuite>")


            main()
            """)
        sh = "#!/bin/bash\npython3 /tests/verify.py\n"
        return {"test.sh": sh.encode(), "verify.py": body.encode()}
    lines = [
        "#!/bin/bash",
        "results=()",
        'check() { local name=$1; shift; if eval "$1" >/dev/null 2>&1; then results+=("PASSED checks.sh::$name"); else results+=("FAILED checks.sh::$name"); fi; }',
    ]
    lines += [f"check {c.name} {shlex.quote(c.sh)}" for c in checks]
    lines += [
        'echo "==================== short test summary info ===================="',
        'printf "%s\\n" "${results[@]}"',
    ]
    return {"test.sh": ("\n".join(lines) + "\n").encode()}


# ---- the task --------------------------------------------------------------------------------


@dataclass
class Draft:
    """A task being assembled: every part may be changed by a defect before `build`."""

    rng: random.Random
    table: Table
    outs: list[Output]
    style: str
    form: str
    hardcode: bool
    intro: str
    extra_sentences: list[str] = field(default_factory=list)
    extra_solution: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    helpers: str = ""
    extra_py: str = ""
    env: dict[str, bytes] = field(default_factory=dict)
    solution: str | None = None
    notes: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)

    def instruction(self) -> str:
        parts = [self.intro, self.table.describe()]
        items = [o.sentence for o in self.outs] + self.extra_sentences
        if len(items) == 1:
            parts.append(items[0])
        else:
            parts.append("\n".join(f"{i + 1}. {s}" for i, s in enumerate(items)))
        return "\n\n".join(parts) + "\n"


def _draft(seed: int) -> Draft:
    rng = random.Random(seed)
    t = _table(rng)
    outs = _outputs(rng, t)
    style = rng.choice(STYLES)
    form = rng.choice(SOLUTION_FORMS)
    hardcode = rng.random() < 0.5
    intro = rng.choice([
        f"A small {t.key} report is needed from the records in `{t.path}`.",
        f"Summarize the {t.value} records kept under `{t.path.rsplit('/', 1)[0]}`.",
        "Produce the summary files described below from the input data.",
    ])  # fmt: skip
    d = Draft(rng, t, outs, style, form, hardcode, intro)
    d.checks, d.helpers = _checks(t, outs, hardcode)
    d.env = {f"app/{t.path.removeprefix('/app/')}": t.text().encode()}
    return d


def _build(d: Draft, task_id: str) -> Task:
    solution = d.solution or _solution(d.rng, d.table, d.outs, d.form, d.extra_solution)
    return Task(
        id=task_id,
        name=task_id,
        instruction=d.instruction(),
        category=Category.DATA_PROCESSING,
        limits=Limits(
            agent_timeout_s=60,
            verifier_timeout_s=60,
            memory_mb=512,
            pids=128,
            disk_mb=64,
            output_bytes=200_000,
        ),  # fmt: skip
        environment=EnvironmentSpec(
            requires=["python3", *(["python3-pytest"] if d.style == "real-pytest" else [])],
            files=dict(d.env),
            setup=list(d.setup),
        ),
        solution={"solve.sh": solution.encode()},
        verifier=_verifier(d.style, d.checks, d.helpers, d.extra_py),
    )


def _word(rng: random.Random, short: bool | None = None) -> str:
    """A literal of random kind and length: a short token, a word, or a phrase."""
    short = rng.random() < 0.4 if short is None else short
    if short:
        return rng.choice(["ok", "OK", "v2", "ack", "fin", "end", "go"])
    n = rng.randint(1, 5)
    words = rng.sample(_WORDS, n)
    sep = rng.choice([" ", "-", "_", ": "])
    return sep.join(words) if n > 1 else words[0] + rng.choice(["", "ed", "-ready"])


# ---- defects ---------------------------------------------------------------------------------


def _plant_hidden(d: Draft, variant: str) -> None:
    rng, o = d.rng, d.outs[0]
    if variant == "extra-file":
        path = (
            f"{o.path.rsplit('/', 1)[0]}/{rng.choice(_WORDS)}.{rng.choice(['txt', 'flag', 'meta'])}"
        )
        lit = _word(rng)
        d.extra_solution.append(f"printf '%s\\n' {shlex.quote(lit)} > {path}")
        d.checks.append(Check("marker", f"read({path!r}).strip() == {lit!r}",
                              f'[ "$(cat {path})" = {shlex.quote(lit)} ]'))  # fmt: skip
    elif variant == "case-mismatch":
        # the instruction states the first line in one case; the verifier wants another
        said = rng.choice(_WORDS) + rng.choice([" report", " summary", ""])
        wanted = rng.choice([said.upper(), said.title(), said.capitalize()])
        if wanted == said:
            wanted = said.upper()
        d.extra_sentences.append(f"Also write `{said}` as the only line of `{o.path}.title`.")
        d.extra_solution.append(f"echo {shlex.quote(wanted)} > {o.path}.title")
        d.checks.append(Check("title", f"read({o.path + '.title'!r}).strip() == {wanted!r}",
                              f'[ "$(cat {o.path}.title)" = {shlex.quote(wanted)} ]'))  # fmt: skip
    elif variant == "json-key":
        key = rng.choice(["generated_by", "schema", "source_file", "producer", "kind"])
        lit = _word(rng, short=False)
        path = f"{o.path.rsplit('/', 1)[0]}/meta.json"
        d.extra_sentences.append(f"Write a JSON object describing the run to `{path}`.")
        d.extra_solution.append(f"echo {shlex.quote(json.dumps({key: lit}))} > {path}")
        d.checks.append(Check("meta", f"__import__('json').load(open({path!r})).get({key!r}) == {lit!r}",
                              f"grep -q {shlex.quote(f'{lit}')} {path} && grep -q {key} {path}"))  # fmt: skip
    elif variant == "line-format":
        tag = rng.choice(["#", "//", ">>", "=="]) + " " + _word(rng, short=False)
        d.extra_solution.append(f"sed -i '1i {tag}' {o.path}")
        pattern = "^" + "".join("\\" + c if c in "#/>=.+*?()[]{}|^$" else c for c in tag)
        # the banner line changes the file: the content checks skip it (not the banner's)
        d.checks = [_skip_first_line(c, o) for c in d.checks]
        d.checks.append(Check("banner", f"__import__('re').match({pattern!r}, read({o.path!r}))",
                              f"head -n1 {o.path} | grep -Eq {shlex.quote(pattern)}"))  # fmt: skip
    elif variant == "status-line":
        lit = _word(rng)
        path = o.path
        d.extra_solution.append(f"echo {shlex.quote(lit)} >> {path}")
        d.checks = [_skip_last_line(c, o) for c in d.checks]
        d.checks.append(Check("status", f"read({path!r}).splitlines()[-1] == {lit!r}",
                              f'[ "$(tail -n1 {path})" = {shlex.quote(lit)} ]'))  # fmt: skip
    elif variant in FORM_HIDDEN:
        _plant_form(d, variant)
    else:  # subdirectory: the verifier reads the output from a directory nobody mentions
        sub = rng.choice(["final", "latest", "v1", "published"])
        new = f"{o.path.rsplit('/', 1)[0]}/{sub}/{o.path.rsplit('/', 1)[1]}"
        d.extra_solution.append(f"mkdir -p {new.rsplit('/', 1)[0]} && cp {o.path} {new}")
        d.checks = [Check(c.name, c.py.replace(repr(o.path), repr(new)),
                          c.sh.replace(o.path, new)) for c in d.checks]  # fmt: skip


FORM_HIDDEN = ("file-mode", "ownership", "ordering", "encoding")

# Accounts of the Debian base image (user, uid, group, gid) and bare ids with no account; a
# chown to an id needs no account. Names that are ordinary words of an instruction (`list`,
# `news`) are left out: an instruction using the word would state them by accident.
_ACCOUNTS = (("daemon", 1, "daemon", 1), ("www-data", 33, "www-data", 33),
             ("backup", 34, "backup", 34), ("nobody", 65534, "nogroup", 65534),
             ("proxy", 13, "proxy", 13), ("mail", 8, "mail", 8),
             ("1500", 1500, "1500", 1500), ("2001", 2001, "2001", 2001),
             ("3000", 3000, "3000", 3000))  # fmt: skip


def _owner_plant(rng: random.Random, path: str) -> tuple[str, Check]:
    """A solve.sh line giving `path` an owner and a check of it, each in one of several
    surface forms: the user, the group or both, by name or by id (`chown`, `chgrp`,
    `os.chown`; `st_uid`, `pwd.getpwuid`, `Path.owner()`, `stat -c %U`, `find -user`)."""
    user, uid, group, gid = rng.choice(_ACCOUNTS)
    numeric = user.isdigit()
    part = rng.choice(["user", "group", "both"])
    by_id = numeric or rng.random() < 0.4
    u, g = (str(uid), str(gid)) if by_id else (user, group)
    q = shlex.quote(path)
    if part == "user":
        step = rng.choice(
            [f"chown {u} {q}", f"python3 -c \"import os; os.chown('{path}', {uid}, -1)\""]
        )
    elif part == "group":
        step = rng.choice([f"chgrp {g} {q}", f"chown :{g} {q}"])
    else:
        step = rng.choice([f"chown {u}:{g} {q}"] + ([] if by_id else [f"chown {u}.{g} {q}"]))
    st = f"os.stat({path!r})"
    if part == "user":
        py = rng.choice([f"{st}.st_uid == {uid}"] if numeric else [
            f"{st}.st_uid == {uid}",
            f"__import__('pwd').getpwuid({st}.st_uid).pw_name == {user!r}",
            f"__import__('pathlib').Path({path!r}).owner() == {user!r}",
        ])  # fmt: skip
        sh = rng.choice([f'[ "$(stat -c %u {q})" = {uid} ]'] + ([] if numeric else [
            f'[ "$(stat -c %U {q})" = {shlex.quote(user)} ]',
            f"find {q} -user {user} | grep -q .",
        ]))  # fmt: skip
    elif part == "group":
        py = rng.choice([f"{st}.st_gid == {gid}"] if numeric else [
            f"{st}.st_gid == {gid}",
            f"__import__('grp').getgrgid({st}.st_gid).gr_name == {group!r}",
            f"__import__('pathlib').Path({path!r}).group() == {group!r}",
        ])  # fmt: skip
        sh = rng.choice([f"[ $(stat --format=%g {q}) -eq {gid} ]"] + ([] if numeric else [
            f'[ "$(stat -c %G {q})" = {shlex.quote(group)} ]',
            f"find {q} -group {group} | grep -q .",
        ]))  # fmt: skip
    else:
        py = rng.choice([
            f"({st}.st_uid, {st}.st_gid) == ({uid}, {gid})",
            f"{st}.st_uid == {uid} and {st}.st_gid == {gid}",
        ])  # fmt: skip
        sh = rng.choice([
            f'[ "$(stat -c %u:%g {q})" = "{uid}:{gid}" ]',
        ] + ([] if numeric else [f'[ "$(stat -c %U:%G {q})" = "{user}:{group}" ]']))  # fmt: skip
    return step, Check("owner", py, sh)


def _mode_check(rng: random.Random, path: str, mode: int) -> Check:
    """A check of `path`'s mode in one of several surface forms (octal folded to a number,
    a string of octal digits, the symbolic form)."""
    sym = "-" + "".join(
        ("r" if mode >> (6 - 3 * i) & 4 else "-") + ("w" if mode >> (6 - 3 * i) & 2 else "-")
        + ("x" if mode >> (6 - 3 * i) & 1 else "-") for i in range(3)
    )  # fmt: skip
    st = f"os.stat({path!r}).st_mode"
    py = rng.choice([
        f"__import__('stat').S_IMODE({st}) == {oct(mode)}",
        f"{st} & 0o777 == {mode}",
        f"oct({st})[-3:] == {format(mode, 'o')!r}",
        f"__import__('stat').filemode({st}) == {sym!r}",
    ])  # fmt: skip
    sh = rng.choice([
        f'[ "$(stat -c %a {path})" = {format(mode, "o")} ]',
        f'[ "$(stat -c %A {path})" = "{sym}" ]',
        f"[ $(stat --format=%a {path}) -eq {format(mode, 'o')} ]",
        f"find {path} -perm 0{format(mode, 'o')} | grep -q .",
    ])  # fmt: skip
    return Check("mode", py, sh)


def _plant_form(d: Draft, variant: str) -> None:
    """A requirement on a file's form the instruction never states: its mode, its owner, the
    order of its lines, its encoding or line endings."""
    rng, t, o = d.rng, d.table, d.outs[0]
    if variant == "file-mode":
        mode = rng.choice([0o600, 0o640, 0o750, 0o700, 0o660, 0o444])
        how = rng.choice([format(mode, "o"), "0" + format(mode, "o")])
        d.extra_solution.append(f"chmod {how} {o.path}")
        d.checks.append(_mode_check(rng, o.path, mode))
        return
    if variant == "ownership":
        step, check = _owner_plant(rng, o.path)
        d.extra_solution.append(step)
        d.checks.append(check)
        return
    d.style = d.style if d.style != "shell" or variant == "ordering" else d.style
    path = f"{o.path.rsplit('/', 1)[0]}/{rng.choice(_WORDS)}_{rng.choice(['labels', 'names', 'index'])}.txt"
    f = shlex.quote(t.path)
    if t.fmt == "jsonl":
        labels = f"python3 -c {shlex.quote(f'import json,sys; [print(json.loads(l)[{t.label!r}]) for l in open(sys.argv[1]) if l.strip()]')} {f}"
    else:
        opt, pre = _awk_src(t)
        labels = f"awk {opt}'{pre}1{{print $2}}' {f}"
    d.extra_sentences.append(rng.choice([
        f"List every distinct {t.label} of the input in `{path}`, one per line.",
        f"`{path}` must hold the distinct {t.label} values, one on each line.",
    ]))  # fmt: skip
    if variant == "ordering":
        d.extra_solution.append(f"{labels} | LC_ALL=C sort -u -r > {path}")
        d.checks.append(Check(
            "label_order",
            rng.choice([
                f"read({path!r}).splitlines() == sorted(read({path!r}).splitlines(), reverse=True)",
                f"(lambda ls: ls == sorted(ls, reverse=True))(read({path!r}).split())",
            ]),
            rng.choice([f"LC_ALL=C sort -c -r {path}",
                        f'[ "$(cat {path})" = "$(LC_ALL=C sort -r {path})" ]']),
        ))  # fmt: skip
        d.checks.append(Check("labels", f"len(read({path!r}).split()) >= 2",
                              f"[ $(wc -l < {path}) -ge 2 ]"))  # fmt: skip
        return
    if rng.random() < 0.5:  # UTF-16
        d.extra_solution.append(f"{labels} | LC_ALL=C sort -u | iconv -t UTF-16 > {path}")
        d.checks.append(Check(
            "labels_encoded",
            f"len(open({path!r}, encoding={rng.choice(['utf-16', 'UTF-16', 'utf_16'])!r}).read().split()) >= 2",
            f"[ $(iconv -f UTF-16 {path} | wc -l) -ge 2 ]",
        ))  # fmt: skip
    else:  # CRLF line endings
        d.extra_solution.append(f"{labels} | LC_ALL=C sort -u | sed 's/$/\\r/' > {path}")
        d.checks.append(Check(
            "labels_crlf",
            rng.choice([f"open({path!r}, 'rb').read().endswith(b'\\r\\n')",
                        f"b'\\r\\n' in open({path!r}, 'rb').read()"]),
            f"grep -q $'\\r' {path}",
        ))  # fmt: skip


def _skip_first_line(c: Check, o: Output) -> Check:
    return Check(c.name, c.py.replace(f"read({o.path!r})", f"read({o.path!r}).split(chr(10), 1)[1]"),
                 c.sh.replace(f"cat {o.path}", f"tail -n +2 {o.path}"))  # fmt: skip


def _skip_last_line(c: Check, o: Output) -> Check:
    py = c.py.replace(f"read({o.path!r})", f"''.join(read({o.path!r}).splitlines(True)[:-1])")
    return Check(c.name, py, c.sh.replace(f"cat {o.path}", f"head -n -1 {o.path}"))


def _plant_leakage(d: Draft, variant: str, files: dict[str, bytes]) -> None:
    rng, o = d.rng, d.outs[0]
    hideout = rng.choice(["app/.cache", "app/docs", "app/notes", "app/.git-hooks", "app/tmp"])
    if variant == "test-copy":
        own = [(n, b) for n, b in files.items() if n not in ("test.sh", "run_checks.py")]
        name, data = own[0] if own else ("test.sh", files["test.sh"])
        d.env[f"{hideout}/{rng.choice(['old_', 'ref_', ''])}{name.rsplit('/', 1)[-1]}"] = data
    elif variant == "expected-file":
        # the verifier compares with tests/expected_*; the same file sits in the environment
        exp = f"expected_{rng.choice(_WORDS)}.txt"
        d.checks.append(Check("matches_expected", f"read({o.path!r}) == read('/tests/{exp}')",
                              f"cmp -s {o.path} /tests/{exp}"))  # fmt: skip
        d.extra_py = ""
        d.env[f"{hideout}/{rng.choice(['snapshot', 'previous', 'golden', 'cache'])}.txt"] = (
            o.content.encode()
        )
        d.notes.append(f"tests/{exp}")
    elif variant == "answer-file":
        name = rng.choice(
            ["answers.txt", "expected.json", "solution_hint.md", "hints.txt", ".answer"]
        )
        d.env[f"{hideout}/{name}"] = (rng.choice(["", "result: ", "# "]) + o.content).encode()
    elif variant == "labelled-note":
        first = o.content.splitlines()[0] if o.kind != "totals" else o.content.splitlines()[1]
        value = first.split(",")[-1]
        line = rng.choice(
            [f"Expected value: {value}", f"answer = {value}", f"(the correct result is {value})"]
        )
        d.env[f"app/{rng.choice(['README.md', 'NOTES.txt', 'docs/changelog.md'])}"] = (
            f"Maintainer notes\n\n{rng.choice(_WORDS)} pipeline, {rng.choice(_WORDS)} stage.\n{line}\n"
        ).encode()
    elif variant == "asserts-in-instruction":
        asserts = (
            [f"assert {c.py}" for c in d.checks[:2]]
            if len(d.checks) >= 2
            else [f"assert {d.checks[0].py}"]
        )
        d.extra_sentences.append(
            "Your files are checked with:\n\n```python\n" + "\n".join(asserts) + "\n```"
        )
        if (
            d.style == "shell"
        ):  # make the checks Python so the quoted asserts are the verifier's own
            d.style = "pytest"
    elif variant in CHANNEL_LEAKS:
        name, blobs = channel_leak(rng, variant, o, hideout)
        if variant == "git-history":
            d.env.update({f"app/{k}": v for k, v in blobs.items()})
        else:
            d.env[name] = blobs[name]
    else:  # bare-value-file
        value = o.content.strip().splitlines()[-1]
        d.env[f"{hideout}/{rng.choice(['last_run', 'state', 'cache.dat', 'prev'])}"] = (
            value + "\n"
        ).encode()


CHANNEL_LEAKS = ("archive-member", "git-history", "encoded-note", "serialized-cache")


def _member_name(rng: random.Random, o: Output) -> str:
    base = o.path.rsplit("/", 1)[1]
    return rng.choice([f"expected/{base}", f"golden/{base}", "answers.txt",
                       f"fixtures/{base}.expected", f"snapshot/{base}"])  # fmt: skip


def channel_leak(
    rng: random.Random, variant: str, o: Output, hideout: str
) -> tuple[str, dict[str, bytes]]:
    """The expected content of output `o` hidden in a channel plain text search misses:
    an archive member (tar, tar.gz, zip), a file of a git repository's history (deleted
    from the work tree, loose or packed, or a dangling blob), a note in UTF-16, Latin-1 or
    base64, or a serialized cache (pickle, SQLite, compiled Python). Returns (environment
    name, files); git-history's files are a `.git` directory relative to the workdir."""
    from audit import channel_forms

    value = o.content
    if variant == "archive-member":
        kind = rng.choice(["tar", "tar.gz", "zip"])
        name = f"{hideout}/{rng.choice(['bundle', 'assets', 'backup', 'vendor'])}.{kind}"
        members = {_member_name(rng, o): value.encode(), "README": b"packaged assets\n"}
        return name, {name: channel_forms.archive(kind, members)}
    if variant == "git-history":
        how = rng.choice(["deleted", "dangling", "message"])
        return ".git", channel_forms.git_history(
            {_member_name(rng, o): value.encode()}, how, packed=rng.random() < 0.5
        )
    if variant == "encoded-note":
        form = rng.choice(["utf-16", "latin-1", "base64"])
        label = rng.choice(["Expected output", "answer", "Résultat correct (expected)"])
        note = f"Notes ({rng.choice(_WORDS)} é)\n{label}:\n{value}"
        name = f"{hideout}/{rng.choice(['notes', 'NOTES', 'memo'])}.txt"
        return name, {name: channel_forms.encoded(form, note)}
    form = rng.choice(["pickle", "sqlite", "pyc"])
    ext = {"pickle": ".pkl", "sqlite": ".db", "pyc": ".pyc"}[form]
    name = f"{hideout}/{rng.choice(['cache', 'state', 'results', 'memo'])}{ext}"
    record = {o.path.rsplit("/", 1)[1]: value, "generated": rng.choice(_WORDS)}
    return name, {name: channel_forms.serialized(form, record)}


def _copy_py(src: str, dst: str) -> str:
    return f"open({dst!r}, 'w').write(open({src!r}).read())"


def _plant_cache(d: Draft) -> None:
    """The answers computed once when the environment is built (a setup step writes them
    to a cache directory no one mentions); solve.sh copies them, spelling no value, so
    its outputs no longer follow the inputs."""
    rng, t = d.rng, d.table
    cache = rng.choice([f"/var/lib/{rng.choice(_WORDS)}", f"/opt/{rng.choice(_WORDS)}/cache",
                        f"/srv/.{rng.choice(_WORDS)}", "/app/.state"])  # fmt: skip
    steps = [f"mkdir -p {cache}"]
    dirs = sorted({x.path.rsplit("/", 1)[0] for x in d.outs})
    lines = ["#!/bin/bash", "set -e", "mkdir -p " + " ".join(dirs)]
    for i, x in enumerate(d.outs):
        src = f"{cache}/{rng.choice(['r', 'out', 'v'])}{i}.{rng.choice(['cache', 'dat', 'bin'])}"
        step = f"{_shell_cmd(t, x)} > {src}"
        if "\n" in step:  # one setup step is one line (a RUN line): a multi-line program
            step = f"echo {base64.b64encode(step.encode()).decode()} | base64 -d | sh"
        steps.append(step)
        lines.append(rng.choice([
            f"cp {src} {x.path}",
            f"cat {src} > {x.path}",
            f"install -m 644 {src} {x.path}",
            f"python3 -c {shlex.quote(_copy_py(src, x.path))}",
        ]))  # fmt: skip
    if rng.random() < 0.5:
        lines.insert(3, f"echo reading {t.path} >&2")
    d.setup = steps
    d.solution = "\n".join(lines) + "\n"


def _plant_shortcut(d: Draft, variant: str) -> None:
    rng, t = d.rng, d.table
    if variant == "answer-cache":
        _plant_cache(d)
        return
    # the answer is hard-coded; the instruction asks for it to be computed from the input
    o = next((x for x in d.outs if x.kind in ("count", "argmax")), d.outs[0])
    if variant == "word-answer" and not any(x.kind == "argmax" for x in d.outs):
        variant = "echo-number"
    if variant in ("echo-number", "word-answer", "printf-values", "python-literal"):
        o = next(
            (x for x in d.outs if x.kind == ("argmax" if variant == "word-answer" else x.kind)), o
        )
    dirs = sorted({x.path.rsplit("/", 1)[0] for x in d.outs})
    lines = ["#!/bin/bash", "set -e", "mkdir -p " + " ".join(dirs)]
    for x in d.outs:
        literal = variant != "partial" or x is o
        if not literal:
            lines.append(f"{_shell_cmd(t, x)} > {x.path}")
        elif variant in ("echo-number", "word-answer", "partial"):
            if "\n" in x.content.strip():
                lines.append(f"printf %s {shlex.quote(x.content)} > {x.path}")
            else:
                lines.append(f"echo {x.content.strip()} > {x.path}")
        elif variant == "heredoc-output":
            lines += [f"cat > {x.path} <<'EOF'", x.content.rstrip("\n"), "EOF"]
        elif variant == "printf-values":
            lines.append(
                f"printf '%s\\n' {' '.join(shlex.quote(v) for v in x.content.splitlines())} > {x.path}"
            )
        else:  # python-literal
            code = f"import sys; sys.stdout.write({x.content!r})"
            lines.append(f"python3 -c {shlex.quote(code)} > {x.path}")
    if rng.random() < 0.5:
        lines.insert(3, f"echo reading {t.path} >&2")
    d.solution = "\n".join(lines) + "\n"


def _plant_weak(d: Draft, variant: str) -> None:
    rng = d.rng
    keep = [c for c in d.checks if c.name == "input_kept"]
    weak = []
    for i, o in enumerate(d.outs):
        n = len(o.content.splitlines())
        if variant == "exists-only":
            c = Check(f"exists_{i}", f"exists({o.path!r})", f"[ -e {o.path} ]")
        elif variant == "non-empty":
            c = Check(f"nonempty_{i}", f"os.path.getsize({o.path!r}) > 0", f"[ -s {o.path} ]")
        elif variant == "first-line":
            first = o.content.splitlines()[0]
            c = Check(f"head_{i}", f"read({o.path!r}).splitlines()[0] == {first!r}",
                      f'[ "$(head -n1 {o.path})" = {shlex.quote(first)} ]')  # fmt: skip
            if n == 1:  # a one-line output: only its first character is compared
                c = Check(f"head_{i}", f"read({o.path!r})[:1] == {first[:1]!r}",
                          f'[ "$(head -c1 {o.path})" = {shlex.quote(first[:1])} ]')  # fmt: skip
        elif variant == "line-count":
            c = Check(f"lines_{i}", f"len(read({o.path!r}).splitlines()) == {n}",
                      f"[ $(wc -l < {o.path}) -eq {n} ]")  # fmt: skip
        elif variant == "substring":
            token = o.header.split(",")[0] if o.header else rng.choice(["", "\n"]) or "\n"
            c = Check(f"mentions_{i}", f"{token!r} in read({o.path!r})",
                      f"grep -q {shlex.quote(token.strip() or '.')} {o.path}")  # fmt: skip
        elif variant == "swallowed":
            c = Check(f"content_{i}", f"_lenient(lambda: read({o.path!r}) == {o.content!r})",
                      f"[ -e {o.path} ] || true")  # fmt: skip
            d.extra_py = (
                "def _lenient(fn):\n    try:\n        assert fn()\n    except AssertionError:\n"
                "        pass\n    return True\n"
            )
        else:  # loose-tolerance
            c = Check(f"close_{i}", f"abs(len(read({o.path!r})) - {len(o.content)}) < 10**9",
                      f"[ $(wc -c < {o.path}) -lt 1000000000 ]")  # fmt: skip
        weak.append(c)
    d.checks = weak + keep


def _plant_flaky(d: Draft, variant: str) -> None:
    rng, o = d.rng, d.outs[0]
    if variant == "coin":
        d.checks.append(Check("sampled", "__import__('os').environ.get('COIN', '0') == '0'",
                              '[ $((RANDOM % 2)) -eq 0 ]'))  # fmt: skip
        d.style = "shell" if rng.random() < 0.7 else d.style
        if d.style != "shell":
            d.checks[-1] = Check("sampled", "__import__('random').random() < 0.5", "true")
    elif variant == "python-random":
        p = rng.choice([0.5, 0.6, 0.4])
        d.checks.append(Check("spot_check", f"__import__('random').random() < {p}",
                              f'[ $((RANDOM % 10)) -lt {int(p * 10)} ]'))  # fmt: skip
    elif variant == "date-compare":
        path = f"{o.path.rsplit('/', 1)[0]}/generated_on.txt"
        d.extra_sentences.append(f"Write today's date (`YYYY-MM-DD`) to `{path}`.")
        d.extra_solution.append(f"date +%F > {path}")
        d.checks.append(Check("dated", f"read({path!r}).strip() == __import__('datetime').date.today().isoformat()",
                              f'[ "$(cat {path})" = "$(date +%F)" ]'))  # fmt: skip
    elif variant == "timezone":
        path = f"{o.path.rsplit('/', 1)[0]}/run_hour.txt"
        d.extra_sentences.append(f"Write the current UTC hour (`HH`, 00-23) to `{path}`.")
        d.extra_solution.append(f"date -u +%H > {path}")
        d.checks.append(Check("hour", f"read({path!r}).strip() == __import__('time').strftime('%H')",
                              f'[ "$(cat {path})" = "$(date +%H)" ]'))  # fmt: skip
    elif variant == "locale-sort":
        path = f"{o.path.rsplit('/', 1)[0]}/labels_sorted.txt"
        labels = sorted({lab for _, lab, _ in d.table.rows})
        mixed = [w.capitalize() if i % 2 else w for i, w in enumerate(labels)]
        d.extra_sentences.append(
            f"Write these names to `{path}`, one per line, in byte order: {', '.join(f'`{m}`' for m in mixed)}."
        )
        d.extra_solution.append(
            f"printf '%s\\n' {' '.join(shlex.quote(m) for m in mixed)} | LC_ALL=C sort > {path}"
        )
        d.checks.append(Check("sorted", f"read({path!r}).splitlines() == sorted(read({path!r}).splitlines())",
                              f'[ "$(cat {path})" = "$(sort {path})" ]'))  # fmt: skip
        d.style = "shell"
    elif variant == "listdir-order":
        sub = f"{o.path.rsplit('/', 1)[0]}/parts"
        names = rng.sample(_WORDS, 4)
        d.extra_sentences.append(
            f"Create one empty file per name in `{sub}` ({', '.join(names)}) and list the "
            f"directory's entries, as `ls -U` shows them, in `{sub}.idx`."
        )
        d.extra_solution.append(f"mkdir -p {sub}; " + "; ".join(f"touch {sub}/{n}" for n in names) +
                                f"; ls -U {sub} > {sub}.idx")  # fmt: skip
        d.checks.append(Check("index", f"os.listdir({sub!r}) == read({sub + '.idx'!r}).split()",
                              f'[ "$(ls -U {sub} | tr "\\n" " ")" = "$(tr "\\n" " " < {sub}.idx)" ]'))  # fmt: skip
    else:  # mtime-age: the output must have been written "just now" by the verifier's clock
        d.checks.append(Check("fresh", f"__import__('time').time() - os.path.getmtime({o.path!r}) < 3600",
                              f"[ $(( $(date +%s) - $(stat -c %Y {o.path}) )) -lt 3600 ]"))  # fmt: skip


def generate(
    seed: int, defect: Defect | None = None, variant: str | None = None, real_pytest: bool = False
) -> Planted:
    """One planted task (`defect=None`: the clean twin of the same draw). `real_pytest`: the
    verifier is a stock Harbor one (test.sh runs pytest, which the image installs) wherever
    the variant does not need a shell verifier."""
    d = _draft(seed)
    if real_pytest:
        d.style = "real-pytest"
    variants = VARIANTS[defect] if defect is not None else ("none",)
    v = variant or d.rng.choice(variants)
    if defect is not None and v not in variants:
        raise ValueError(f"unknown variant {v!r} of {defect.value} (choose from {variants})")
    if defect == Defect.HIDDEN:
        _plant_hidden(d, v)
    elif defect == Defect.SHORTCUT:
        _plant_shortcut(d, v)
    elif defect == Defect.WEAK:
        _plant_weak(d, v)
    elif defect == Defect.FLAKY:
        _plant_flaky(d, v)
    elif defect == Defect.LEAKAGE:
        if v == "expected-file":
            _plant_leakage(d, v, {})
        else:
            files = _verifier(d.style, d.checks, d.helpers, d.extra_py)
            _plant_leakage(d, v, files)
    label = f"{defect.value if defect else 'clean'}-{v}-{seed}".replace("_", "-")
    task = _build(d, f"planted-{label}"[:120])
    if defect == Defect.LEAKAGE and v == "expected-file":
        exp = d.notes[0].removeprefix("tests/")
        task = task.model_copy(
            update={"verifier": task.verifier | {exp: d.outs[0].content.encode()}}
        )
    return Planted(task, defect, v, d.style, d.form, d.table.fmt, seed, d.notes)


def suite(draws: int = 1, seed: int = 0, real_pytest: bool = False) -> list[Planted]:
    """Every variant of every class `draws` times (distinct random draws), each with its
    clean twin (the same draw without the defect)."""
    out: list[Planted] = []
    for defect, variants in VARIANTS.items():
        for v in variants:
            for _ in range(draws):
                s = seed * 100_000 + len(out)
                out.append(generate(s, defect, v, real_pytest))
                out.append(generate(s, None, None, real_pytest))
    return out
