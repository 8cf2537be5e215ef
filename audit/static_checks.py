"""Static evidence about a task: what its verifier checks, compared with what it states.

`verifier_facts` reads the verifier (Python test files by AST, shell and data files by
pattern) and lists what it checks: paths, JSON/dict keys, literal values and formats, plus
its sources of nondeterminism. The checks below compare those facts with the instruction,
the environment and the reference solution:

- hidden requirement: a checked path, key, literal or format token stated neither in the
  instruction nor anywhere in the environment the agent can read;
- test leakage: verifier code, or a value the verifier expects, visible in the environment
  or the instruction;
- solution shortcut: solve.sh hard-codes a value the verifier expects instead of producing it;
- flaky verifier: unseeded randomness or network use in the verifier (wall-clock reads are a
  softer `wall_clock` finding);
- solution reads tests: the reference solution refers to /tests, which it never has.

Every function here is pure over a `Task`; nothing runs. Findings carry a code (see `Code`)
and a human-readable detail naming the offending item.
"""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass, field
from enum import StrEnum

from tasks.environment import app_files
from tasks.model import Task

RUNNER_NAME = "run_checks.py"


class Code(StrEnum):
    """Finding codes. The rubric names which of them reject outright."""

    HIDDEN_REQUIREMENT = "hidden_requirement"
    TEST_LEAKAGE = "test_leakage"
    SOLUTION_SHORTCUT = "solution_shortcut"
    WEAK_VERIFIER = "weak_verifier"
    FLAKY_VERIFIER = "flaky_verifier"
    WALL_CLOCK = "wall_clock"
    SOLUTION_READS_TESTS = "solution_reads_tests"
    NO_SOLUTION = "no_solution"
    BINARY_VERIFIER = "binary_verifier"
    ORACLE_FAILS = "oracle_fails"
    NO_ASSERTIONS = "no_assertions"
    NOP_PASSES = "nop_passes"
    LOW_COVERAGE = "low_coverage"
    SLOW_SOLUTION = "slow_solution"
    LLM_ERROR = "llm_error"
    JUDGE_ERROR = "judge_error"


_REASON_RE = re.compile(r"^(?P<code>[a-z_]+)\[(?P<source>[a-z]+)\]: (?P<detail>.*)$", re.S)


@dataclass(frozen=True)
class Finding:
    """One defect or risk: `source` is static (read), trial (measured) or llm."""

    code: str
    detail: str
    source: str = "static"

    def reason(self) -> str:
        return f"{self.code}[{self.source}]: {self.detail}"

    @classmethod
    def from_reason(cls, text: str) -> Finding | None:
        m = _REASON_RE.match(text)
        if m is None:
            return None
        return cls(m["code"], m["detail"], m["source"])


# Paths a verifier may name without requiring anything of the agent.
SYSTEM_PREFIXES = (
    "/dev",
    "/proc",
    "/sys",
    "/tests",
    "/logs",
    "/tmp",
    "/bin",
    "/sbin",
    "/lib",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/share",
    "/usr/include",
    "/solution",
    "/setup",
)
# Names that exist by convention inside a stated directory (a git repository's .git).
CONVENTIONAL_NAMES = frozenset({".git", "HEAD", "refs", "objects"})
_PATH_RE = re.compile(r"^/[A-Za-z0-9_.@+\-]+(/[A-Za-z0-9_.@+\-*]*)*$")
_SHELL_PATH_RE = re.compile(r"(?<![\w$.{}-])(/[A-Za-z0-9_.@+\-]+(?:/[A-Za-z0-9_.@+\-]+)*)")
_ANSWERISH_FILE = re.compile(r"expect|answer|solution|golden|reference|oracle", re.I)
_HEX_RE = re.compile(r"^[0-9a-f]{7,64}$")
_NUM_RE = re.compile(r"^[-+]?\d+(\.\d+)?$")
RANDOM_FNS = frozenset(
    {"random", "randint", "choice", "choices", "shuffle", "sample", "uniform", "randrange",
     "getrandbits", "gauss", "triangular", "betavariate", "expovariate"}
)  # fmt: skip
NETWORK_MODULES = frozenset(
    {"socket", "urllib", "http", "requests", "httpx", "aiohttp", "ftplib", "smtplib"}
)


def normalize(text: str) -> str:
    return " ".join(text.split())


@dataclass
class VerifierFacts:
    """What a verifier checks and how it may misbehave, as read from its files."""

    paths: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)
    literals: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)
    regex_words: set[str] = field(default_factory=set)
    assert_sources: list[str] = field(default_factory=list)
    test_names: list[str] = field(default_factory=list)
    own_keys: set[str] = field(default_factory=set)
    own_strings: set[str] = field(default_factory=set)
    nondeterminism: list[str] = field(default_factory=list)
    wall_clock: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def checked_items(self) -> int:
        return len(self.paths) + len(self.keys) + len(self.literals) + len(self.regex_words)


def _decode(data: bytes) -> str | None:
    if b"\0" in data[:4096]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_runner(name: str, data: bytes) -> bool:
    """The shared assertion runner (tasks/checkrunner.py) is boilerplate, not the checks."""
    return posixpath.basename(name) == RUNNER_NAME


def verifier_texts(task: Task) -> dict[str, str]:
    """Text files of tests/ except the shared runner: {relative path: text}."""
    out = {}
    for name, data in sorted(task.verifier.items()):
        text = _decode(data)
        if text is not None and not is_runner(name, data):
            out[name] = text
    return out


def environment_text(task: Task) -> str:
    """Everything the environment bundle says (file names and text contents), joined."""
    parts = []
    for name, data in sorted(task.environment.files.items()):
        if name == "Dockerfile":
            continue
        parts.append(name)
        if len(data) <= 2_000_000:
            parts.append(_decode(data) or "")
    return "\n".join(parts)


def _is_path(s: str) -> bool:
    return len(s) > 1 and bool(_PATH_RE.match(s)) and not s.startswith("//")


def _clean_path(s: str) -> str:
    parts = []
    for p in s.rstrip("/").split("/"):
        if "*" in p:
            break
        parts.append(p)
    out = posixpath.normpath("/".join(parts) or "/")
    return out


def _system(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)


class _Resolver:
    """Constant folding for strings: names bound to constants, f-strings, joins."""

    def __init__(self, tree: ast.Module) -> None:
        self.consts: dict[str, str] = {}
        for _ in range(2):  # two passes: constants defined from constants
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    v = self.resolve(node.value)
                    if v is not None and node.targets[0].id not in self.consts:
                        self.consts[node.targets[0].id] = v

    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    out.append(self.resolve(v.value) or "*")
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Div):
            left, right = self.resolve(node.left), self.resolve(node.right)
            if left is None or right is None:
                return None
            return f"{left}/{right}" if isinstance(node.op, ast.Div) else left + right
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("join", "Path", "PurePosixPath") and node.args:
                parts = [self.resolve(a) for a in node.args]
                if all(p is not None for p in parts) and not (
                    name == "join" and isinstance(fn, ast.Attribute) and _is_str_method(fn)
                ):
                    return posixpath.join(*parts)  # type: ignore[arg-type]
        return None


def _is_str_method(fn: ast.Attribute) -> bool:
    """`", ".join(...)` is a string join, not a path join."""
    return isinstance(fn.value, ast.Constant)


def _regex_words(pattern: str) -> set[str]:
    p = re.sub(r"\(\?P?<[^>]*>", "(", pattern)
    p = re.sub(r"\\.", " ", p)
    p = re.sub(r"\[[^\]]*\]", " ", p)
    p = re.sub(r"\{[^}]*\}", " ", p)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", p))


def _python_facts(name: str, text: str, facts: VerifierFacts) -> None:
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        facts.unparsed.append(f"{name}: {e.msg} (line {e.lineno})")
        return
    res = _Resolver(tree)
    parts = _part_ids(tree)
    own_paths = _runner_arg_paths(tree, res)
    seeded = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "seed"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "random"
        for n in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            facts.test_names.append(node.name)
        elif isinstance(node, ast.Assert):
            seg = ast.get_source_segment(text, node)
            if seg:
                facts.assert_sources.append(normalize(seg))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for m in mods:
                if m and m.split(".")[0] in NETWORK_MODULES:
                    facts.network.append(f"{name} imports {m}")
        elif isinstance(node, ast.Dict):
            for k in node.keys:
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    facts.own_keys.add(k.value)
            for v in [*node.keys, *node.values]:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    facts.own_strings.add(v.value)
        elif isinstance(node, ast.Subscript):
            key = node.slice
            base = ast.unparse(node.value)
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and "environ" not in base
                and not _is_path(key.value)
            ):
                if isinstance(node.ctx, ast.Store):
                    facts.own_keys.add(key.value)
                else:
                    facts.keys.add(key.value)
        elif isinstance(node, ast.Compare):
            _compare_facts(node, res, facts)
        elif isinstance(node, ast.Call):
            _call_facts(name, node, res, facts, seeded)
        if isinstance(node, ast.expr) and id(node) not in parts:
            s = res.resolve(node)
            if s is not None and s.split() and _is_path(s.split()[0]):
                p = _clean_path(s.split()[0])
                if p.count("/") >= 2 and not _system(p) and p not in own_paths:
                    facts.paths.add(p)


def _part_ids(tree: ast.Module) -> set[int]:
    """Nodes that are pieces of a larger string expression (not paths on their own)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            out |= {id(node.left), id(node.right)}
        elif isinstance(node, ast.JoinedStr | ast.FormattedValue):
            out |= {id(c) for c in ast.iter_child_nodes(node)}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "join":
            out |= {id(a) for a in node.args[1:]}
    return out


def _runner_arg_paths(tree: ast.Module, res: _Resolver) -> set[str]:
    """Paths the verifier hands to its own program-running helpers (its own scratch choices).

    A helper is a function of the verifier that calls subprocess/os.system; a path constant
    passed to it names where the verifier asks a program to work, not an agent's output.
    """
    calls: dict[str, set[str]] = {}
    runners: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            calls[fn.name] = set()
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                    owner = getattr(n.func.value, "id", "")
                    if owner == "subprocess" or (owner, n.func.attr) == ("os", "system"):
                        runners.add(fn.name)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                    calls[fn.name].add(n.func.id)
    grown = True
    while grown:  # helpers that call a runner run programs too
        new = {f for f, callees in calls.items() if callees & runners} - runners
        runners |= new
        grown = bool(new)
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) in runners:
            for a in [*n.args, *(k.value for k in n.keywords)]:
                s = res.resolve(a)
                if s is not None and _is_path(s):
                    out.add(_clean_path(s))
    return out


def _compare_facts(node: ast.Compare, res: _Resolver, facts: VerifierFacts) -> None:
    sides = [node.left, *node.comparators]
    if not any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
        return
    consts = []
    for side in sides:
        if isinstance(side, ast.Constant) and isinstance(side.value, bool | type(None)):
            continue
        if isinstance(side, ast.Constant) and isinstance(side.value, int | float):
            facts.numbers.add(repr(side.value))
            consts.append(side)
            continue
        elts = side.elts if isinstance(side, ast.List | ast.Tuple | ast.Set) else [side]
        for e in elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, int | float):
                if not isinstance(e.value, bool):
                    facts.numbers.add(repr(e.value))
            elif isinstance(e, ast.Constant | ast.Name):
                s = res.resolve(e)
                if s is not None and len(s.strip()) >= 2 and not _is_path(s.strip()):
                    facts.literals.add(s.strip())
                    consts.append(e)


def _call_facts(
    name: str, node: ast.Call, res: _Resolver, facts: VerifierFacts, seeded: bool
) -> None:
    fn = node.func
    if not isinstance(fn, ast.Attribute):
        return
    owner = fn.value.id if isinstance(fn.value, ast.Name) else ""
    where = f"{name}:{node.lineno}"
    if fn.attr in ("write", "write_text") and node.args:
        s = res.resolve(node.args[0])
        if s is not None:
            facts.own_strings.add(s)
    if fn.attr in ("startswith", "endswith") and node.args:
        s = res.resolve(node.args[0])
        if s is not None and len(s.strip()) >= 2 and not _is_path(s):
            facts.literals.add(s.strip())
    elif owner == "re" and fn.attr in ("match", "fullmatch", "search", "compile", "findall"):
        s = res.resolve(node.args[0]) if node.args else None
        if s is not None:
            facts.regex_words |= _regex_words(s)
    elif fn.attr == "get" and node.args and "environ" not in ast.unparse(fn.value):
        s = res.resolve(node.args[0])
        if s is not None and isinstance(node.args[0], ast.Constant) and not _is_path(s):
            facts.keys.add(s)
    if owner == "random" and fn.attr in RANDOM_FNS and not seeded:
        facts.nondeterminism.append(f"{where}: unseeded random.{fn.attr}()")
    elif owner == "random" and fn.attr == "SystemRandom" or owner == "secrets":
        facts.nondeterminism.append(f"{where}: {owner}.{fn.attr}() draws OS entropy")
    elif (owner, fn.attr) in (("uuid", "uuid4"), ("os", "urandom")):
        facts.nondeterminism.append(f"{where}: {owner}.{fn.attr}()")
    elif (owner, fn.attr) in (("time", "time"), ("time", "time_ns"), ("time", "localtime")) or (
        fn.attr in ("now", "utcnow", "today") and owner in ("datetime", "date")
    ):
        facts.wall_clock.append(f"{where}: {owner}.{fn.attr}() reads the wall clock")
    elif fn.attr in ("monotonic", "perf_counter") and owner == "time":
        facts.wall_clock.append(f"{where}: time.{fn.attr}() times the run (load-dependent)")


_SHELL_RANDOM = re.compile(r"(?<!\w)RANDOM\b|/dev/u?random|\bshuf\b(?!.*--random-source)")
_SHELL_CLOCK = re.compile(r"\$\(\s*date\b|`date\b|\bdate\s+\+|\$\{?(EPOCHSECONDS|SECONDS)\b")
_SHELL_NET = re.compile(r"\b(curl|wget|nc|ncat|telnet)\s|https?://")


def _shell_facts(name: str, text: str, facts: VerifierFacts) -> None:
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        if _SHELL_RANDOM.search(code):
            facts.nondeterminism.append(f"{name}:{i}: {code.strip()[:80]}")
        if _SHELL_CLOCK.search(code):
            facts.wall_clock.append(f"{name}:{i}: {code.strip()[:80]}")
        if _SHELL_NET.search(code):
            facts.network.append(f"{name}:{i}: {code.strip()[:80]}")
        for m in _SHELL_PATH_RE.finditer(code):
            p = _clean_path(m.group(1))
            if p != "/" and not _system(p) and _is_path(p):
                facts.paths.add(p)


def verifier_facts(task: Task) -> VerifierFacts:
    """What the task's verifier checks (paths, keys, literals, formats) and its risks."""
    facts = VerifierFacts()
    texts = verifier_texts(task)
    facts.text = "\n".join(texts.values())
    for name, text in texts.items():
        if name.endswith(".py"):
            _python_facts(name, text, facts)
        else:
            _shell_facts(name, text, facts)
    return facts


# ---- statement checks -------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The texts a requirement may be stated in: the instruction and the environment."""

    instruction: str
    environment: str
    workdir: str
    app_paths: frozenset[str]

    @classmethod
    def of(cls, task: Task) -> Context:
        wd = task.environment.workdir.rstrip("/") or "/"
        app = frozenset(posixpath.join(wd, p) for p in app_files(task))
        return cls(normalize(task.instruction), normalize(environment_text(task)), wd, app)

    def in_instruction(self, s: str) -> bool:
        return normalize(s) in self.instruction

    def stated(self, s: str) -> bool:
        n = normalize(s)
        return n in self.instruction or n in self.environment

    def literal_stated(self, lit: str, own: str = "") -> bool:
        """A literal is stated when it appears (any case) in the instruction or environment,
        or every word of it does. Literals with digits are computed answers, not requirements
        (see `answer_like` and the shortcut/leakage checks), and count as stated here."""
        if any(c.isdigit() for c in lit):
            return True
        low = normalize(lit).lower()
        if low in self.instruction.lower() or low in self.environment.lower():
            return True
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]+", lit))
        if low in own.lower():  # data the verifier itself writes, then reads back
            return True
        corpus = "\n".join([self.instruction, self.environment, own]).lower()
        return all(
            re.search(rf"(?<![a-z0-9_]){re.escape(w.lower())}(?![a-z0-9_])", corpus) for w in words
        )

    def path_stated(self, path: str) -> bool:
        """A path is stated when named (absolutely or relative to the workdir), built from a
        stated directory and a stated name, or present in (or named by) the environment."""
        if path in self.app_paths or any(p.startswith(path + "/") for p in self.app_paths):
            return True
        if path in self.instruction or path in self.environment:
            return True
        if path == self.workdir:
            return True
        if path.startswith(self.workdir + "/"):
            rel = path[len(self.workdir) + 1 :]
            if re.search(rf"(?<![\w/.-]){re.escape(rel)}(?![\w-])", self.instruction):
                return True
        parent, base = posixpath.split(path)
        if parent and parent != path and base:
            named = base in CONVENTIONAL_NAMES or re.search(
                rf"(?<![\w-]){re.escape(base)}(?![\w-])", self.instruction
            )
            if named and (parent in ("/", self.workdir) or self.path_stated(parent)):
                return True
        return False


def answer_like(value: str) -> bool:
    """A value an agent computes rather than is told: a long number or a hex digest."""
    v = value.strip()
    if _HEX_RE.match(v) and any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
        return True
    if _NUM_RE.match(v):
        digits = v.lstrip("+-").replace(".", "").lstrip("0")
        return len(digits) >= 3
    return False


def hidden_requirements(task: Task, facts: VerifierFacts | None = None) -> list[Finding]:
    """Checked paths, keys, literals and format tokens stated nowhere the agent can read."""
    facts = facts or verifier_facts(task)
    ctx = Context.of(task)
    out: list[Finding] = []
    for p in sorted(facts.paths):
        if not ctx.path_stated(p):
            out.append(Finding(Code.HIDDEN_REQUIREMENT, f"path {p} is checked but never stated"))
    for k in sorted(facts.keys - facts.own_keys):
        if not ctx.stated(k):
            out.append(Finding(Code.HIDDEN_REQUIREMENT, f"key {k!r} is checked but never stated"))
    own = "\n".join(facts.own_strings)
    for lit in sorted(facts.literals):
        if lit in facts.own_keys or ctx.literal_stated(lit, own):
            continue
        out.append(
            Finding(Code.HIDDEN_REQUIREMENT, f"value {lit[:60]!r} is expected but never stated")
        )
    for w in sorted(facts.regex_words):
        if not ctx.stated(w):
            out.append(
                Finding(Code.HIDDEN_REQUIREMENT, f"format token {w!r} is checked but never stated")
            )
    return out


def alignment_share(task: Task, facts: VerifierFacts, hidden: list[Finding]) -> float:
    """Share of checked items that are stated (1.0 when the verifier names none)."""
    total = facts.checked_items
    return 1.0 if total == 0 else max(0.0, 1.0 - len(hidden) / total)


def test_leakage(task: Task, facts: VerifierFacts | None = None) -> list[Finding]:
    """Verifier code or expected values visible in the environment or the instruction."""
    facts = facts or verifier_facts(task)
    out: list[Finding] = []
    texts = verifier_texts(task)
    env = {n: _decode(b) or "" for n, b in task.environment.files.items() if n != "Dockerfile"}
    checks = {n: t for n, t in texts.items() if "def test_" in t or "assert " in t}
    for name, data in task.environment.files.items():
        for tname, tdata in task.verifier.items():
            if tname in checks and data == tdata:
                out.append(
                    Finding(Code.TEST_LEAKAGE, f"environment/{name} is a copy of tests/{tname}")
                )
    asserts = [a for a in dict.fromkeys(facts.assert_sources) if len(a) >= 25]
    need = max(1, min(2, len(asserts)))
    for where, text in [("instruction.md", task.instruction), *env.items()]:
        flat = normalize(text)
        seen = [a for a in asserts if a in flat]
        defs = [t for t in facts.test_names if f"def {t}(" in text]
        if len(seen) >= need or len(defs) >= 2:
            what = f"{len(seen)} assertion(s)" if seen else f"test functions {defs[:3]}"
            out.append(Finding(Code.TEST_LEAKAGE, f"{where} contains the verifier's {what}"))
    expected = [v for v in facts.literals | facts.numbers if answer_like(v) or len(v) >= 6]
    for name, text in env.items():
        if not _ANSWERISH_FILE.search(name):
            continue
        hits = [v for v in expected if v in text]
        if hits:
            out.append(
                Finding(
                    Code.TEST_LEAKAGE,
                    f"environment/{name} holds expected value(s) {sorted(hits)[:3]}",
                )
            )
    return out


_LITERAL_WRITE = re.compile(
    r"^\s*(?:echo|printf)\s+(?:-[a-z]+\s+)?(['\"]?)([-+]?\d[\d.]*)(?:\\n)?\1\s*>>?\s*(\S+)\s*$"
)


def solution_shortcuts(task: Task, facts: VerifierFacts | None = None) -> list[Finding]:
    """solve.sh hard-codes a value the verifier expects (static evidence only)."""
    if task.solution is None:
        return []
    facts = facts or verifier_facts(task)
    ctx = Context.of(task)
    script = _decode(task.solution.get("solve.sh", b"")) or ""
    out: list[Finding] = []
    for v in sorted(facts.literals | facts.numbers):
        if not answer_like(v) or ctx.stated(v):
            continue
        if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", script):
            out.append(
                Finding(
                    Code.SOLUTION_SHORTCUT,
                    f"solve.sh hard-codes {v!r}, the value the verifier compares against",
                )
            )
    for line in script.splitlines():
        m = _LITERAL_WRITE.match(line)
        if m is None:
            continue
        value, target = m.group(2), m.group(3)
        path = posixpath.normpath(posixpath.join(ctx.workdir, target.strip("'\"")))
        mentioned = path in facts.paths or posixpath.basename(path) in facts.text
        if mentioned and not ctx.in_instruction(value) and len(value.strip(".")) >= 1:
            out.append(
                Finding(
                    Code.SOLUTION_SHORTCUT,
                    f"solve.sh writes the literal {value!r} to {path}, which the verifier checks",
                )
            )
    return out


def flaky_risks(facts: VerifierFacts) -> list[Finding]:
    """Nondeterminism and network use (flaky) and wall-clock reads (softer), statically."""
    out = [Finding(Code.FLAKY_VERIFIER, f"nondeterministic: {d}") for d in facts.nondeterminism]
    out += [Finding(Code.FLAKY_VERIFIER, f"network dependence: {d}") for d in facts.network]
    out += [Finding(Code.WALL_CLOCK, d) for d in facts.wall_clock]
    return out


def solution_risks(task: Task) -> list[Finding]:
    """The reference solution refers to /tests (it never has them during the agent phase)."""
    if task.solution is None:
        return [Finding(Code.NO_SOLUTION, "task has no reference solution")]
    script = _decode(task.solution.get("solve.sh", b"")) or ""
    if re.search(r"(?<![\w.])/tests\b", script):
        return [Finding(Code.SOLUTION_READS_TESTS, "solve.sh refers to /tests")]
    return []


def static_findings(task: Task) -> tuple[VerifierFacts, list[Finding]]:
    """All static findings of a task, with the facts they came from."""
    facts = verifier_facts(task)
    findings = [
        *hidden_requirements(task, facts),
        *test_leakage(task, facts),
        *solution_shortcuts(task, facts),
        *flaky_risks(facts),
        *solution_risks(task),
    ]
    if task.binary_verifier:
        findings.append(Finding(Code.BINARY_VERIFIER, "verifier reports only pass/fail"))
    return facts, findings
