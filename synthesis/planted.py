"""Planted bad candidates: material validation was not written against, to show it can fail.

`plant(defect, parent, rng)` builds an extension of `parent` that is valid in every respect
but one planted defect, with its surface form drawn at random: which output the steps derive
from which parent result, the output's directory and name, the derivation (copy, line count,
digest, sort, first line, byte count), how the test is written (variable names, helpers,
messages), the literal words and numbers, and the form of the defect itself. `base(parent,
rng)` is the same extension without the defect (the control: validation must accept it).

- hidden requirement: the steps write, and a test compares, a prefix, a trailing line, a JSON
  key, a CSV header, a status token or a file mode the instruction never states
  -> `hidden_requirement`, naming the literal;
- solution artifact: a test reads a by-product of the reference steps (a dependency file, a
  stamp, a log, a cache copy, a backup) the instruction never names -> `solution_artifact`,
  naming the path;
- vacuous assertion: an extra test that cannot fail (constant truth, a tautology,
  `len(x) >= 0`, a swallowed failure, no assertion, `or True`, constant arithmetic)
  -> `vacuous_assertion`, naming the test;
- flaky check: an extra test on chance or the clock (random, time, pid, uuid, datetime,
  hash, urandom, secrets) -> `flaky_check`, naming the test;
- free reward: extra tests that pass before the agent does anything (an input file exists,
  is non-empty, has its header, is listed, has lines) -> `free_reward`, naming a test;
- dependency missing: steps that do not use the parent's results (fixed text, an input of
  their own, the system, a directory tree, a checksum of their own file, or fixed text with
  a parent result declared in `consumes` all the same) -> `dependency_missing` (the
  data-flow probe: no new assertion changes when the consumed files are perturbed), naming
  the tests.

Every form listed is one validation claims to catch (`CLAIMED`). `UNCLAIMED` forms are known
misses or catches under another reason, generated so the docs can report them honestly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from enum import StrEnum

from synthesis.operators.extension import Extension, Parent

WORDS = (
    "amber basalt cobalt dune ember fjord garnet harbor indigo juniper kestrel lagoon marlin "
    "nimbus onyx pebble quartz raven sierra tundra umber vortex willow yarrow zephyr"
).split()
DIRS = ("exports", "results", "derived", "reports", "build_out", "staging")


class Defect(StrEnum):
    HIDDEN_REQUIREMENT = "hidden_requirement"
    SOLUTION_ARTIFACT = "solution_artifact"
    VACUOUS_ASSERTION = "vacuous_assertion"
    FLAKY_CHECK = "flaky_check"
    FREE_REWARD = "free_reward"
    DEPENDENCY_MISSING = "dependency_missing"


@dataclass(frozen=True)
class Planted:
    """A planted candidate: the extension, what was planted, and what validation must say."""

    defect: Defect | None  # None: the control (no defect)
    form: str
    extension: Extension
    expect: str  # the Verdict value validation must give
    subject: str | None = None  # the literal / path / test name `offending` must include


def _word(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(10, 9999)}"


# ---- the base extension: derive a new file from a parent result ---------------------------

# name -> (shell step writing OUT from SRC, python computing `want` (bytes) from `src`, phrase)
DERIVATIONS: dict[str, tuple[str, str, str]] = {
    "copy": ("cp {src} {out}", "want = src", "Copy `{src}` to `{out}` byte for byte."),
    "lines": (
        "wc -l < {src} | tr -d ' ' > {out}",
        'want = str(src.count(b"\\n")).encode() + b"\\n"',
        "Write the number of lines of `{src}` (newline characters, as `wc -l` counts them) "
        "to `{out}`: the bare number and a newline.",
    ),
    "digest": (
        "sha256sum {src} | cut -d' ' -f1 > {out}",
        'want = hashlib.sha256(src).hexdigest().encode() + b"\\n"',
        "Write the SHA-256 hex digest of `{src}` (lowercase) and a newline to `{out}`.",
    ),
    "sorted": (
        "LC_ALL=C sort {src} > {out}",
        'want = b"".join(line + b"\\n" for line in sorted(src.splitlines()))',
        "Write the lines of `{src}` sorted in plain byte order to `{out}` (every line "
        "newline-terminated).",
    ),
    "first": (
        "head -n 1 {src} > {out}",
        "want = src.splitlines(keepends=True)[0]",
        "Write the first line of `{src}`, with its newline, to `{out}`.",
    ),
    "bytes": (
        "wc -c < {src} | tr -d ' ' > {out}",
        'want = str(len(src)).encode() + b"\\n"',
        "Write the size of `{src}` in bytes to `{out}`: the bare number and a newline.",
    ),
}


@dataclass(frozen=True)
class _Base:
    src: str
    out: str
    derivation: str
    step: str
    phrase: str
    test: str  # one test function
    name: str  # its name


def copy_like(derivation: str, lines: int | None) -> bool:
    """Whether `derivation` of a file of `lines` lines may be its copy, which a scripted hack
    run after the parent's solution earns (`copy_inputs`): a copy; a sort or a first line
    of a file of one line (a sort of an already sorted file too: its order is unknown)."""
    return derivation in ("copy", "sorted") or (derivation == "first" and (lines or 0) < 2)


def _base(parent: Parent, rng: random.Random, tag: str, work: bool = False) -> _Base:
    """A derivation of a parent result; with `work`, never one a copy earns (`copy_like`)."""
    guarded = sorted(p for p, checks in parent.guards.items() if checks)
    text_outputs = {f.path for f in parent.profile.outputs if f.kind in ("text", "csv", "json")}
    src = rng.choice([p for p in guarded if p in text_outputs] or guarded)
    out = f"{parent.workdir}/{rng.choice(DIRS)}/{rng.choice(WORDS)}_{tag}.txt"
    lines = next((f.lines for f in parent.profile.outputs if f.path == src), None)
    names = [d for d in sorted(DERIVATIONS) if not (work and copy_like(d, lines))]
    derivation = rng.choice(names)
    step, compute, phrase = DERIVATIONS[derivation]
    var = rng.choice(("data", "blob", "content", "raw", "got"))
    name = f"test_{tag}_{rng.choice(('derived', 'output', 'result', 'product'))}_{derivation}"
    read = rng.choice(
        (
            f"    with open({out!r}, 'rb') as f:\n        {var} = f.read()\n",
            f"    {var} = open({out!r}, 'rb').read()\n",
        )
    )
    msg = rng.choice(("", f', f"{out} is not what {derivation} of {src} gives"'))
    test = (
        f"def {name}():\n    import hashlib\n\n"
        f"    src = open({src!r}, 'rb').read()\n    {compute}\n{read}"
        f"    assert {var} == want{msg}\n"
    )
    return _Base(
        src,
        out,
        derivation,
        step.format(src=src, out=out),
        phrase.format(src=src, out=out),
        test,
        name,
    )


def _extension(b: _Base, *, steps=None, tests=None, text=None, consumes=None, **kw) -> Extension:
    outdir = b.out.rsplit("/", 1)[0]
    return Extension(
        title=f"derive the {b.derivation} of a result",
        steps=steps if steps is not None else [f"mkdir -p {outdir}", b.step],
        tests=tests if tests is not None else b.test,
        text=text if text is not None else b.phrase,
        consumes=consumes if consumes is not None else [b.src],
        creates=[b.out],
        **kw,
    )


def base(parent: Parent, rng: random.Random, tag: str = "r1") -> Planted:
    """The control: a valid extension with nothing planted (and no copy: a copy of the
    parent's result needs its work, not its output, and is not dependent)."""
    b = _base(parent, rng, tag, work=True)
    return Planted(None, f"control-{b.derivation}", _extension(b), "accepted")


# ---- defects -----------------------------------------------------------------------------


def _hidden(parent: Parent, rng: random.Random, tag: str, form: str) -> Planted:
    b = _base(parent, rng, tag)
    outdir = b.out.rsplit("/", 1)[0]
    lit = _word(rng)
    t = f"test_{tag}_{rng.choice(('format', 'layout', 'shape'))}"
    if form == "prefix":
        steps = [f"mkdir -p {outdir}", b.step, f"sed -i '1s/^/{lit}: /' {b.out}"]
        check = f"    assert open({b.out!r}).read().startswith({lit + ': '!r})\n"
        subject = f"{lit}: "
        tests = _without_first_line_check(b, lit + ": ") + f"\n\ndef {t}():\n{check}"
        return Planted(Defect.HIDDEN_REQUIREMENT, form, _extension(b, steps=steps, tests=tests),
                       "hidden_requirement", subject)  # fmt: skip
    if form == "trailer":
        token = lit.upper()
        steps = [f"mkdir -p {outdir}", b.step, f"cp {b.out} {b.out}.tmp",
                 f"{{ cat {b.out}.tmp; echo {token}; }} > {b.out}", f"rm {b.out}.tmp"]  # fmt: skip
        tests = (
            _trimmed_base(b, 1)
            + f"\n\ndef {t}():\n    lines = open({b.out!r}).read().splitlines()\n"
            f"    assert lines[-1] == {token!r}\n"
        )
        return Planted(Defect.HIDDEN_REQUIREMENT, form, _extension(b, steps=steps, tests=tests),
                       "hidden_requirement", token)  # fmt: skip
    if form in ("json_key", "csv_header", "status"):
        key = rng.choice(WORDS) + "_" + rng.choice(("total", "count", "value", "size"))
        report = f"{outdir}/{rng.choice(WORDS)}_{tag}.summary"
        if form == "json_key":
            write = f"python3 -c \"import json; json.dump({{'{key}': 1}}, open('{report}', 'w'))\""
            check = f"    import json\n    assert json.load(open({report!r}))[{key!r}] == 1\n"
            subject, phrase = key, f"Also write a JSON summary object to `{report}`."
        elif form == "csv_header":
            header = f"{key},{rng.choice(WORDS)}"
            write = f"printf '%s\\n' '{header}' > {report}"
            check = f"    assert open({report!r}).readline().strip() == {header!r}\n"
            subject, phrase = header, f"Also start a CSV summary `{report}` with its header line."
        else:
            status = f"STATUS={lit.upper()}"
            write = f"echo '{status}' > {report}"
            check = f"    assert open({report!r}).read().strip() == {status!r}\n"
            subject, phrase = status, f"Also record the job status in `{report}`."
        steps = [f"mkdir -p {outdir}", b.step, write]
        tests = b.test + f"\n\ndef {t}():\n{check}"
        ext = _extension(b, steps=steps, tests=tests, text=f"{b.phrase} {phrase}")
        ext = replace(ext, creates=[b.out, report])
        return Planted(Defect.HIDDEN_REQUIREMENT, form, ext, "hidden_requirement", subject)
    if form == "mode":
        mode = rng.choice((0o600, 0o640, 0o604, 0o440))
        steps = [f"mkdir -p {outdir}", b.step, f"chmod {mode:o} {b.out}"]
        check = f"    import os\n    assert os.stat({b.out!r}).st_mode & 0o777 == {mode}\n"
        tests = b.test + f"\n\ndef {t}():\n{check}"
        return Planted(
            Defect.HIDDEN_REQUIREMENT,
            form,
            _extension(b, steps=steps, tests=tests),
            "hidden_requirement",
            f"{mode:o}",
        )  # fmt: skip  (a mode literal is octal)
    raise ValueError(f"unknown hidden-requirement form {form!r}")


def _trimmed_base(b: _Base, trailing_lines: int) -> str:
    """The base test, comparing the output without its last `trailing_lines` lines."""
    return b.test.replace(
        "    assert ",
        f"    {_var(b)} = b''.join({_var(b)}.splitlines(keepends=True)[:-{trailing_lines}])\n"
        "    assert ",
        1,
    )


def _without_first_line_check(b: _Base, prefix: str) -> str:
    """The base test, comparing the output with `prefix` removed from its start."""
    return b.test.replace(
        "    assert ",
        f"    {_var(b)} = {_var(b)}.removeprefix({prefix.encode()!r})\n    assert ",
        1,
    )


def _var(b: _Base) -> str:
    return b.test.split("    assert ", 1)[1].split(" ", 1)[0]


def _artifact(parent: Parent, rng: random.Random, tag: str, form: str) -> Planted:
    b = _base(parent, rng, tag)
    outdir = b.out.rsplit("/", 1)[0]
    wd = parent.workdir
    w = rng.choice(WORDS)
    t = f"test_{tag}_{rng.choice(('bookkeeping', 'provenance', 'trace'))}"
    if form == "depfile":
        path = b.out.rsplit(".", 1)[0] + ".d"
        extra = f"echo '{b.out}: {b.src}' > {path}"
        check = f"    assert {b.src!r} in open({path!r}).read()\n"
    elif form == "stamp":
        path = f"{wd}/.{w}_{tag}.stamp"
        extra = f"touch {path}"
        check = f"    import os\n    assert os.path.exists({path!r})\n"
    elif form == "log":
        path = f"{outdir}/{w}_{tag}.log"
        extra = f"echo 'derived {b.out}' > {path}"
        check = f"    assert open({path!r}).read().strip()\n"
    elif form == "cache":
        path = f"{wd}/.cache/{w}_{tag}/{b.src.rsplit('/', 1)[1]}"
        extra = f"mkdir -p {path.rsplit('/', 1)[0]} && cp {b.src} {path}"
        check = f"    assert open({path!r}, 'rb').read() == open({b.src!r}, 'rb').read()\n"
    elif form == "backup":
        path = f"{b.out}.bak"
        extra = f"cp {b.out} {path}"
        check = f"    assert open({path!r}, 'rb').read() == open({b.out!r}, 'rb').read()\n"
    else:
        raise ValueError(f"unknown artifact form {form!r}")
    steps = [f"mkdir -p {outdir}", b.step, extra]
    tests = b.test + f"\n\ndef {t}():\n{check}"
    return Planted(Defect.SOLUTION_ARTIFACT, form, _extension(b, steps=steps, tests=tests),
                   "solution_artifact", path)  # fmt: skip


VACUOUS_FORMS: dict[str, str] = {
    "assert_true": "    assert True\n",
    "truthy_string": "    assert 'ok', 'the output is fine'\n",
    "tautology": "    x = open({out!r}).read()\n    assert x == x\n",
    "len_nonnegative": "    assert len(open({out!r}).read()) >= 0\n",
    "or_true": "    assert open({out!r}).read() == 'never' or True\n",
    "constant_arithmetic": "    assert 2 + 2 == 4\n",
    "swallowed": "    try:\n        assert open({out!r}).read() == 'never'\n"
    "    except AssertionError:\n        pass\n",
    "no_assertion": "    pass\n",
}

FLAKY_FORMS: dict[str, tuple[str, str]] = {
    "random": ("import random", "assert random.random() < {p}"),
    "randint": ("import random", "assert random.randint(0, 99) < {pct}"),
    "unseeded_rng": ("import random", "assert random.Random().random() < {p}"),
    "clock": ("import time", "assert int(time.time() * 1000) % 100 < {pct}"),
    "pid": ("import os", "assert os.getpid() % 100 < {pct}"),
    "uuid": ("import uuid", "assert uuid.uuid4().int % 100 < {pct}"),
    "datetime": ("import datetime", "assert datetime.datetime.now().microsecond % 100 < {pct}"),
    "hash": ("", "assert hash(open({out!r}).read()) % 100 < {pct}"),
    "urandom": ("import os", "assert os.urandom(1)[0] % 100 < {pct}"),
    "secrets": ("import secrets", "assert secrets.randbelow(100) < {pct}"),
}


def _extra_test(parent: Parent, rng: random.Random, tag: str, body: str, defect: Defect,
                form: str, expect: str) -> Planted:  # fmt: skip
    b = _base(parent, rng, tag)
    name = f"test_{tag}_{rng.choice(('sanity', 'consistency', 'extra', 'well_formed'))}"
    tests = b.test + f"\n\ndef {name}():\n" + body.format(out=b.out)
    return Planted(defect, form, _extension(b, tests=tests), expect, name)


def _flaky(parent: Parent, rng: random.Random, tag: str, form: str) -> Planted:
    imp, check = FLAKY_FORMS[form]
    pct = rng.randint(25, 75)  # far from 0 and 100: neither always passing nor always failing
    body = (
        (f"    {imp}\n" if imp else "") + "    " + check.format(p=pct / 100, pct=pct, out="{out}")
    )
    return _extra_test(parent, rng, tag, body + "\n", Defect.FLAKY_CHECK, form, "flaky_check")


def _free(parent: Parent, rng: random.Random, tag: str, form: str) -> Planted:
    """Extra checks on an input the candidate ships: true before the agent does anything."""
    b = _base(parent, rng, tag)
    wd = parent.workdir
    w = rng.choice(WORDS)
    rel = f"{rng.choice(('config', 'etc', 'input'))}/{w}_{tag}.ini"
    path = f"{wd}/{rel}"
    header = f"[{w}]"
    content = f"{header}\nkey = {rng.randint(1, 999)}\n".encode()
    checks = {
        "input_exists": f"    import os\n    assert os.path.isfile({path!r})\n",
        "input_nonempty": f"    import os\n    assert os.path.getsize({path!r}) > 0\n",
        "input_header": f"    assert open({path!r}).readline().strip() == {header!r}\n",
        "input_listed": f"    import os\n    assert {path.rsplit('/', 1)[1]!r} in "
        f"os.listdir({path.rsplit('/', 1)[0]!r})\n",
        "input_has_lines": f"    assert open({path!r}).read().count('\\n') >= 1\n",
    }
    names = []
    extra = ""
    for k in rng.sample(sorted(checks), 2) if form == "mixed" else [form]:
        n = f"test_{tag}_{k}"
        names.append(n)
        extra += f"\n\ndef {n}():\n{checks[k]}"
    text = f"{b.phrase} The settings file `{path}` (section `{header}`) is provided."
    ext = _extension(b, tests=b.test + extra, text=text, consumes=[],
                     env_files={f"app/{rel}": content})  # fmt: skip
    return Planted(Defect.FREE_REWARD, form, ext, "free_reward", names[0])


def _independent(parent: Parent, rng: random.Random, tag: str, form: str) -> Planted:
    """Steps that never touch the parent's results (declaring nothing consumed, or, for
    `declared_unused`, a parent result they never read)."""
    wd = parent.workdir
    d = f"{wd}/{rng.choice(DIRS)}"
    w = rng.choice(WORDS)
    out = f"{d}/{w}_{tag}.txt"
    name = f"test_{tag}_{rng.choice(('prepared', 'written', 'recorded'))}"
    env: dict[str, bytes] = {}
    consumes: list[str] = []
    if form == "fixed_text":
        word = _word(rng)
        steps = [f"mkdir -p {d}", f"printf '%s\\n' '{word}' > {out}"]
        test = f"    assert open({out!r}).read() == {word + chr(10)!r}\n"
        text = f"Write the line `{word}` to `{out}`."
    elif form in ("own_input", "own_checksum"):
        rel = f"data/{w}_{tag}.txt"
        env[f"app/{rel}"] = "".join(f"{_word(rng)}\n" for _ in range(rng.randint(3, 9))).encode()
        src = f"{wd}/{rel}"
        if form == "own_input":
            steps = [f"mkdir -p {d}", f"wc -l < {src} | tr -d ' ' > {out}"]
            test = (f"    n = open({src!r}, 'rb').read().count(b'\\n')\n"
                    f"    assert open({out!r}).read() == f'{{n}}\\n'\n")  # fmt: skip
            text = f"Write the number of lines of `{src}` and a newline to `{out}`."
        else:
            steps = [f"mkdir -p {d}", f"sha256sum {src} | cut -d' ' -f1 > {out}"]
            test = ("    import hashlib\n"
                    f"    want = hashlib.sha256(open({src!r}, 'rb').read()).hexdigest()\n"
                    f"    assert open({out!r}).read().strip() == want\n")  # fmt: skip
            text = f"Write the SHA-256 hex digest of `{src}` and a newline to `{out}`."
    elif form == "system":
        steps = [f"mkdir -p {d}", f"uname -s > {out}"]
        test = (f"    import platform\n"
                f"    assert open({out!r}).read().strip() == platform.system()\n")  # fmt: skip
        text = f"Write the kernel name (what `uname -s` prints) to `{out}`."
    elif form == "declared_unused":
        # Fixed text, with a parent result declared consumed: the guard would tie the reward
        # to the parent's work, but no byte of it reaches the output.
        word = _word(rng)
        steps = [f"mkdir -p {d}", f"printf '%s\\n' '{word}' > {out}"]
        test = f"    assert open({out!r}).read() == {word + chr(10)!r}\n"
        text = f"Write the line `{word}` to `{out}`."
        guarded = sorted(p for p, checks in parent.guards.items() if checks)
        consumes = [rng.choice(guarded)] if guarded else []
    elif form == "tree":
        subs = sorted(rng.sample(WORDS, 3))
        steps = [f"mkdir -p {d}/{w}_{tag}/{s}" for s in subs]
        test = (
            "    import os\n"
            f"    assert sorted(os.listdir({d + '/' + w + '_' + tag!r})) == {subs!r}\n"
        )
        text = (
            f"Create the directory `{d}/{w}_{tag}` with exactly the subdirectories "
            + ", ".join(f"`{s}`" for s in subs)
            + "."
        )
        out = f"{d}/{w}_{tag}"
    else:
        raise ValueError(f"unknown dependency form {form!r}")
    ext = Extension(
        title="prepare a file", steps=steps, tests=f"def {name}():\n{test}", text=text,
        consumes=consumes, creates=[out], env_files=env,
    )  # fmt: skip
    return Planted(Defect.DEPENDENCY_MISSING, form, ext, "dependency_missing", name)


CLAIMED: dict[Defect, tuple[str, ...]] = {
    Defect.HIDDEN_REQUIREMENT: ("prefix", "trailer", "json_key", "csv_header", "status", "mode"),
    Defect.SOLUTION_ARTIFACT: ("depfile", "stamp", "log", "cache", "backup"),
    Defect.VACUOUS_ASSERTION: tuple(VACUOUS_FORMS),
    Defect.FLAKY_CHECK: tuple(FLAKY_FORMS),
    Defect.FREE_REWARD: (
        "input_exists",
        "input_nonempty",
        "input_header",
        "input_listed",
        "input_has_lines",
        "mixed",
    ),  # fmt: skip
    Defect.DEPENDENCY_MISSING: (
        "fixed_text",
        "own_input",
        "own_checksum",
        "system",
        "tree",
        "declared_unused",
    ),  # fmt: skip
}


# Forms validation is NOT claimed to catch with the planted class's reason, and what happens
# to them (measured by benchmarks/planted_candidates.py, reported in docs/synthesis.md).
UNCLAIMED: dict[Defect, tuple[str, ...]] = {
    Defect.HIDDEN_REQUIREMENT: ("transform",),  # a rule with no literal: upper-case output
    Defect.SOLUTION_ARTIFACT: ("tmp_artifact",),  # outside the workdir: not in the profile
    Defect.VACUOUS_ASSERTION: ("system_fact",),  # guarded: passes whenever the parent's work does
    Defect.FLAKY_CHECK: ("proc_stat",),  # chance the static check cannot see
    Defect.FREE_REWARD: ("tool_present",),  # true even after a wipe: vacuous, not free
    Defect.DEPENDENCY_MISSING: (),  # declared_unused is caught by the data-flow probe now
}


def _unclaimed(defect: Defect, parent: Parent, rng: random.Random, tag: str) -> Planted:
    b = _base(parent, rng, tag)
    outdir = b.out.rsplit("/", 1)[0]
    form = UNCLAIMED[defect][0]
    t = f"test_{tag}_{rng.choice(('aux', 'more', 'also'))}"
    if defect == Defect.HIDDEN_REQUIREMENT:
        up = f"{outdir}/{rng.choice(WORDS)}_{tag}.upper"
        steps = [f"mkdir -p {outdir}", b.step, f"tr a-z A-Z < {b.src} > {up}"]
        test = f"\n\ndef {t}():\n    src = open({b.src!r}).read()\n" \
            f"    assert open({up!r}).read() == src.upper()\n"  # fmt: skip
        ext = _extension(b, steps=steps, tests=b.test + test,
                         text=f"{b.phrase} Also copy `{b.src}` to `{up}`.")  # fmt: skip
        return Planted(defect, form, replace(ext, creates=[b.out, up]), defect.value, t)
    if defect == Defect.SOLUTION_ARTIFACT:
        path = f"/tmp/{rng.choice(WORDS)}_{tag}.log"
        steps = [f"mkdir -p {outdir}", b.step, f"echo done > {path}"]
        test = f"\n\ndef {t}():\n    assert open({path!r}).read() == 'done\\n'\n"
        return Planted(defect, form, _extension(b, steps=steps, tests=b.test + test),
                       defect.value, path)  # fmt: skip
    if defect == Defect.VACUOUS_ASSERTION:
        return _extra_test(parent, rng, tag, "    import os\n    assert os.path.isdir('/')\n",
                           defect, form, defect.value)  # fmt: skip
    if defect == Defect.FLAKY_CHECK:
        body = "    assert int(open('/proc/self/stat').read().split()[21]) % 2 == 0\n"
        return _extra_test(parent, rng, tag, body, defect, form, defect.value)
    if defect == Defect.FREE_REWARD:
        test = f"\n\ndef {t}():\n    import shutil\n    assert shutil.which('sh')\n"
        ext = _extension(b, tests=b.test + test, consumes=[])
        return Planted(defect, form, ext, defect.value, t)
    raise ValueError(f"no unclaimed form of {defect.value}")


def plant(defect: Defect, parent: Parent, rng: random.Random, form: str | None = None,
          tag: str = "r1") -> Planted:  # fmt: skip
    """One planted candidate of `defect` on `parent` (form drawn from CLAIMED if not given;
    a form of UNCLAIMED builds one of the known misses)."""
    form = form or rng.choice(CLAIMED[defect])
    if form in UNCLAIMED[defect]:
        return _unclaimed(defect, parent, rng, tag)
    if defect == Defect.HIDDEN_REQUIREMENT:
        return _hidden(parent, rng, tag, form)
    if defect == Defect.SOLUTION_ARTIFACT:
        return _artifact(parent, rng, tag, form)
    if defect == Defect.VACUOUS_ASSERTION:
        return _extra_test(parent, rng, tag, VACUOUS_FORMS[form], defect, form,
                           "vacuous_assertion")  # fmt: skip
    if defect == Defect.FLAKY_CHECK:
        return _flaky(parent, rng, tag, form)
    if defect == Defect.FREE_REWARD:
        return _free(parent, rng, tag, form)
    return _independent(parent, rng, tag, form)
