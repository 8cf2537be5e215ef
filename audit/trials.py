"""The instrumented agents the executable judge runs in sandbox trials.

Each is an ordinary agent (`run(sandbox, task, deadline) -> AgentOutcome`) that runs the
reference solution in the agent's session, plus harness steps (`sandbox.exec`, upload,
download) before or after it; what it observed stays on the agent object as typed fields:

- `EffectsOracleAgent`: probes the initial environment for hidden-requirement candidates,
  runs the solution, lists its filesystem effects and keeps the small text outputs;
- `PerturbedOracleAgent`: perturbs the declared inputs first (delete, shift digits, drop
  lines), then runs the solution and hashes the given outputs (shortcut evidence);
- `OutputMutantAgent`: runs the solution, then deletes, empties, truncates or corrupts one
  output (weak-verifier evidence; the transforms are `audit.mutation.mutate_output`);
- `ConditionAgent`: runs the solution, then prepares a rerun condition (the clock library,
  a locale, shuffled directory entries) for a verifier wrapped by `audit.variants`.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from audit.behaviour import network_use
from audit.databases import SEP, is_sqlite, perturb, table_views, view_hash, view_name
from audit.hashes import hash_files
from audit.traces import SYSTEM_PATHS, TRACE_CALLS, Trace, parse_trace
from sandbox.base import Sandbox
from sandbox.judge import CONDITION_DIR
from sandbox.launcher import compile_c
from sandbox.trial import SOLUTION_DIR, AgentOutcome, run_solution
from tasks.model import Task

MARK = "/.t1-audit-mark"
# Not searched for effects: kernel and trial plumbing, and the large system trees a task's
# solution has no business writing (listing them costs seconds per trial on a cold cache).
PRUNE = (
    "/proc", "/sys", "/dev", "/logs", "/solution", "/tests", MARK, "/usr/lib", "/usr/share",
    "/usr/include", "/usr/libexec", "/usr/src", "/lib", "/lib32", "/lib64", "/var/lib/dpkg",
    "/var/cache", "/var/lib/containers", "/var/lib/docker", "/var/lib/t1-forge",
    "/tmp/.t1-probe",
)  # fmt: skip
# Effects that are side products of running anything, not what the task asks for.
_NOISE = re.compile(
    r"(/__pycache__/|\.pyc$|^/root/\.(cache|bash_history|python_history|lesshst|wget-hsts)|"
    r"^/var/(cache|lib/apt|log|tmp)/|^/tmp/\.t1|^/run/|/\.git/(index\.lock|FETCH_HEAD|ORIG_HEAD)$)"
)
# libfaketime where Debian/Ubuntu install it; the clock condition ships the host's copy with
# the wrapped verifier (tests/.t1-condition/faketime/) for images without one.
FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
)
SHIPPED_FAKETIME = f"{CONDITION_DIR}/faketime/libfaketime.so.1"


SHIPPED_LOCALES = f"{CONDITION_DIR}/locale"


def host_locale(name: str) -> dict[str, bytes] | None:
    """The compiled locale `name` (e.g. de_DE.UTF-8) as {relative path: bytes}, to ship
    with a wrapped verifier (`LOCPATH`) for images that lack it: compiled once with the
    host's localedef into ~/.cache/t1-forge/locale. None when the host cannot compile it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "t1-forge" / "locale"
    target = cache / name
    if not (target / "LC_CTYPE").is_file():
        if shutil.which("localedef") is None:
            return None
        lang, _, charmap = name.partition(".")
        tmp = cache / f".{name}.{os.getpid()}"
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["localedef", "-i", lang, "-f", charmap or "UTF-8", str(tmp)],
            capture_output=True,
            timeout=300,
        )
        if not (tmp / "LC_CTYPE").is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        try:
            tmp.rename(target)
        except OSError:  # another process compiled it first
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        f"{name}/{p.relative_to(target).as_posix()}": p.read_bytes()
        for p in sorted(target.rglob("*"))
        if p.is_file()
    }


def host_faketime() -> bytes | None:
    """The host's libfaketime, to ship with a wrapped verifier (None when not installed)."""
    lib = next((Path(p) for p in FAKETIME_LIBS if Path(p).is_file()), None)
    return lib.read_bytes() if lib is not None else None


# The order condition's LD_PRELOAD library (audit/readdir_reverse.c), built with the host's C
# compiler and shipped with the wrapped verifier: readdir() lists in the reverse of the
# kernel's order, whatever the filesystem (ext4's hashed directories ignore creation order).
READDIR_SOURCE = Path(__file__).with_name("readdir_reverse.c")
SHIPPED_READDIR = f"{CONDITION_DIR}/libt1readdir.so"


def host_preload(source: Path, stem: str) -> bytes | None:
    """An LD_PRELOAD library of the audit's, compiled from `source` with the host's C compiler
    (cached by source hash under ~/.cache/t1-forge/<stem>), or None when the host has no C
    compiler or the build fails."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "t1-forge"
    lib = compile_c(source, cache / stem, f"libt1{stem}", "-shared", "-fPIC")
    return lib.read_bytes() if lib is not None else None


def host_readdir_shim() -> bytes | None:
    """The compiled order library, or None."""
    return host_preload(READDIR_SOURCE, "readdir")


# The sleeps condition's LD_PRELOAD library (audit/short_sleep.c), the clocks untouched: the
# sleeps the static look suspects of synchronizing cut to nothing (their durations in
# SLEEP_CUT_ENV), every other sleep as asked and every process starting late; with none
# named, every sleep a tenth as long.
SLEEP_SOURCE = Path(__file__).with_name("short_sleep.c")
SHIPPED_SLEEPS = f"{CONDITION_DIR}/libt1sleep.so"
SLEEP_DIVISOR = 10  # as audit/short_sleep.c's DIVISOR
SLEEP_CUT_ENV = "T1_SLEEP_CUT"  # as audit/short_sleep.c reads it
SLEEP_CUT_START_S = 0.3  # as audit/short_sleep.c's START_DELAY_NS


def sleep_cut_env(seconds: list[float]) -> dict[str, str]:
    """The verifier's environment under which the sleeps library cuts the sleeps of `seconds`
    to nothing (empty for none: every sleep a tenth as long)."""
    return {SLEEP_CUT_ENV: ",".join(str(round(s * 1e9)) for s in seconds)} if seconds else {}


def host_sleep_shim() -> bytes | None:
    """The compiled sleeps library, or None."""
    return host_preload(SLEEP_SOURCE, "sleep")


# The entropy condition's LD_PRELOAD library (audit/same_entropy.c): every process draws the
# same entropy (getrandom, getentropy, /dev/urandom), so a verdict decided by chance shows.
ENTROPY_SOURCE = Path(__file__).with_name("same_entropy.c")
SHIPPED_ENTROPY = f"{CONDITION_DIR}/libt1entropy.so"


def host_entropy_shim() -> bytes | None:
    """The compiled entropy library, or None."""
    return host_preload(ENTROPY_SOURCE, "entropy")


def _with_preload(sandbox: Sandbox, data: bytes, command: str) -> str:
    """The output of `command` ({lib}: the library `data`, uploaded to a scratch directory
    that is removed again at once, so the verifier's run depends on nothing it left)."""
    scratch = "/tmp/.t1-probe/preload"
    sandbox.upload({"lib.so": data}, scratch)
    run = command.format(lib=f"{scratch}/lib.so") + "; rm -rf /tmp/.t1-probe"
    return sandbox.exec(run, timeout_s=10).stdout


def _prepare_sleeps(sandbox: Sandbox, cut: list[float]) -> tuple[bool, str]:
    """Does the sleeps library load here and shorten a sleep (`sleep 5` to 0.5 s: a margin
    that a CPU quota of 0.1 on a loaded host does not eat)? Tried from a scratch directory
    removed again at once. (False, why) when it does not; the detail names the sleeps `cut`
    to nothing (`sleep_cut_env`), if any."""
    data = host_sleep_shim()
    if data is None:
        return False, "no C compiler on the host to build the sleeps library"
    out = _with_preload(
        sandbox, data, "s=$(date +%s%N); LD_PRELOAD={lib} sleep 5 2>&1; "
        "echo $(( ($(date +%s%N) - s) / 1000000 ))",
    )  # fmt: skip
    took = out.strip().splitlines()[-1:] or ["x"]
    if not took[0].isdigit() or int(took[0]) >= 3000:
        return False, f"the sleeps library did not shorten `sleep 5` ({out.strip()[-120:]!r})"
    if cut:
        named = ", ".join(f"{s:g} s" for s in cut)
        why = f"the verifier's sleeps of {named} cut to nothing, the others as asked, "
        return True, why + f"every process it starts {SLEEP_CUT_START_S:g} s late"
    return True, f"the verifier's sleeps {SLEEP_DIVISOR}x shorter, its clocks untouched"


def _prepare_entropy(sandbox: Sandbox) -> tuple[bool, str]:
    """Does the entropy library load here and give two processes the same bytes of
    /dev/urandom (`od`, through fopen)? Tried from a scratch directory removed again at once.
    (False, why) when it does not."""
    data = host_entropy_shim()
    if data is None:
        return False, "no C compiler on the host to build the entropy library"
    out = _with_preload(
        sandbox, data, "for i in 1 2; do LD_PRELOAD={lib} od -An -tx1 -N16 /dev/urandom 2>&1; done"
    )
    lines = [" ".join(line.split()) for line in out.strip().splitlines()]
    if len(lines) != 2 or lines[0] != lines[1] or len(lines[0].split()) != 16:
        return False, f"the entropy library did not repeat /dev/urandom ({out.strip()[-120:]!r})"
    return True, "every process of the verifier draws the same entropy"


def _prepare_readdir(sandbox: Sandbox) -> tuple[bool, str]:
    """Does the order library load here and reverse a listing (the root directory's)? Tried
    from a scratch directory removed again at once. (False, why) when it does not: the
    image's libc refuses it (musl) or the listing came out the same."""
    data = host_readdir_shim()
    if data is None:
        return False, "no C compiler on the host to build the readdir library"
    out = _with_preload(
        sandbox, data, "ls -U -A / 2>&1; echo ---; LD_PRELOAD={lib} ls -U -A / 2>&1"
    )
    plain, _, shimmed = out.partition("---\n")
    if shimmed.split() != plain.split()[::-1] or len(plain.split()) < 2:
        return False, f"the readdir library did not reverse a listing ({shimmed[:120]!r})"
    return True, "readdir reversed for the verifier"


TRACE_DIR = "/tmp/.t1-probe/trace"
# Files a solution reads that are no evidence of where its answer came from: the system,
# the interpreter's own files, the trial's plumbing, and the solution's own programs (its
# data under /solution is evidence: a fixture it decompresses the answer from is a shortcut).
_SYSTEM_READS = SYSTEM_PATHS
_SOLUTION_CODE = re.compile(
    r"^/solution/(.*\.(sh|bash|py|pl|rb|js|ts|go|rs|c|h|cc|cpp|java|R|r)|[^.]*)$"
)
_OPEN_RE = re.compile(
    r"\b(?:open|openat|openat2|creat)\((?:[^,]*, )?\"[^\"]*\", ([A-Z_|]+)[^=]*= \d+<(.+)>$"
)


def host_strace() -> dict[str, bytes] | None:
    """The host's strace with the shared libraries and loader it needs (`ldd`), to run in a
    sandbox from a scratch directory whatever its image holds; None without strace."""
    exe = shutil.which("strace")
    if exe is None or shutil.which("ldd") is None:
        return None
    r = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30)
    files = {"strace": Path(exe).read_bytes()}
    for line in r.stdout.splitlines():
        path = line.split("=>")[-1].strip().split(" (")[0].strip()
        if path.startswith("/") and Path(path).is_file():
            name = "ld.so" if "ld-linux" in path or "ld64" in path else Path(path).name
            files[name] = Path(path).read_bytes()
    return files if "ld.so" in files else None


def traced_reads(trace: str) -> list[str]:
    """The files a traced process tree opened for reading (successful opens, not
    directories), in first-read order, from `strace -f -y` output."""
    out: dict[str, None] = {}
    for line in trace.splitlines():
        m = _OPEN_RE.search(line)
        if m is None:
            continue
        flags, path = m.group(1), m.group(2)
        if "O_DIRECTORY" in flags or "O_WRONLY" in flags or not path.startswith("/"):
            continue
        out.setdefault(path, None)
    return list(out)


def undeclared_reads(reads: list[str], created: set[str]) -> list[str]:
    """Reads of files that are neither the system's, the solution's programs, nor written by
    the solution itself."""
    return [
        p
        for p in reads
        if not _SYSTEM_READS.search(p) and not _SOLUTION_CODE.match(p) and p not in created
    ]


def ship_strace(sandbox: Sandbox) -> tuple[str | None, str]:
    """The host's strace shipped into the sandbox's scratch directory: (the command prefix
    that runs it, or None and why it cannot run here: not on the host, or ptrace refused)."""
    files = host_strace()
    if files is None:
        return None, "strace is not installed on the host"
    sandbox.upload(files, TRACE_DIR, mode=0o755)
    st = f"{TRACE_DIR}/ld.so --library-path {TRACE_DIR} {TRACE_DIR}/strace"
    probe = sandbox.exec(f"{st} -f -qq -o /dev/null true && echo traced", timeout_s=30)
    if "traced" not in probe.stdout:
        sandbox.exec("rm -rf /tmp/.t1-probe", timeout_s=10)
        return None, f"strace cannot run here: {(probe.stderr or probe.stdout).strip()[-200:]}"
    # -I2: fatal signals reach it between calls (with -o it blocks them by default), so
    # traced_to_its_end can stop it
    return f"{st} -I2 -f -qq -y -s 512 -e trace={TRACE_CALLS}", ""


def traced_to_its_end(strace: str, log: str, command: str) -> str:
    """Shell: `command` under `strace` until `command` itself ends, with its exit status. A
    solution that leaves a process running (a server started with `&`, as an agent would
    leave one) must not keep the tracer, and with it the trial, waiting until the agent's
    time runs out: once the command is done the tracer is told to stop (SIGTERM: it lets go
    of what it still traces, which runs on untraced)."""
    rc = f"{TRACE_DIR}/rc"
    inner = shlex.quote(f"{command}; echo $? > {rc}")
    return (
        f"( rm -f {rc}; {strace} -o {log} bash -c {inner} & t1s=$!; "
        f"while [ ! -s {rc} ] && kill -0 $t1s 2>/dev/null; do sleep 0.05; done; "
        f"kill -TERM $t1s 2>/dev/null; wait $t1s 2>/dev/null; "
        f"exit $(cat {rc} 2>/dev/null || echo 1) )"
    )


def _solve_traced(
    sandbox: Sandbox, task: Task, deadline: float
) -> tuple[AgentOutcome, str | None, str]:
    """The solution under the host's strace (shipped into a scratch directory): (outcome,
    the trace or None when it could not run, why not). A sandbox that forbids ptrace runs
    the solution untraced: the trace is evidence, never a condition of the oracle."""
    if task.solution is None:
        return _solve(sandbox, task, deadline), None, "no solution"
    st, why = ship_strace(sandbox)
    if st is None:
        return _solve(sandbox, task, deadline), None, why
    sandbox.upload(task.solution, SOLUTION_DIR)
    log = f"{TRACE_DIR}/log"
    r = sandbox.session().run(
        traced_to_its_end(st, log, f"bash {SOLUTION_DIR}/solve.sh"),
        timeout_s=max(0.1, deadline - time.monotonic()),
    )
    data = sandbox.download(log).get("log", b"")
    sandbox.exec("rm -rf /tmp/.t1-probe", timeout_s=10)
    return AgentOutcome.from_exec(r), data.decode("utf-8", "replace"), ""


# Where a built environment keeps what its build wrote besides the working directory.
BUILT_DIRS = ("/opt", "/srv", "/var/lib", "/var/backups", "/var/opt", "/home", "/root",
              "/mnt", "/data", "/usr/local/share")  # fmt: skip
_BUILT_PRUNE = (*PRUNE, "/var/lib/apt", "/var/lib/systemd", "/var/lib/pam", "/var/lib/ucf",
                "/root/.cache", "/usr/local/lib")  # fmt: skip


def built_files(
    sandbox: Sandbox,
    dirs: list[str],
    given: set[str],
    max_files: int = 300,
    max_bytes: int = 16_000_000,
    file_bytes: int = 2_000_000,
) -> tuple[dict[str, bytes], list[str]]:
    """The files of a built environment an agent can read that the task's files are not
    (what the Dockerfile's RUN steps and setup wrote: caches, repositories, archives),
    under `dirs`, bounded in count and bytes: ({image path: bytes}, what was left out).
    Read in one tar stream from a scratch directory removed at once."""
    q = " ".join(shlex.quote(d) for d in dirs)
    prune = " -o ".join(f"-path {p}" for p in _BUILT_PRUNE)
    listing = sandbox.exec(
        f"find {q} -xdev \\( {prune} -o -name __pycache__ \\) -prune -o -type f "
        f"-size -{file_bytes // 1024 + 1}k -printf '%s\\t%p\\n' 2>/dev/null | head -n 5000",
        timeout_s=60,
        cwd="/",
    ).stdout
    chosen: list[str] = []
    total, left = 0, []
    for line in listing.splitlines():
        size_s, _, path = line.partition("\t")
        if not path or path in given or "\n" in path:
            continue
        size = int(size_s) if size_s.isdigit() else 0
        if len(chosen) >= max_files or total + size > max_bytes:
            left.append(path)
            continue
        chosen.append(path)
        total += size
    if not chosen:
        return {}, left
    scratch = "/tmp/.t1-probe/built"
    sandbox.upload({"list": ("\n".join(p.lstrip("/") for p in chosen) + "\n").encode()}, scratch)
    sandbox.exec(
        f"tar -C / -cf {scratch}/files.tar --no-recursion -T {scratch}/list 2>/dev/null; true",
        timeout_s=120,
        cwd="/",
    )
    data = sandbox.download(f"{scratch}/files.tar").get("files.tar", b"")
    sandbox.exec("rm -rf /tmp/.t1-probe", timeout_s=10)
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for info in tf:
                f = tf.extractfile(info) if info.isfile() else None
                if f is not None:
                    out["/" + info.name.lstrip("/")] = f.read(file_bytes)
    except tarfile.TarError:
        left.append("(the tar stream could not be read)")
    return out, left


MAX_DATABASE_BYTES = 16_000_000


def database_bytes(sandbox: Sandbox, paths: list[str]) -> dict[str, bytes]:
    """{path: bytes} of the `paths` that are SQLite databases (by their header) of at most
    `MAX_DATABASE_BYTES`, read from the sandbox."""
    if not paths:
        return {}
    script = "\n".join(
        f"[ -f {q} ] && [ $(stat -c %s {q}) -le {MAX_DATABASE_BYTES} ] && "
        f"head -c 15 {q} | grep -qa 'SQLite format 3' && printf '%s\\n' {q}"
        for q in map(shlex.quote, paths)
    )
    found = sandbox.exec(script + "\ntrue", timeout_s=30, cwd="/").stdout.splitlines()
    out = {}
    for p in found:
        if p in paths:
            data = sandbox.download(p).get(posixpath.basename(p), b"")
            if is_sqlite(data):
                out[p] = data
    return out


def database_views(sandbox: Sandbox, paths: list[str]) -> dict[str, dict[str, str]]:
    """{path: {table: view}} of the `paths` that are SQLite databases (`table_views`)."""
    return {p: table_views(data) for p, data in database_bytes(sandbox, paths).items()}


def _solve(sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
    if task.solution is None:
        return AgentOutcome(exit_code=None, detail="task has no reference solution")
    return run_solution(sandbox, task, task.solution, deadline)


class EffectsOracleAgent:
    """The oracle, plus a probe before it and a listing of its filesystem effects after it.

    `probe_paths` / `probe_literals` are looked for before solve.sh runs (a requirement
    present there is discoverable, not hidden). After solve.sh, every regular file or symlink
    newer (mtime or ctime) than a marker is an effect, as is every path of the working
    directory that disappeared. Small text outputs are kept (`outputs`) with every effect's
    hash (`hashes`).
    """

    name = "oracle"

    def __init__(
        self,
        probe_paths: list[str],
        probe_literals: list[str],
        search_dirs: list[str],
        max_bytes: int = 65536,
        max_files: int = 40,
        trace: bool = True,
        given: set[str] | None = None,
        databases: list[str] | None = None,
    ) -> None:
        self.probe_paths = probe_paths
        self.probe_literals = probe_literals
        self.search_dirs = search_dirs
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.found: set[str] = set()
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.sizes: dict[str, int] = {}
        self.outputs: dict[str, str] = {}
        self.hashes: dict[str, str | None] = {}
        self.before: set[str] = set()  # the working directory's paths before the solution
        self.trace = trace
        self.traced = False  # the solution ran under strace
        self.trace_detail = ""
        self.reads: list[str] = []  # files the solution read that are not the system's
        self.first_open: dict[str, str] = {}  # each file's first open: "read" or "write"
        self.network: list[str] = []  # where the solution connected (or tried to)
        self.read_texts: dict[str, str] = {}  # their text (small ones)
        self.given = given  # image paths of the task's own files; None: do not collect
        self.built: dict[str, bytes] = {}  # what the build wrote that the task's files are not
        self.built_left: list[str] = []
        self.databases = databases or []  # named paths read as SQLite databases if they are
        self.db_before: dict[str, dict[str, str]] = {}  # {path: {table: view}} before solve.sh
        self.db_after: dict[str, dict[str, str]] = {}  # the same databases after it

    def _probe(self, sandbox: Sandbox, wd: str) -> None:
        lines = []
        for i, p in enumerate(self.probe_paths):
            lines.append(f"[ -e {shlex.quote(p)} ] && echo p{i}")
        dirs = " ".join(shlex.quote(d) for d in self.search_dirs)
        for i, lit in enumerate(self.probe_literals):
            lines.append(f"grep -rqsF -- {shlex.quote(lit)} {dirs} 2>/dev/null && echo l{i}")
        if not lines:
            return
        r = sandbox.exec("\n".join(lines) + "\ntrue", timeout_s=30, cwd=wd)
        for tok in r.stdout.split():
            kind, idx = tok[0], int(tok[1:]) if tok[1:].isdigit() else -1
            pool = self.probe_paths if kind == "p" else self.probe_literals
            if 0 <= idx < len(pool):
                self.found.add(pool[idx])

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if task.solution is None:
            return _solve(sandbox, task, deadline)
        wd = task.environment.workdir
        self._probe(sandbox, wd)
        if self.given is not None:
            dirs = [wd, *(d for d in BUILT_DIRS if d != wd)]
            self.built, self.built_left = built_files(sandbox, dirs, self.given)
        q = shlex.quote(wd)
        before = sandbox.exec(f"find {q} -xdev 2>/dev/null | head -n 20000", timeout_s=30).stdout
        self.db_before = database_views(sandbox, self.databases)
        sandbox.exec(f"touch {MARK} && sleep 0.05", timeout_s=10, cwd="/")
        if self.trace:
            outcome, trace, self.trace_detail = _solve_traced(sandbox, task, deadline)
        else:
            outcome, trace = _solve(sandbox, task, deadline), None
        self.traced = trace is not None
        prune = " -o ".join(f"-path {p}" for p in PRUNE)
        listing = sandbox.exec(
            f"find / -xdev \\( {prune} \\) -prune -o \\( -newer {MARK} -o -cnewer {MARK} \\) "
            f"\\( -type f -o -type l \\) -printf '%s\\t%p\\n' 2>/dev/null | head -n 20000; "
            f"rm -f {MARK}; echo '=== after'; find {q} -xdev 2>/dev/null | head -n 20000",
            timeout_s=60,
            cwd="/",
        ).stdout
        changed, _, after = listing.partition("=== after\n")
        for line in changed.splitlines():
            size, _, path = line.partition("\t")
            if path and not _NOISE.search(path):
                self.sizes[path] = int(size) if size.isdigit() else 0
        self.created = sorted(self.sizes)
        self.before = set(before.splitlines())
        self.deleted = sorted(self.before - set(after.splitlines()) - {wd}, key=str.encode)
        small = [p for p in self.created if self.sizes[p] <= self.max_bytes][: self.max_files]
        for p in small:
            data = sandbox.download(p).get(posixpath.basename(p), b"")
            try:
                self.outputs[p] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
        self.hashes = hash_files(sandbox, self.created[:200])
        self.db_after = database_views(sandbox, sorted(self.db_before))
        if trace is not None:
            parsed = parse_trace(trace)
            self.first_open = parsed.first_opens()
            self.network = network_use(parsed)
            own = {p for p, how in self.first_open.items() if how == "write"}  # its scratch
            self.reads = undeclared_reads(parsed.reads(), set(self.created) | own)[:200]
            for p in self.reads[: self.max_files]:
                data = sandbox.download(p).get(posixpath.basename(p), b"")
                if 0 < len(data) <= self.max_bytes:
                    self.read_texts[p] = data.decode("utf-8", "replace")
        return outcome


PERTURBATIONS = ("delete", "shift-digits", "drop-lines", "rot13-words")
# the perturbations that keep a file's form (a guard that holds on the shipped data, a valid
# file, a key left as it is, holds on them too): what the free-reward evidence compares on
FORM_KEEPING_PERTURBATIONS = ("shift-digits", "rot13-words")


def perturb_command(mode: str, paths: list[str]) -> str:
    """Shell that perturbs the declared input files in place (POSIX sed/awk only); the
    word perturbation is written from the harness instead (`perturbation.rot13_words`)."""
    if mode not in PERTURBATIONS or mode == "rot13-words":
        raise ValueError(f"unknown perturbation {mode!r} (choose from {PERTURBATIONS})")
    out = []
    for p in paths:
        q = shlex.quote(p)
        if mode == "delete":
            out.append(f"rm -rf -- {q}")
        elif mode == "shift-digits":
            out.append(f"[ -f {q} ] && sed -i 'y/0123456789/1234567890/' {q}")
        else:  # keep the first line (a header), drop every third line after it
            out.append(
                f"[ -f {q} ] && awk 'NR==1 || NR%3!=0' {q} > {q}.t1p && cat {q}.t1p > {q} "
                f"&& rm -f {q}.t1p"
            )
    return "\n".join(out) + "\ntrue"


def _replace(sandbox: Sandbox, path: str, data: bytes) -> None:
    """Write `data` over the file at `path`, keeping its mode."""
    parent, base = posixpath.split(path)
    mode = sandbox.exec(f"stat -c %a {shlex.quote(path)}", timeout_s=10).stdout
    sandbox.upload({base: data}, parent)
    sandbox.exec(f"chmod {shlex.quote(mode.strip() or '644')} {shlex.quote(path)}")


class PerturbedOracleAgent:
    """Perturbs the declared inputs, runs the reference solution, hashes `outputs`. Mode
    `delete-sources` deletes `inputs` once the solution is uploaded (files it read that
    nothing declares, its own fixtures under /solution included). With `solve=False` it
    stops after the perturbation: a nop run on a starting state with other data. With
    `answers` (path -> text) the solution's outputs are then replaced by them: the shipped
    answer judged against other inputs (does the verifier's expectation follow them?)."""

    def __init__(
        self,
        mode: str,
        inputs: dict[str, bytes],
        outputs: list[str],
        databases: list[str] | None = None,
        views: list[str] | None = None,
        *,
        solve: bool = True,
        answers: dict[str, str] | None = None,
    ) -> None:
        self.mode = mode
        self.inputs = inputs  # image path -> the bytes the environment gives
        self.outputs = outputs
        self.databases = databases or []  # SQLite inputs in the image, perturbed table by table
        self.views = views or []  # tables checked as outputs (`audit.databases.view_name`)
        self.solve = solve
        self.answers = answers or {}
        self.name = f"perturbed-{mode}" if solve else f"nop-perturbed-{mode}"
        if self.answers:
            self.name += "-shipped-answer"
        self.hashes: dict[str, str | None] = {}
        self.texts: dict[str, str] = {}

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if self.mode == "rot13-words":
            from audit.perturbation import rot13_words

            for path, data in self.inputs.items():
                _replace(sandbox, path, rot13_words(data))
        elif self.mode == "reverse-records":
            from audit.perturbation import reverse_records

            for path, data in self.inputs.items():
                text = data.decode("utf-8", "surrogateescape")
                _replace(sandbox, path, reverse_records(text).encode("utf-8", "surrogateescape"))
        elif self.mode != "delete-sources":
            paths = sorted(self.inputs) + (self.databases if self.mode == "delete" else [])
            sandbox.exec(perturb_command(self.mode, paths), timeout_s=60, cwd="/")
        if self.mode in ("shift-digits", "drop-lines", "rot13-words"):
            for path, data in database_bytes(sandbox, self.databases).items():
                _replace(sandbox, path, perturb(data, self.mode))
        if not self.solve:
            return AgentOutcome(exit_code=0)
        if self.mode == "delete-sources" and task.solution is not None:
            # after the solution's upload: its own fixtures under /solution go too
            sandbox.upload(task.solution, SOLUTION_DIR)
            sandbox.exec(perturb_command("delete", sorted(self.inputs)), timeout_s=60, cwd="/")
            r = sandbox.session().run(
                f"bash {SOLUTION_DIR}/solve.sh", timeout_s=max(0.1, deadline - time.monotonic())
            )
            outcome = AgentOutcome.from_exec(r)
        else:
            outcome = _solve(sandbox, task, deadline)
        if self.answers:
            _write_answers(sandbox, task, self.answers)
        self.hashes = hash_files(sandbox, self.outputs)
        for p, h in self.hashes.items():
            if h is not None:
                data = sandbox.download(p).get(posixpath.basename(p), b"")
                if len(data) <= 65536:
                    self.texts[p] = data.decode("utf-8", "replace")
        dbs = sorted({v.rpartition(SEP)[0] for v in self.views})
        tables = {
            view_name(p, t): text
            for p, vs in database_views(sandbox, dbs).items()
            for t, text in vs.items()
        }
        for v in self.views:
            self.hashes[v] = view_hash(tables[v]) if v in tables else None
            if v in tables:
                self.texts[v] = tables[v]
        return outcome


class OutputMutantAgent:
    """Runs the reference solution, then mutates one of its outputs (see
    `audit.mutation.mutate_output`); `applied` is False when there was nothing to mutate."""

    def __init__(self, path: str, op: str) -> None:
        self.path = path
        self.op = op
        self.name = f"output-{op}"
        self.applied = False

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        from audit.mutation import mutate_output

        outcome = _solve(sandbox, task, deadline)
        q = shlex.quote(self.path)
        if self.op == "delete":
            self.applied = sandbox.exec(f"[ -e {q} ] && rm -rf -- {q}", timeout_s=30).ok
            return outcome
        files = sandbox.download(self.path)
        data = files.get(posixpath.basename(self.path))
        if data is None:
            return outcome
        mode = sandbox.exec(f"stat -c %a {q}", timeout_s=10).stdout.strip() or "644"
        new = mutate_output(data, self.op)
        if new != data:
            parent, base = posixpath.split(self.path)
            sandbox.upload({base: new}, parent)
            sandbox.exec(f"chmod {shlex.quote(mode)} {q}", timeout_s=10)
            self.applied = True
        return outcome


@dataclass
class Condition:
    """A rerun condition prepared after the solution (see `audit.variants`)."""

    name: str
    clock: bool = False
    locale: bool = False
    shuffle_dirs: list[str] = field(default_factory=list)
    age_paths: list[str] = field(default_factory=list)
    age_s: int = 0
    sleeps: bool = False
    cut_sleeps: list[float] = field(default_factory=list)  # seconds (`sleep_cut_env`)
    entropy: bool = False


class ConditionAgent:
    """Runs the reference solution, then prepares `condition`; `applied` says whether the
    sandbox offers it (a clock library, the locale), `detail` what was used."""

    def __init__(self, condition: Condition, locale: str = "de_DE.UTF-8") -> None:
        self.condition = condition
        self.locale = locale
        self.name = f"rerun-{condition.name}"
        self.applied = True
        self.detail = ""

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        outcome = _solve(sandbox, task, deadline)
        c = self.condition
        if c.clock:
            self.applied, self.detail = _prepare_faketime(sandbox)
        if c.locale:
            self.applied, self.detail = _prepare_locale(sandbox, self.locale)
        if c.sleeps:
            self.applied, self.detail = _prepare_sleeps(sandbox, c.cut_sleeps)
        if c.entropy:
            self.applied, self.detail = _prepare_entropy(sandbox)
        if c.shuffle_dirs:
            # Both: the library for what uses libc's readdir, the re-created entries for
            # filesystems that list in creation order (static binaries, musl images).
            shuffled = sandbox.exec(shuffle_command(c.shuffle_dirs), timeout_s=60, cwd="/")
            reversed_, why = _prepare_readdir(sandbox)
            self.applied, self.detail = order_applied(
                c.shuffle_dirs, moved_dirs(shuffled.stdout), reversed_, why
            )
        if c.age_paths:
            r = sandbox.exec(age_command(c.age_paths, c.age_s), timeout_s=120, cwd="/")
            self.applied = r.ok
            self.detail = (
                f"files of {c.age_paths[:2]} aged by {c.age_s} s" if r.ok else r.stderr[-200:]
            )
        return outcome


def _prepare_locale(sandbox: Sandbox, name: str) -> tuple[bool, str]:
    """Does `name` work here? The image's, else the host's compiled copy (the one the
    wrapped verifier ships, `LOCPATH`), tried from a scratch directory removed at once."""
    have = sandbox.exec("locale -a 2>/dev/null", timeout_s=10).stdout.lower().split()
    if name.lower().replace("utf-8", "utf8") in have:
        return True, f"the image's {name}"
    files = host_locale(name)
    if files is None:
        return False, f"{name} is neither in the image nor compilable on the host"
    scratch = "/tmp/.t1-probe/locale"
    for rel, data in files.items():
        sandbox.upload({posixpath.basename(rel): data}, f"{scratch}/{posixpath.dirname(rel)}")
    out = sandbox.exec(
        f"LOCPATH={scratch} LC_ALL={name} bash -c 'printf %.1f 1' 2>/dev/null; "
        "rm -rf /tmp/.t1-probe",
        timeout_s=10,
    ).stdout
    if out.strip() != "1,0":  # the German decimal comma
        return False, f"the shipped {name} did not load (printf gave {out.strip()!r})"
    return True, f"the shipped {name}"


def _prepare_faketime(sandbox: Sandbox) -> tuple[bool, str]:
    """Can the clock be shifted here? The image's libfaketime, else the host's (the copy the
    wrapped verifier ships), tried from a scratch directory removed again at once so the
    verifier's run depends on nothing the agent phase left. (False, why) when it cannot."""
    have = " ".join(f"[ -f {lib} ] && echo {lib};" for lib in FAKETIME_LIBS)
    found = sandbox.exec(have + " true", timeout_s=10).stdout.split()
    lib, scratch = (found[0], None) if found else (None, "/tmp/.t1-probe")
    if scratch is not None:
        data = host_faketime()
        if data is None:
            return False, "libfaketime is neither in the image nor on the host"
        sandbox.upload({"libfaketime.so.1": data}, scratch)
        lib = f"{scratch}/libfaketime.so.1"
    probe = sandbox.exec(
        f"date +%s; LD_PRELOAD={lib} FAKETIME=-86400 date +%s"
        + (f"; rm -rf {scratch}" if scratch else ""),
        timeout_s=10,
    ).stdout.split()
    try:
        shift = int(probe[1]) - int(probe[0])
    except (IndexError, ValueError):
        return False, f"{lib} did not load"
    if abs(shift + 86400) > 60:
        return False, f"{lib} did not shift the clock"
    return True, "the image's libfaketime" if scratch is None else "the shipped libfaketime"


def age_command(paths: list[str], seconds: int) -> str:
    """Shell that moves the modification time of every file and directory under `paths`
    back by `seconds`, keeping their order: the verifier then runs as if it ran that much
    later than the agent, with the kernel's and the verifier's clocks still agreeing."""
    q = " ".join(shlex.quote(p) for p in paths)
    return (
        f"find {q} -xdev -not -path '*/.git/*' 2>/dev/null | head -n 20000 | "
        'while IFS= read -r p; do m=$(stat -c %Y -- "$p") && '
        f'touch -h -m -d "@$((m - {int(seconds)}))" -- "$p"; done; true'
    )


def order_applied(dirs: list[str], moved: int, reversed_: bool, why: str) -> tuple[bool, str]:
    """(applied, detail) of the order condition (pure): applied when the readdir library
    reverses listings for the verifier or re-creating entries changed the listing order of
    `moved` directories. Neither (a filesystem that lists by name hash, as ext4 does, and an
    image whose libc refuses the library) is a rerun that did not run, never a stable one."""
    shown = dirs[:3]
    if reversed_:
        return True, f"entries of {shown} re-created ({moved} directories moved); {why}"
    if moved:
        return True, f"entries of {shown} re-created: {moved} directories list in another " + (
            f"order; readdir as the kernel lists ({why})"
        )
    return False, (
        f"listing order unchanged: re-creating the entries of {shown} moved no directory's "
        f"listing and readdir is as the kernel lists ({why})"
    )


def moved_dirs(shuffle_output: str) -> int:
    """How many directories `shuffle_command` reordered (its output, pure)."""
    return sum(1 for line in shuffle_output.splitlines() if line.startswith("moved "))


def shuffle_command(dirs: list[str]) -> str:
    """Shell that changes the order readdir() lists each directory's entries in (the
    directories and their subdirectories, two levels): entries are re-created in reverse
    listing order, and once more in listing order when the filesystem lists newest first,
    so the order differs either way. Only single-link files and symlinks move: renaming a
    directory or a hard link on an overlay copies it up and would break what the verifier
    checks (links, inodes). Prints `moved <dir>` for each directory whose listing changed."""
    q = " ".join(shlex.quote(d) for d in dirs)
    return (
        "reorder() {\n"
        '  d=$1; list=$(ls -U -A -- "$d" 2>/dev/null) || return 0\n'
        "  for pass in rev fwd; do\n"
        '    if [ $pass = rev ]; then order=$(printf "%s\\n" "$list" | tac); else order=$list; fi\n'
        '    printf "%s\\n" "$order" | while IFS= read -r e; do\n'
        '      [ -n "$e" ] || continue; p="$d/$e"\n'
        '      if [ -L "$p" ] || { [ -f "$p" ] && [ "$(stat -c %h -- "$p")" = 1 ]; }; then\n'
        '        mv -- "$p" "$p.t1o" && mv -- "$p.t1o" "$p"\n'
        "      fi\n"
        "    done\n"
        '    [ "$(ls -U -A -- "$d")" != "$list" ] && { echo "moved $d"; return 0; }\n'
        "  done\n"
        "}\n"
        f"find {q} -maxdepth 2 -type d -not -path '*/.git*' 2>/dev/null | head -n 200 | "
        'while IFS= read -r d; do reorder "$d"; done; true'
    )


class VerifierTraceAgent:
    """Runs the reference solution, then the verifier once more inside the agent's sandbox,
    under the host's strace (its files staged at /tests, its report directory at
    /logs/verifier, both removed again): `trace` is what the verifier opened, found and
    connected to (`audit.traces`). The trial's own verdict is not evidence (the verifier ran
    where the agent's phase could see it); only the trace is. `detail` says why there is no
    trace (strace missing or refused)."""

    name = "verifier-trace"

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.trace: Trace | None = None
        self.detail = ""

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        from sandbox.judge import REPORT_DIR as VERIFIER_LOGS
        from sandbox.judge import TESTS_DIR

        outcome = _solve(sandbox, task, deadline)
        st, self.detail = ship_strace(sandbox)
        if st is None:
            return outcome
        sandbox.upload(task.verifier, TESTS_DIR)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        log = f"{TRACE_DIR}/verifier"
        traced = traced_to_its_end(f"env {env} {st}", log, f"bash {TESTS_DIR}/test.sh")
        sandbox.exec(
            f"mkdir -p {VERIFIER_LOGS}; {traced} >/dev/null 2>&1; true",
            timeout_s=task.limits.verifier_timeout_s + 30,
            cwd=task.environment.workdir,
        )
        data = sandbox.download(log).get("verifier", b"")
        sandbox.exec(f"rm -rf {TESTS_DIR} {VERIFIER_LOGS} /tmp/.t1-probe", timeout_s=30, cwd="/")
        self.trace = parse_trace(data.decode("utf-8", "replace"))
        return outcome


class AnswerSwapAgent:
    """Runs the reference solution, then replaces its outputs with other well-formed
    answers (`answers`: path -> text, e.g. what the same solution wrote for perturbed
    inputs): a verifier that still passes every assertion does not check the answer."""

    def __init__(self, label: str, answers: dict[str, str]) -> None:
        self.answers = answers
        self.name = f"answer-{label}"

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        outcome = _solve(sandbox, task, deadline)
        _write_answers(sandbox, task, self.answers)
        return outcome


def _write_answers(sandbox: Sandbox, task: Task, answers: dict[str, str]) -> None:
    """Replace the solution's outputs by `answers` (path -> text), keeping each file's mode."""
    if not task.keep_agent_processes:  # a job it left running must not write after us
        sandbox.session().close()
    for path, text in answers.items():
        q = shlex.quote(path)
        mode = sandbox.exec(f"stat -c %a {q}", timeout_s=10).stdout.strip() or "644"
        parent, base = posixpath.split(path)
        sandbox.upload({base: text.encode()}, parent)
        sandbox.exec(f"chmod {shlex.quote(mode)} {q}", timeout_s=10)


class StartingStateAgent:
    """Does nothing but delete `paths` from the starting state (the files the image ships
    where the task's outputs go): compared with the nop run, the assertions those files
    alone earn."""

    name = "nop-without-shipped-outputs"

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        q = " ".join(shlex.quote(p) for p in self.paths)
        sandbox.exec(f"rm -rf -- {q}; true", timeout_s=30, cwd="/")
        return AgentOutcome(exit_code=0)


FAST_CLOCK_RATE = 10  # the solution's clocks run this many times faster: sleeps shrink


class FastClockOracleAgent:
    """Runs the reference solution with its clocks running FAST_CLOCK_RATE times faster
    (libfaketime, the image's or the host's): every sleep and timed wait shrinks, so a
    solution that synchronizes by sleeping (a background job it never waits for) loses the
    race its author won. `applied` is False where the library does not load."""

    def __init__(self, rate: int = FAST_CLOCK_RATE) -> None:
        self.rate = rate  # 1: the library loaded, the clock at its real rate (the control)
        self.name = "oracle-fast-clock" if rate != 1 else "oracle-clock-control"
        self.applied = False
        self.detail = ""

    def run(self, sandbox: Sandbox, task: Task, deadline: float) -> AgentOutcome:
        if task.solution is None:
            return _solve(sandbox, task, deadline)
        have = " ".join(f"[ -f {lib} ] && echo {lib};" for lib in FAKETIME_LIBS)
        found = sandbox.exec(have + " true", timeout_s=10).stdout.split()
        lib = found[0] if found else f"{TRACE_DIR}/libfaketime.so.1"
        if not found:
            data = host_faketime()
            if data is None:
                self.detail = "libfaketime is neither in the image nor on the host"
                return _solve(sandbox, task, deadline)
            sandbox.upload({"libfaketime.so.1": data}, TRACE_DIR)
        fake = f"FAKETIME='+0 x{self.rate}' LD_PRELOAD={lib}"
        probe = sandbox.exec(
            f"s=$(date +%s%N); {fake} sleep 2; echo $(( ($(date +%s%N) - s) / 1000000 ))",
            timeout_s=30,
        )
        took = probe.stdout.strip().splitlines()[-1:] or ["x"]
        if self.rate > 1 and (not took[0].isdigit() or int(took[0]) > 1500):
            self.detail = f"{lib} did not speed the clock up (sleep 2 took {took[0]} ms)"
            sandbox.exec("rm -rf /tmp/.t1-probe", timeout_s=10)
            return _solve(sandbox, task, deadline)
        self.applied = True
        self.detail = f"the solution's clocks {self.rate}x faster ({lib})"
        sandbox.upload(task.solution, SOLUTION_DIR)
        r = sandbox.session().run(
            f"{fake} bash {SOLUTION_DIR}/solve.sh",
            timeout_s=max(0.1, deadline - time.monotonic()),
        )
        sandbox.exec("rm -rf /tmp/.t1-probe", timeout_s=10)
        return AgentOutcome.from_exec(r)
