"""Static evidence about a task: what its verifier asserts, compared with what the task
states and what its reference solution spells out. Nothing runs here; every function is pure
over a `Task` and returns typed findings (`audit.verdict.Finding`).

- hidden requirement: every literal the verifier asserts on (`tasks.literals`) gets a
  verdict: stated (where, how), derived (not stated, and the reference solution computes
  it), unverified (no solution to tell), or hidden: a path, key or header not stated
  exactly, or any other literal that the reference solution spells out although nothing
  given to the agent states it (the author knew it; the agent cannot);
- test leakage: verifier code, an expected-output file, or an expected value visible to the
  agent, judged in context (a copy, a file named like an answer, a labelled line, a file
  whose whole content is the value), at any length;
- solution shortcut: solve.sh spells out a computed-looking value the verifier compares
  against and nothing given states (the dynamic evidence is in `audit.perturbation`);
- flaky verifier: unseeded randomness or network use (wall-clock reads are `wall_clock`);
- solution reads tests: the reference solution refers to /tests, which it never has.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from audit.channels import ChannelLimits, channel_views
from audit.formats import format_problem
from audit.verdict import Code, Finding, Source
from tasks.hacks import instruction_names, program_index
from tasks.literals import (
    CONVENTION_KINDS,
    CoverageVerdict,
    Literal,
    LiteralKind,
    expected_output_files,
    task_literal_coverage,
)
from tasks.literals.coverage import image_paths, regex_requirements
from tasks.literals.model import decode
from tasks.literals.python import imported_module, parse_python
from tasks.model import Task

RUNNER_NAME = "run_checks.py"
ANSWER_KINDS = frozenset(
    {LiteralKind.NUMBER, LiteralKind.STRING, LiteralKind.LINE, LiteralKind.NAME}
)
ANSWERISH_FILE = re.compile(r"expect|answer|solution|golden|correct|hint|cheat|oracle", re.I)
_LABEL_WORD = r"\b(?:expected|answers?|solutions?|correct|golden)\b(?!\.\w)"
_HEX_RE = re.compile(r"^[0-9a-f]{7,64}$")
_NUM_RE = re.compile(r"^[-+]?\d+(\.\d+)?$")
RANDOM_FNS = frozenset(
    {
        "random",
        "randint",
        "choice",
        "choices",
        "shuffle",
        "sample",
        "uniform",
        "randrange",
        "getrandbits",
        "gauss",
        "triangular",
        "betavariate",
        "expovariate",
    }
)
# A host the verifier reaches that is not this machine: its verdict depends on a network.
_REMOTE_URL = re.compile(
    r"\b(?:https?|ftp)://(?!(?:localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[::1\])(?:[:/]|\b))[\w.-]+"
)


def normalize(text: str) -> str:
    return " ".join(text.split())


def verifier_texts(task: Task) -> dict[str, str]:
    """Text files of tests/ except the shared assertion runner: {relative path: text}."""
    out = {}
    for name, data in sorted(task.verifier.items()):
        text = decode(data)
        if text is not None and posixpath.basename(name) != RUNNER_NAME:
            out[name] = text
    return out


def visible_texts(task: Task) -> dict[str, str]:
    """What the agent can read before it starts: the instruction and the environment's text
    files (the Dockerfile too: what its RUN steps write ends up in the image)."""
    out = {"instruction.md": task.instruction}
    for name, data in sorted(task.environment.files.items()):
        text = decode(data) if len(data) <= 5_000_000 else None
        if text is not None:
            out[f"environment/{name}"] = text
    return out


_GIT_TASK = re.compile(r"\bgit\b|\brepo(?:sitory)?\b|\bcommits?\b|\bbranch(?:es)?\b", re.I)


def container_of(where: str) -> str:
    """The file (or repository) a channel view comes from: `environment/app/a.tar!x` ->
    `environment/app/a.tar`, `environment/app/.git!blob:x` -> `environment/app/.git`."""
    return where.split("!", 1)[0]


def is_channel(where: str) -> bool:
    """A view of a hidden channel: an archive member, a git object, a decoded file, or a
    file the environment's build wrote (`image:/path`)."""
    return "!" in where or where.startswith("image:")


def channel_kind(where: str) -> str:
    """What a channel view is, for people: `a git object`, `a pickle file`, ..."""
    if "!" not in where:
        return "a file the build wrote"
    tail = where.split("!", 1)[1]
    if ".git" in where.split("!", 1)[0].split("/"):
        return "a git object"
    if tail.startswith(("pickle", "sqlite", "pyc")):
        return f"a {tail} file"
    if tail.startswith(("utf-16", "latin-1", "base64", "strings")):
        return f"{tail.split('@')[0]} text"
    return "an archive member"


def whole_field(value: str, text: str) -> bool:
    """`value` is a whole line (a field of a decoded record) of `text`, and long enough to
    be an answer rather than a coincidence: a number of >= 2 digits, a word of >= 3."""
    v = value.strip()
    if len(v.replace(".", "").lstrip("-")) < (2 if v[:1].isdigit() or v[:1] == "-" else 3):
        return False
    if "\n" in v:
        return normalize(v) in normalize(text)
    return any(ln.strip() == v for ln in text.splitlines())


def channel_inputs(task: Task) -> set[str]:
    """Archives and repositories the instruction hands the agent (named by image path, file
    name, or, for a repository, its directory): their members are the agent's data."""
    image = image_paths(task.environment.files, task.environment.workdir)
    instruction = task.instruction
    out = set()
    for name in task.environment.files:
        parts = name.split("/")
        if ".git" in parts:  # a repository is data when the task is about git
            if _GIT_TASK.search(instruction):
                out.add("/".join(parts[: parts.index(".git") + 1]))
        elif decode(task.environment.files[name]) is None:
            base = posixpath.basename(name)
            if _bounded_in(image.get(name, name), instruction) or (
                len(base) >= 5 and _bounded_in(base, instruction)
            ):
                out.add(name)
    return out


def given_containers(task: Task) -> set[str]:
    """`channel_inputs` as the `where` names of views (`environment/...`)."""
    return {f"environment/{n}" for n in channel_inputs(task)}


def channel_texts(task: Task, limits: ChannelLimits | None = None) -> dict[str, str]:
    """Views of the environment's non-text channels (`audit.channels`): archive members,
    git objects, serialized and compiled files, other encodings, base64 runs."""
    files = {f"environment/{n}": d for n, d in task.environment.files.items()}
    return channel_views(files, limits).views


def built_texts(built: Mapping[str, bytes], limits: ChannelLimits | None = None) -> dict[str, str]:
    """Views of the files a built environment holds beyond the task's own (`image:<path>`):
    text files as they are, the rest through `audit.channels`."""
    files = {f"image:{p}": d for p, d in built.items()}
    out = {w: t for w, d in files.items() if (t := decode(d)) is not None and "/.git/" not in w}
    return out | channel_views(files, limits).views


def given_view(where: str, task: Task) -> bool:
    """A view of data the task hands over: a built file or container whose image path the
    instruction names, or a repository when the task is about git."""
    root = container_of(where).removeprefix("image:")
    if ".git" in root.split("/") or "/.git/" in root:
        return _GIT_TASK.search(task.instruction) is not None
    base, instruction = posixpath.basename(root), task.instruction
    if _bounded_in(root, instruction) or (len(base) >= 5 and _bounded_in(base, instruction)):
        return True
    wd = task.environment.workdir.rstrip("/") or "/"
    parent = posixpath.dirname(root)
    while parent not in ("/", "", wd):  # under a directory the instruction hands over
        if _bounded_in(parent, instruction):
            return True
        parent = posixpath.dirname(parent)
    return False


def readable_texts(task: Task) -> dict[str, str]:
    """Everything the agent can read before it starts: `visible_texts` and the views of
    the environment's non-text channels."""
    return visible_texts(task) | channel_texts(task)


def solution_text(task: Task) -> str:
    return "\n".join(decode(b) or "" for b in (task.solution or {}).values())


@dataclass
class VerifierFacts:
    """What a verifier asserts and how it may misbehave, as read from its files."""

    coverage: list[CoverageVerdict] = field(default_factory=list)
    assert_sources: list[str] = field(default_factory=list)
    """The verifier's checks in its own words (assert conditions and comparisons, >= 20
    characters, whitespace collapsed)."""
    test_names: list[str] = field(default_factory=list)
    nondeterminism: list[str] = field(default_factory=list)
    wall_clock: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def literals(self) -> list[Literal]:
        return [v.literal for v in self.coverage]

    @property
    def paths(self) -> set[str]:
        return {lit.value for lit in self.literals if lit.kind == LiteralKind.PATH}

    @property
    def checked_items(self) -> int:
        return len(self.coverage)


# ---- reading the verifier's risks ----------------------------------------------------------


_FETCHES = frozenset({"get", "post", "put", "delete", "head", "patch", "request", "urlopen",
                      "Request", "urlretrieve", "create_connection", "connect"})  # fmt: skip


def _python_risks(name: str, text: str, facts: VerifierFacts) -> None:
    try:
        tree = parse_python(text)
    except SyntaxError:
        return
    seeded = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "seed"
        and (getattr(n.func.value, "id", "") or imported_module(n.func.value)) == "random"
        for n in ast.walk(tree)
    )
    checks = _has_checks(name, text)  # a test file, not a pristine copy of an input
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            facts.test_names.append(node.name)
        elif isinstance(node, ast.Assert | ast.Compare) and checks:
            # what the verifier checks, in its own words: asserts' conditions, comparisons
            seg = ast.get_source_segment(text, node.test if isinstance(node, ast.Assert) else node)
            if seg and len(normalize(seg)) >= 20 and "__name__" not in seg:
                facts.assert_sources.append(normalize(seg))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = getattr(node.func.value, "id", "") or imported_module(node.func.value)
            attr, where = node.func.attr, f"{name}:{node.lineno}"
            if attr in _FETCHES and node.args:  # a request to a host that is not this one
                url = ast.get_source_segment(text, node.args[0]) or ""
                m = _REMOTE_URL.search(url)
                if m:
                    facts.network.append(f"{where}: requests {m.group(0)}")
            if owner == "random" and attr in RANDOM_FNS and not seeded:
                facts.nondeterminism.append(f"{where}: unseeded random.{attr}()")
            elif (owner == "random" and attr == "SystemRandom") or owner == "secrets":
                facts.nondeterminism.append(f"{where}: {owner}.{attr}() draws OS entropy")
            elif (owner, attr) in (("uuid", "uuid4"), ("os", "urandom")):
                facts.nondeterminism.append(f"{where}: {owner}.{attr}()")
            elif (owner, attr) in (("time", "time"), ("time", "time_ns"), ("time", "localtime")):
                facts.wall_clock.append(f"{where}: {owner}.{attr}() reads the wall clock")
            elif attr in ("now", "utcnow", "today") and owner in ("datetime", "date"):
                facts.wall_clock.append(f"{where}: {owner}.{attr}() reads the wall clock")


_SHELL_RANDOM = re.compile(r"(?<!\w)RANDOM\b|/dev/u?random|\bshuf\b(?!.*--random-source)")
_SHELL_CLOCK = re.compile(r"\$\(\s*date\b|`date\b|\bdate\s+\+|\$\{?(EPOCHSECONDS|SECONDS)\b")
_SHELL_NET = re.compile(r"\b(curl|wget|nc|ncat|telnet|ssh)\b.*" + _REMOTE_URL.pattern)
# Harbor's stock test.sh installs its test runner from the network before the tests run:
# the verdict does not depend on it (a failed install is an infrastructure failure).
_RUNNER_INSTALL = re.compile(
    r"astral\.sh/uv|pip3? install|apt(-get)? (install|update)|uv (pip|run)"
)


def _shell_risks(name: str, text: str, facts: VerifierFacts) -> None:
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        if _SHELL_RANDOM.search(code):
            facts.nondeterminism.append(f"{name}:{i}: {code.strip()[:80]}")
        if _SHELL_CLOCK.search(code):
            facts.wall_clock.append(f"{name}:{i}: {code.strip()[:80]}")
        if _SHELL_NET.search(code) and not _RUNNER_INSTALL.search(code):
            facts.network.append(f"{name}:{i}: {code.strip()[:80]}")


def verifier_facts(task: Task) -> VerifierFacts:
    """Per-literal coverage of the verifier, and its sources of nondeterminism."""
    facts = VerifierFacts(coverage=task_literal_coverage(task))
    texts = verifier_texts(task)
    facts.text = "\n".join(texts.values())
    for name, text in texts.items():
        if name.endswith(".py"):
            _python_risks(name, text, facts)
        elif name.endswith((".sh", ".bash")) or text.startswith("#!"):
            _shell_risks(name, text, facts)
    return facts


# ---- hidden requirements ------------------------------------------------------------------


def answer_like(value: str) -> bool:
    """A value an agent computes rather than is told: a long number or a hex digest."""
    v = value.strip()
    if _HEX_RE.match(v) and any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
        return True
    if _NUM_RE.match(v):
        digits = v.lstrip("+-").replace(".", "").lstrip("0")
        return len(digits) >= 3 or "." in v
    return False


def spelled(lit: Literal, text: str) -> bool:
    """Does `text` (a solution) spell the literal out, exactly and case-sensitively?"""
    v = lit.value.strip()
    if not v or not text:
        return False
    if lit.kind == LiteralKind.NUMBER:
        try:
            value = float(v)
        except ValueError:
            return False
        for m in re.finditer(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w]|\.\d)", text):
            if float(m.group(0)) == value:
                return True
        return False
    if lit.kind == LiteralKind.FORMAT:  # its literal fragments, each written out
        reqs = regex_requirements(v)
        flags = re.IGNORECASE if lit.ignore_case else 0
        return bool(reqs) and all(
            any(re.search(re.escape(alt), text, flags) for alt in alts) for alts in reqs or []
        )
    parts = [p.strip() for p in v.split("\u2026") if p.strip()]
    flags = re.IGNORECASE if lit.ignore_case else 0
    for p in parts:
        pre = r"(?<![\w])" if p[:1].isalnum() else ""
        post = r"(?![\w])" if p[-1:].isalnum() else ""
        if not re.search(pre + re.escape(p) + post, text, flags):
            return False
    return bool(parts)


def _covered_evidence(v: CoverageVerdict) -> str:
    return f"{v.literal.kind.value} asserted at {v.literal.where}; stated in {v.where} ({v.how})"


def literal_findings(task: Task, facts: VerifierFacts, shortcut_items: set[str]) -> list[Finding]:
    """The per-literal verdicts: one finding per asserted literal (see the module doc).
    Literals the static shortcut check already claims are not also hidden requirements."""
    solution = solution_text(task) if task.solution is not None else None
    out = []
    for v in facts.coverage:
        lit = v.literal
        head = f"{lit.kind.value} asserted at {lit.where}; not stated in the instruction or "
        head += "the environment (exact, case-sensitive)"
        near = f"; nearest: {v.near}" if v.near else ""
        if v.covered:
            out.append(
                Finding(code=Code.LITERAL_STATED, item=lit.value, evidence=_covered_evidence(v))
            )
        elif lit.kind in CONVENTION_KINDS:
            out.append(Finding(code=Code.HIDDEN_REQUIREMENT, item=lit.value, evidence=head + near))
        elif solution is None:
            why = head + "; no reference solution to tell a computed value from a hidden one"
            out.append(Finding(code=Code.LITERAL_UNVERIFIED, item=lit.value, evidence=why + near))
        elif lit.value in shortcut_items:
            continue
        elif spelled(lit, solution):
            why = head + "; the reference solution spells it out, so the author knew it" + near
            out.append(Finding(code=Code.HIDDEN_REQUIREMENT, item=lit.value, evidence=why))
        else:
            why = head + "; the reference solution never spells it: a value it computes"
            out.append(Finding(code=Code.LITERAL_DERIVED, item=lit.value, evidence=why))
    return out


def hidden_literals(facts: VerifierFacts, findings: list[Finding]) -> list[Literal]:
    """The literals behind the hidden-requirement findings (for probing and repair)."""
    hidden = {f.item for f in findings if f.code == Code.HIDDEN_REQUIREMENT}
    return [lit for lit in facts.literals if lit.value in hidden]


def alignment_share(findings: list[Finding]) -> float:
    """Share of asserted literals that are stated or derived (1.0 when there are none)."""
    counted = [
        f
        for f in findings
        if f.code in (Code.LITERAL_STATED, Code.LITERAL_DERIVED, Code.HIDDEN_REQUIREMENT)
        or f.code == Code.LITERAL_UNVERIFIED
    ]
    if not counted:
        return 1.0
    bad = sum(f.code in (Code.HIDDEN_REQUIREMENT, Code.LITERAL_UNVERIFIED) for f in counted)
    return 1.0 - bad / len(counted)


# ---- leakage --------------------------------------------------------------------------------


def labelled_line(value: str, text: str) -> str | None:
    """A line of `text` that labels `value` as the answer: `expected: 300`, `answer = alice`,
    `the correct total is 42` (a label word, then `:`/`=`/`is`/`are`, then the value)."""
    pre = r"(?<![\w.])" if value[:1].isalnum() else ""
    post = r"(?![\w]|\.\d)" if value[-1:].isalnum() else ""
    rx = re.compile(
        _LABEL_WORD
        + r"[^\n]{0,30}?(?:[:=]|\bis\b|\bare\b)\s*[\"'`(\[{]?\s*"
        + pre
        + re.escape(value)
        + post,
        re.I,
    )
    m = rx.search(text)
    if m is None:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start : end if end >= 0 else len(text)].strip()


def _lines(text: str, min_len: int = 12) -> list[str]:
    out = []
    for ln in text.splitlines():
        s = normalize(ln)
        if len(s) >= min_len and not s.startswith(("#", "import ", "from ", '"""')):
            out.append(s)
    return out


def _bounded_in(value: str, text: str) -> bool:
    pre = r"(?<![\w.])" if value[:1].isalnum() else ""
    post = r"(?![\w]|\.\d)" if value[-1:].isalnum() else ""
    return re.search(pre + re.escape(value) + post, text) is not None


def names_base(base: str, path: str, text: str) -> bool:
    """Does `text` name the file `path` by its distinctive name `base`? A mention that is the
    tail of another absolute path (`/app/unique.txt` for `/app/data/.expected/unique.txt`)
    names that other file, not this one."""
    pre = r"(?<![\w.])" if base[:1].isalnum() else ""
    post = r"(?![\w]|\.\d)" if base[-1:].isalnum() else ""
    for m in re.finditer(pre + re.escape(base) + post, text):
        head = re.search(r"[\w./~$-]*$", text[: m.start()])
        whole = (head.group(0) if head else "") + base
        if not whole.startswith("/") or whole == path:
            return True
    return False


def declared_inputs(task: Task) -> set[str]:
    """Environment files the instruction names (by image path, workdir-relative path or a
    distinctive file name): the data the agent is told to work from."""
    image = image_paths(task.environment.files, task.environment.workdir)
    out = set()
    instruction = task.instruction
    for name in task.environment.files:
        if name == "Dockerfile":
            continue
        base = posixpath.basename(name)
        candidates = [image.get(name, ""), name.removeprefix("app/")]
        if any(c and _bounded_in(c, instruction) for c in candidates) or (
            len(base) >= 5 and "." in base and names_base(base, image.get(name, ""), instruction)
        ):
            out.add(name)
    return out


def under_named_dir(path: str, task: Task) -> bool:
    """Is `path` inside a directory the instruction names (absolute or relative to the
    working directory, the working directory itself aside)? Its files are the agent's data
    even when no one names them one by one (`the logs in /data/logs/`)."""
    wd = task.environment.workdir.rstrip("/")
    d = posixpath.dirname(path)
    while d not in ("", "/", wd):
        forms = [d] + ([d[len(wd) + 1 :]] if d.startswith(wd + "/") else [])
        if any(
            re.search(rf"(?<![\w/.-]){re.escape(f)}/?(?![\w.-])", task.instruction) for f in forms
        ):
            return True
        d = posixpath.dirname(d)
    return False


def broken_inputs(task: Task, facts: VerifierFacts) -> list[Finding]:
    """Data files the task gives by name (the instruction or the verifier names each) that do
    not begin as the format their name claims (`audit.formats`): a `.db` that is prose, a
    `.npy` that is the script meant to make it. A file the Dockerfile's build steps name is
    left alone (the build may make it what it claims to be)."""
    image = image_paths(task.environment.files, task.environment.workdir)
    declared = declared_inputs(task)
    build = "\n".join(
        ln for ln in task.environment.files.get("Dockerfile", b"").decode("utf-8", "replace")
        .splitlines() if not ln.lstrip().upper().startswith(("COPY", "ADD"))
    )  # fmt: skip
    out = []
    for name, data in sorted(task.environment.files.items()):
        path = image.get(name, "")
        # named one by one: a directory of stand-ins (photos sorted by their names) is not
        given = name in declared or (path and path in facts.paths)
        if not given or posixpath.basename(name) in build:
            continue
        why = format_problem(name, data)
        if why is not None:
            out.append(Finding(code=Code.BROKEN_INPUT, item=path or name, evidence=why))
    return out


def _has_checks(name: str, text: str) -> bool:
    if name.endswith(".py"):
        return (
            "def test_" in text
            or re.search(r"^\s*assert\b", text, re.M) is not None
            or re.search(r"\bCHECKS\b|\bdef check_", text) is not None
        )
    return bool(re.search(r"\b(grep|diff|cmp|test|jq)\b|\[\[? ", text))


def test_leakage(task: Task, facts: VerifierFacts) -> list[Finding]:
    """Verifier code, expected-output files or expected values visible to the agent."""
    out: list[Finding] = []
    visible = readable_texts(task)
    texts = verifier_texts(task)
    flat = {w: normalize(t) for w, t in visible.items()}
    line_sets = {w: set(_lines(t)) for w, t in visible.items()}
    seen: set[tuple[str, str]] = set()

    def leak(item: str, where: str, evidence: str) -> None:
        if (item, where) not in seen:
            seen.add((item, where))
            out.append(Finding(code=Code.TEST_LEAKAGE, item=item, evidence=evidence))

    # verifier checks and expected-output files, copied whole or in large part (a verifier
    # file without checks, such as a pristine copy of an input, is the agent's data too)
    expected = set(expected_output_files(task.verifier))
    tools = {f"environment/{n}" for n in declared_inputs(task)}  # given to the agent by name
    for name, text in texts.items():
        if name not in expected and not _has_checks(name, text):
            continue
        own = _lines(text)
        if len(own) < 2 and len(normalize(text)) < 12:
            continue
        for where, lines in line_sets.items():
            if where in tools and name not in expected:
                continue  # the verifier reuses a tool the instruction hands the agent
            hits = [ln for ln in own if ln in lines]
            whole = len(normalize(text)) >= 12 and normalize(text) in flat[where]
            if whole or (len(hits) >= 3 and len(hits) >= 0.5 * len(own)):
                share = "all" if whole else f"{len(hits)}/{len(own)} lines"
                leak(f"tests/{name}", where, f"{share} of tests/{name} visible in {where}")
    asserts = list(dict.fromkeys(facts.assert_sources))
    for where, text in flat.items():
        if where in tools:
            continue
        hit = [a for a in asserts if a in text]
        if hit and len(hit) >= min(2, len(asserts)):
            what = f"{len(hit)} check(s), e.g. {hit[0][:60]!r}"
            leak("assertions", where, f"{where} contains the verifier's {what}")
    # expected values, judged in context
    inputs = {f"environment/{n}" for n in declared_inputs(task)}
    inputs |= {w for w in visible if container_of(w) in given_containers(task)}
    answers = [
        v.literal
        for v in facts.coverage
        if v.literal.kind in ANSWER_KINDS and v.where != "instruction.md"
        and not (v.where or "").startswith("alternative")
    ]  # fmt: skip
    for value, where, why in value_leaks(answers, visible, inputs):
        leak(value, where, why)
    return out


def value_leaks(
    answers: list[Literal], visible: Mapping[str, str], inputs: set[str]
) -> list[tuple[str, str, str]]:
    """(value, where, why) of each expected value found where the agent reads it, in a
    context that marks it as the answer: a file named like one, a file holding the value
    and nothing else, a line labelling it, or a whole field of a hidden channel (an archive
    member, a git object, a decoded or built file) the instruction never names. `inputs`:
    the `where` names of data the agent is told to read (values there are its data)."""
    out = []
    for where, text in visible.items():
        if where == "instruction.md" or "Dockerfile" in where:
            continue
        name = where.removeprefix("environment/").removeprefix("image:")
        content = text.strip()
        for lit in answers:
            value = lit.value.strip()
            if not value or not _bounded_in(value, text):
                continue
            if ANSWERISH_FILE.search(posixpath.basename(name)):
                why = f"{where} (named like an answer) holds the expected value {value!r}"
            elif content == value and where not in inputs:
                why = f"{where} holds exactly the expected value {value!r} and nothing else"
            elif (line := labelled_line(value, text)) is not None:
                why = f"{where} labels the expected value: {line[:100]!r}"
            elif is_channel(where) and where not in inputs and whole_field(value, text):
                why = f"{where} ({channel_kind(where)} the instruction never names) holds "
                why += f"the expected value {value!r} as a whole field"
            else:
                continue
            out.append((value, where, f"{why} (asserted at {lit.where})"))
    return out


# ---- shortcuts, flakiness, solution risks ---------------------------------------------------

_LITERAL_WRITE = re.compile(
    r"^\s*(?:echo|printf)\s+(?:-[a-z]+\s+)?(['\"]?)([-+]?\d[\d.]*)(?:\\n)?\1\s*>>?\s*(\S+)\s*$"
)


def python_tree(text: str) -> ast.Module | None:
    """The syntax tree of a Python program, or None when it does not parse (pure)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


MIN_PAIRS = 3  # an expected mapping's entries, fewer of which a solution spells by chance


def _constant_literals(text: str, kinds: tuple[type, ...]) -> list[tuple[int, object]]:
    """(line, value) of every constant literal of node `kinds` (dict, list, tuple) with at
    least MIN_PAIRS elements in a Python program (pure); none when it does not parse."""
    tree = python_tree(text)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, kinds) or not isinstance(node, ast.expr):
            continue
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
        if len(elements) >= MIN_PAIRS:
            try:
                out.append((node.lineno, ast.literal_eval(node)))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return out


def _scalar(v: object) -> bool:
    return isinstance(v, (int, float, str)) and not isinstance(v, bool)


def expected_mappings(text: str) -> list[tuple[int, dict[str, str]]]:
    """The mappings a Python test module spells as a whole (pure): (line, {key: value}) for
    every dict literal of at least MIN_PAIRS entries whose keys are strings and whose values
    are numbers or strings (an expected summary, `{"auth": 5, "billing": 4, ...}`)."""
    return [
        (line, {k: str(v) for k, v in value.items()})
        for line, value in _constant_literals(text, (ast.Dict,))
        if isinstance(value, dict)
        and all(isinstance(k, str) and k and _scalar(v) for k, v in value.items())
    ]


def expected_sequences(text: str) -> list[tuple[int, list[str]]]:
    """The sequences a Python test module spells as a whole (pure): (line, items) for every
    list or tuple literal of at least MIN_PAIRS numbers or strings, 12 characters together
    or more (an expected list of ids, `["C004", "C008", "C014", ...]`)."""
    out = []
    for line, value in _constant_literals(text, (ast.List, ast.Tuple)):
        if not isinstance(value, (list, tuple)):
            continue
        items = [str(v) for v in value if _scalar(v)]
        if len(items) == len(value) and all(items) and sum(map(len, items)) >= 12:
            out.append((line, items))
    return out


def spells_run(items: list[str], text: str) -> bool:
    """Does `text` spell `items` in order, one after the other with only separators (quotes,
    commas, bars, spaces: at most 6 characters) between them?"""
    sep = r"[^\w.]{1,6}"
    pattern = r"(?<![\w.])" + sep.join(re.escape(i) for i in items) + r"(?![\w]|\.\d)"
    return re.search(pattern, text) is not None


def spells_pair(key: str, value: str, text: str) -> bool:
    """Does `text` pair `key` with `value` (`"key": value`, `key = value`, `key: "value"`)?"""
    pattern = (rf"(?<![\w.-])['\"]?{re.escape(key)}['\"]?\s*[:=]\s*['\"]?"
               rf"{re.escape(value)}['\"]?(?![\w.]|\.\d)")  # fmt: skip
    return re.search(pattern, text) is not None


def spelled_mappings(task: Task, script: str) -> list[Finding]:
    """solve.sh spells a whole mapping the tests expect, every entry paired as the tests
    pair it, which nothing given to the agent spells: the answer carried in as a table
    (keyed by anything: the input's checksum, its name), not computed. A mapping whose
    values the instruction states (a configuration it asks for) is no shortcut."""
    given = "\n".join([task.instruction, *readable_texts(task).values()])
    out = []
    for name, text in verifier_texts(task).items():
        if not name.endswith(".py"):
            continue
        for line, mapping in expected_mappings(text):
            if not all(spells_pair(k, v, script) for k, v in mapping.items()):
                continue
            stated = [
                k
                for k, v in mapping.items()
                if spells_pair(k, v, given) or _bounded_in(v, task.instruction)
            ]
            if len(stated) * 2 >= len(mapping):
                continue
            why = f"solve.sh spells the whole mapping the tests expect at tests/{name}:{line} "
            why += f"({len(mapping)} entries, {len(stated)} of them given to the agent)"
            item = ", ".join(f"{k}={v}" for k, v in list(mapping.items())[:4])
            out.append(Finding(code=Code.SOLUTION_SHORTCUT, item=item, evidence=why))
        for line, items in expected_sequences(text):
            if not spells_run(items, script) or spells_run(items, given):
                continue  # a run the agent can read as it stands (a header line) is given
            stated = [i for i in items if _bounded_in(i, task.instruction)]
            if len(stated) * 2 >= len(items):
                continue
            why = f"solve.sh spells the whole sequence the tests expect at tests/{name}:{line}, "
            why += f"in its order ({len(items)} items, {len(stated)} of them in the instruction)"
            out.append(
                Finding(code=Code.SOLUTION_SHORTCUT, item=", ".join(items[:4]), evidence=why)
            )
    return out


def solution_shortcuts(task: Task, facts: VerifierFacts) -> list[Finding]:
    """solve.sh spells out a computed-looking value the verifier compares against, which
    neither the instruction nor the environment gives, or a whole mapping the tests expect
    (`spelled_mappings`) (static evidence only)."""
    if task.solution is None:
        return []
    script = solution_text(task)
    out: list[Finding] = spelled_mappings(task, script)
    for v in facts.coverage:
        lit = v.literal
        if v.covered or lit.kind not in ANSWER_KINDS or not answer_like(lit.value):
            continue
        if spelled(lit, script):
            why = f"solve.sh spells out {lit.value!r}, the value asserted at {lit.where}, "
            why += "which nothing given to the agent states"
            out.append(Finding(code=Code.SOLUTION_SHORTCUT, item=lit.value, evidence=why))
    wd = task.environment.workdir
    for line in script.splitlines():
        m = _LITERAL_WRITE.match(line)
        if m is None:
            continue
        value, target = m.group(2), m.group(3).strip("'\"")
        path = posixpath.normpath(posixpath.join(wd, target))
        named = path in facts.paths or posixpath.basename(path) in facts.text
        if named and not _bounded_in(value, task.instruction) and len(value.strip(".")) >= 2:
            why = f"solve.sh writes the literal {value!r} to {path}, which the verifier checks"
            if not any(f.item == value for f in out):
                out.append(Finding(code=Code.SOLUTION_SHORTCUT, item=value, evidence=why))
    return out


def flaky_risks(facts: VerifierFacts) -> list[Finding]:
    """Nondeterminism and network use (flaky) and wall-clock reads (softer), statically."""
    out = [
        Finding(
            code=Code.FLAKY_VERIFIER, item=d.split(":", 1)[0], evidence=f"nondeterministic: {d}"
        )
        for d in facts.nondeterminism
    ]
    out += [
        Finding(code=Code.FLAKY_VERIFIER, item=d.split(" ", 1)[0], evidence=f"network: {d}")
        for d in facts.network
    ]
    out += [
        Finding(code=Code.WALL_CLOCK, item=d.split(":", 1)[0], evidence=d) for d in facts.wall_clock
    ]
    return out


def solution_risks(task: Task) -> list[Finding]:
    """No reference solution, or one that refers to /tests (it never has them); races in the
    solution's and the verifier's shell scripts (`races`)."""
    if task.solution is None:
        return [Finding(code=Code.NO_SOLUTION, evidence="task has no reference solution")]
    out = [
        Finding(code=Code.RACE, item=where, evidence=why)
        for part, files in (("solution", task.solution), ("tests", task.verifier))
        for name, data in sorted(files.items())
        if (text := decode(data)) is not None
        for where, why in (
            python_races(f"{part}/{name}", text)
            if name.endswith(".py")
            else races(f"{part}/{name}", text)
            if name.endswith((".sh", ".bash")) or text.startswith("#!/bin/")
            else []
        )
    ]
    if re.search(r"(?<![\w.])/tests\b", solution_text(task)):
        out.append(
            Finding(
                code=Code.SOLUTION_READS_TESTS, item="/tests", evidence="solve.sh refers to /tests"
            )
        )
    return out


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_BACKGROUND = re.compile(r"(?<![&|>])&(?![&>])\s*(?:$|[;#)]|\w)")
_WAIT = re.compile(r"(?<![\w-])wait\b")
_ARITH = re.compile(r"\$?\(\((?:[^()]|\([^()]*\))*\)\)")
_SLEEP = re.compile(r"(?<![\w-])sleep\s+(\S+)")


def shell_lines(text: str) -> list[tuple[int, str]]:
    """A shell script's lines outside here-documents (whose text is another program's, where
    `&` is an operator of that language), comments dropped: (line number, code)."""
    out, end = [], None
    for i, line in enumerate(text.splitlines(), 1):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        code = "" if line.lstrip().startswith("#") else re.sub(r"\s#.*$", "", line)
        out.append((i, code))
        if (m := _HEREDOC.search(code)) is not None:
            end = m.group(2)
    return out


def races(name: str, text: str) -> list[tuple[str, str]]:
    """Races a shell script sets up (pure): (`name:line`, why). A job sent to the background
    in a script that never `wait`s for it; a `sleep` after it (the script's way to wait);
    a sleep of a random length."""
    lines = shell_lines(text)
    out = []
    waits = any(_WAIT.search(code) for _, code in lines)
    # `&` inside an arithmetic expansion is a bitwise and, not a job
    jobs = [(i, code) for i, code in lines if _BACKGROUND.search(_ARITH.sub("0", code))]
    if jobs and not waits:
        i, code = jobs[0]
        sleeps = [j for j, c in lines if j > i and _SLEEP.search(c)]
        how = f"; line {sleeps[0]} sleeps instead" if sleeps else ""
        out.append(
            (f"{name}:{i}", f"a background job is never waited for: {code.strip()[:80]}{how}")
        )
    for i, code in lines:
        m = _SLEEP.search(code)
        if m is not None and "RANDOM" in m.group(1):
            out.append((f"{name}:{i}", f"a random delay: {code.strip()[:80]}"))
    return out


_WAITS = {"wait", "communicate", "poll", "join", "wait_for", "waitpid"}
_STARTS = {"Popen", "Thread", "Process", "create_subprocess_exec", "create_subprocess_shell"}


def _call_kind(call: ast.Call) -> str | None:
    """start (a process or thread that runs on), wait (for one), sleep, or None."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name == "sleep":
        return "sleep"
    if name in _WAITS:
        return "wait"
    if name in _STARTS:
        return "start"
    shell = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if name in {"system", "run", "call", "check_call", "check_output"} and any(
        _BACKGROUND.search(c) for c in shell
    ):
        return "start"  # a shell command that sends a job to the background
    return None


def python_races(name: str, text: str) -> list[tuple[str, str]]:
    """Sleeps as synchronization in a Python program (pure): (`name:line`, why). In one
    function (or the module's own code), a fixed `sleep` after starting a process or thread
    (`Popen`, a shell command ending in `&`, ...) with no wait for it in between and outside
    any loop (a sleep in a loop polls): the program bets that what it started is ready by
    then, a bet a loaded machine loses."""
    tree = python_tree(text)
    if tree is None:
        return []
    out = []
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    loops = (ast.For, ast.While, ast.AsyncFor, ast.comprehension)

    def visit(node: ast.AST, in_loop: bool, events: list[tuple[int, int, str, bool]]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, scopes):
                continue
            looped = in_loop or isinstance(child, loops)
            if isinstance(child, ast.Call) and (kind := _call_kind(child)) is not None:
                events.append((child.lineno, child.col_offset, kind, looped))
            visit(child, looped, events)

    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        events: list[tuple[int, int, str, bool]] = []
        visit(fn, False, events)
        started = None
        for line, _, kind, looped in sorted(events):
            if kind == "start":
                started = line
            elif kind == "wait" or looped:  # a wait, or a sleep in a loop: it polls
                started = None
            elif started is not None:
                why = f"sleeps a fixed time for what line {started} started instead of waiting "
                out.append((f"{name}:{line}", why + "for it (a sleep as synchronization)"))
                started = None
    return out


def sleep_seconds(text: str, line: int) -> float | None:
    """The seconds the `sleep(...)` call at `line` of a Python program asks for (pure): a
    number, or a name the module binds once to a number; None when the program does not
    parse, no sleep call starts there, or its duration is computed."""
    tree = python_tree(text)
    if tree is None:
        return None
    bound: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(stmt.value)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno == line
            and _call_kind(node) == "sleep"
            and len(node.args) == 1
        ):
            arg = node.args[0]
            if isinstance(arg, ast.Name) and len(bound.get(arg.id, [])) == 1:
                arg = bound[arg.id][0]
            try:
                value = ast.literal_eval(arg)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            return float(value) if ok and value > 0 else None
    return None


def suspected_sleeps(task: Task, races: list[Finding]) -> list[float]:
    """The seconds of the verifier's sleeps that the static `races` findings suspect of
    synchronizing (`python_races`: `tests/<file>:<line>`), each once, in order; a race of
    another kind, or a duration computed at run time, adds none."""
    out: set[float] = set()
    for f in races:
        where, _, line = f.item.rpartition(":")
        part, _, name = where.partition("/")
        text = decode(task.verifier.get(name, b"")) if part == "tests" else None
        if text and line.isdigit() and (s := sleep_seconds(text, int(line))) is not None:
            out.add(s)
    return sorted(out)


@dataclass
class StaticEvidence:
    facts: VerifierFacts
    findings: list[Finding]
    hidden: list[Literal]


_FLAG = re.compile(r"^--?[A-Za-z][\w-]*$")
_ANY_FLAG = ("--help", "-h", "--version", "-V")  # what every command-line program answers
_SYSTEM_BIN = ("/bin", "/sbin", "/usr/bin", "/usr/sbin")


def program_flags(text: str, programs: set[str]) -> list[tuple[int, str, str]]:
    """The options a Python test module passes to one of `programs` (pure): (line, program,
    flag) for each `--name` or `-x` after the program in an argument list literal
    (`["python3", "/app/tool.py", "--in", src]`) or a command string (`"/app/tool --in a"`)
    that runs it, itself or through its interpreter (`tasks.hacks.program_index`)."""
    tree = python_tree(text)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        words: list[str | None] = []
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None
                     for e in node.elts]  # fmt: skip
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not any(p in node.value for p in programs):
                continue
            try:
                words = list(shlex.split(node.value))
            except ValueError:
                continue
        at = program_index(words)
        if len(words) <= at or words[at] not in programs:
            continue
        for w in words[at + 1 :]:
            if w in (";", "&&", "||", "|"):
                break
            if w is not None and _FLAG.match(w) and w not in _ANY_FLAG:
                out.append((getattr(node, "lineno", 0), words[at] or "", w))
    return out


def unstated_flags(task: Task) -> list[Finding]:
    """Options the tests pass to a program the instruction names and the agent writes (no
    file of the environment, nothing in a system bin directory) that nothing given to the
    agent states: an interface the agent has to guess (`--in`, `--out` for a converter the
    instruction only says to write), a hidden requirement."""
    shipped = set(image_paths(task.environment.files, task.environment.workdir).values())
    named = {
        p
        for p in instruction_names(task.instruction, task.environment.workdir).files
        if p not in shipped and posixpath.dirname(p) not in _SYSTEM_BIN
    }  # the agent's programs: not the environment's, not the system's (`/usr/bin/duckdb`)
    if not named:
        return []
    given = "\n".join([task.instruction, *readable_texts(task).values()])
    out: list[Finding] = []
    for name, text in verifier_texts(task).items():
        if not name.endswith(".py"):
            continue
        for line, program, flag in program_flags(text, named):
            if _bounded_in(flag, given) or any(f.item == flag for f in out):
                continue
            why = f"tests/{name}:{line} runs {program} with {flag}, an option nothing given "
            why += "to the agent states"
            out.append(Finding(code=Code.HIDDEN_REQUIREMENT, item=flag, evidence=why))
    return out


def static_findings(task: Task) -> StaticEvidence:
    """All static findings of a task, with the facts they came from."""
    facts = verifier_facts(task)
    shortcuts = solution_shortcuts(task, facts)
    literals = literal_findings(task, facts, {f.item for f in shortcuts})
    findings = [
        *literals,
        *unstated_flags(task),
        *test_leakage(task, facts),
        *shortcuts,
        *flaky_risks(facts),
        *solution_risks(task),
        *broken_inputs(task, facts),
    ]
    if task.binary_verifier:
        findings.append(
            Finding(code=Code.BINARY_VERIFIER, evidence="the verifier reports only pass/fail")
        )
    return StaticEvidence(facts, findings, hidden_literals(facts, literals))


def static_source(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.source == Source.STATIC]
