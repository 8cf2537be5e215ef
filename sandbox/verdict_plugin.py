"""The test runner's end of the verifier's report channel: a pytest plugin (docs/sandbox.md,
"The report channel").

Not imported by the project: `sandbox.verdict_channel` ships this file's text into the
verifier's view (/tests/.t1-verdict/t1_verdict.py, on PYTHONPATH) with a `pytest11` entry
point, so every pytest the verifier starts loads it. It runs on the image's Python, so it is
stdlib-only and written for Python 3.6.

The channel's sitecustomize opens the channel when a pytest process starts (`open_early`, this
file loaded as `t1_verdict_early`), before pytest reads a configuration file of the agent's
project; the plugin takes that channel over when pytest configures itself. Where nothing
opened it yet (a pytest run by `pytest.main` in a Python process), the plugin opens it when
pytest configures itself (before it imports a test module, so before any test runs).

Opening reads the run's key from the file T1_VERDICT_KEY names and destroys it (unlink, else
truncate), makes this process non-dumpable (its memory, environment and descriptors are then
out of reach of the tests' children through /proc and ptrace, which need CAP_SYS_PTRACE that
no sandbox process has) and marks the environment, so that a pytest the tests start stays
silent. It then appends to T1_VERDICT_RECORDS one line per test outcome and one closing line,
each authenticated: HMAC-SHA256 under the key over the record, which carries its sequence
number. A pytest that finds the key already destroyed (a second run of the entry script, or a
forger's) writes a line that cannot authenticate, which voids the run's records.

Test runners other than pytest speak the same protocol through `open_runner` (the seeds'
run_checks.py loads this file by path): the first record names the runner, so the harness
records where the verdict came from.

The judge's side of the trust boundary (docs/sandbox.md, "The judge"), in every test runner:
- every program the runner starts runs in the agent's domain (`guard_programs`: subprocess,
  os.system, os.fork and os.posix_spawn): a Landlock domain that cannot read the report
  directory, writes only in the agent's outputs (T1_AGENT_OUTPUTS) and scratch places, and
  cannot trace or reach the judge's processes through /proc; as the agent's uid (T1_AGENT_IDS)
  where the kernel has no Landlock; with no new privileges either way;
- no module file of the agent's (owned by its uid) stands in for a module the image provides:
  an import resolves as if the agent's files were not on the path (`guard_imports`: a
  `pytest.py` or `xml/` in the working directory of `python -m pytest`);
- pytest reads no conftest and no configuration file of the agent's (`guard_pytest_config`);
- in a rerun the judge asks for (T1_ISOLATE), a module of the agent's executes in a host
  process of its own, in the agent's domain narrowed to the scratch places, and only values
  cross (`_isolation`, t1_isolate.py beside this file).
"""

import ctypes
import hashlib
import hmac
import importlib.machinery
import json
import os
import stat
import sys

AGENT_ENV = "T1_AGENT_IDS"  # "uid:gid" of the agent in the verifier's sandbox
KEY_ENV = "T1_VERDICT_KEY"
RECORDS_ENV = "T1_VERDICT_RECORDS"
EARLY_MODULE = "t1_verdict_early"
NESTED_ENV = "T1_VERDICT_NESTED"
PR_SET_DUMPABLE = 4
MAX_MESSAGE = 2000
ISOLATE_ENV = "T1_ISOLATE"  # "1": the agent's modules run in a process of their own
HOST_ENV = "T1_ISOLATED_HOST"  # set by t1_isolate for the host it starts


RATCHET = b"t1-verdict agent code"


def ratchet(key):
    """The key that signs the records after an `agent_code` one: SHA-256 of RATCHET and the
    key before (a bytearray; the harness derives the same)."""
    h = hashlib.sha256(RATCHET)
    h.update(key)
    return bytearray(h.digest())


def _wipe(buf):
    for i in range(len(buf)):
        buf[i] = 0


class _Channel:
    def __init__(self, key, fd):
        self.key = key if isinstance(key, bytearray) else bytearray(key)  # no copy left over
        self.fd = fd
        self.seq = 0
        self.tests = 0
        self.current = ""  # the test running now ('' between tests)
        self.worded = set()  # tests named in an `agent_word` record

    def word(self, op):
        """The test running now handed its judgment to a value of the agent's isolated
        module (`op`: a comparison, a truth, a membership, a class check): an `agent_word`
        record naming it, once a test. Its outcome is then the agent's word, not the judge's."""
        if self.current not in self.worded:
            self.worded.add(self.current)
            self.emit("agent_word", test=self.current, op=str(op))

    def agent_code(self, path):
        """This runner is about to execute `path`, a file of the agent's, in its own process
        (told once a file by `watch_agent_code`): an `agent_code` record, then the records go
        on under `ratchet(key)` and the key is wiped. Once running here the agent's code can
        add records (what it does in this process is not the judge's own), never remove this
        one or change one before it."""
        self.emit("agent_code", path=path, tests=self.tests, test=self.current)
        new = ratchet(self.key)
        _wipe(self.key)
        self.key = new

    def test(self, name, outcome, message="", duration=0.0):
        self.tests += 1
        self.emit("test", name=name, outcome=outcome, message=message[-MAX_MESSAGE:],
                  duration=float(duration))  # fmt: skip

    def end(self, exitstatus):
        self.emit("end", exitstatus=int(exitstatus), tests=self.tests)

    def emit(self, kind, **fields):
        body = dict(fields, seq=self.seq, kind=kind)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(self.key, text.encode("utf-8"), hashlib.sha256).hexdigest()
        line = json.dumps({"b": text, "m": mac}, separators=(",", ":")) + "\n"
        os.write(self.fd, line.encode("utf-8"))
        self.seq += 1


_CHANNEL = None
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def agent_ids():
    """(uid, gid) of the agent in this verifier run, or None."""
    try:
        uid, gid = (int(x) for x in os.environ.get(AGENT_ENV, "").split(":"))
    except ValueError:
        return None
    return uid, gid


def agents(path):
    """Whether the file `path` (links followed: its content) may be the agent's: it belongs
    to neither root nor this process's user (the judge's identity); the agent's outputs are
    carried in owned by the agent's uid or, for what it gave to another user, by that user."""
    if agent_ids() is None:
        return False
    try:
        return os.stat(path).st_uid not in (0, os.getuid())
    except (OSError, ValueError, TypeError):
        return False


# Landlock (linux/landlock.h): the agent's domain for the programs a test runner starts.
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read file, read dir
# execute, write file, read file, truncate (ABI 3): the rights a rule on a file may give
FS_FILE = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14)
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
# Never the agent's, where it writes: a symbolic link (the runner follows it: a link to the
# held-out tests would read them for the agent) and a move between directories (a relative link
# moved up climbs higher than the judge checked when it carried it; Landlock answers EXDEV, so
# `mv` and shutil.move copy instead).
FS_MAKE_SYM, FS_REFER = 1 << 12, 1 << 13
OUTPUTS_ENV = "T1_AGENT_OUTPUTS"  # the agent's outputs (":"-separated): its to write
# The task's tests directory (a top-level one): held out from the agent, so its programs read
# nothing there but what the harness stages for every program (HELD_OUT_SHARED_ENV).
HELD_OUT_ENV = "T1_HELD_OUT"
HELD_OUT_SHARED_ENV = "T1_HELD_OUT_SHARED"  # ":"-separated, below HELD_OUT_ENV's directory
# Where the agent's programs may write besides its outputs: the system's scratch places, never
# a place the judge reads its configuration or its report from.
SCRATCH = ("/tmp", "/var/tmp", "/dev", "/proc")
NO_ACCESS = ("/logs",)  # the report directory and its key: not even readable


LANDLOCK_ENV = "T1_LANDLOCK"  # "off": the judge runs as on a kernel without Landlock


def _landlock_abi(libc):
    if os.environ.get(LANDLOCK_ENV) == "off":
        return -1
    try:
        return int(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0,
                                LANDLOCK_CREATE_RULESET_VERSION))  # fmt: skip
    except Exception:  # noqa: BLE001 - no such call here
        return -1


def _paths(name):
    return [p for p in os.environ.get(name, "").split(":") if p.startswith("/")]


def _below(path, top):
    return bool(top) and (path == top or path.startswith(top.rstrip("/") + "/"))


def agents_module(path):
    """Whether the module file `path` may be the agent's: owned by it (`agents`) or lying where
    the agent's programs write (its outputs, the scratch places). In the agent's Landlock
    domain a program keeps the runner's uid, so a file it writes while the tests run is owned
    as the judge's are; a module the runner imports after that is judged by its place."""
    if agents(path):
        return True
    if agent_ids() is None:
        return False
    real = os.path.realpath(path)
    return any(_below(real, p) for p in [*_paths(OUTPUTS_ENV), *SCRATCH])


ROOT_NAMES_ENV = "T1_ROOT_NAMES"


def _root_names():
    """The names in /, as the runner listed them (a program of the task's, in a domain that
    reads below each of them, cannot list / itself)."""
    try:
        names = os.listdir("/")
    except OSError:
        return [n for n in os.environ.get(ROOT_NAMES_ENV, "").split("/") if n]
    os.environ[ROOT_NAMES_ENV] = "/".join(names)
    return names


def _agent_ruleset(libc, abi, held_out=True, outputs=True):
    """The agent's Landlock ruleset, made once in the runner (its fd is inherited by every
    child, which enters it with `_enter`): read anywhere but the report directory and, when
    `held_out`, the task's tests (but what the harness stages there for every program), write
    only in the agent's outputs and scratch places, no ptrace of a process outside the domain (a
    Landlock rule of its own); when `held_out`, no link made and nothing moved between
    directories (FS_MAKE_SYM, FS_REFER); without `outputs`, writes only in the scratch places
    (the isolated host of the agent's modules: what it changes no later test reads). Signals
    and abstract sockets are not scoped: each
    program the runner starts enters a domain of its own, and the agent's programs must reach
    each other (a daemon one test starts, another stops); a signal to the judge can only cost
    the agent its trial (a killed or stopped runner leaves no closed records). Raises
    OSError."""
    handled = FS_BY_ABI[max(a for a in FS_BY_ABI if a <= abi)]
    scoped = 0
    attr = (ctypes.c_uint64 * 3)(handled, 0, scoped)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def allow(path, access):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
            rule = ctypes.create_string_buffer(12)  # struct landlock_path_beneath_attr, packed
            mask = handled if is_dir else FS_FILE & handled
            ctypes.c_uint64.from_buffer(rule, 0).value = access & mask
            ctypes.c_int32.from_buffer(rule, 8).value = fd
            if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0):
                raise OSError(ctypes.get_errno(), "landlock_add_rule " + path)
        finally:
            os.close(fd)

    held = os.environ.get(HELD_OUT_ENV, "") if held_out else ""
    try:
        for name in _root_names():
            if "/" + name not in NO_ACCESS and "/" + name != held:
                allow("/" + name, FS_READ)
        for path in _paths(HELD_OUT_SHARED_ENV) if held else ():
            if _below(path, held):
                allow(path, FS_READ)
        writable = _paths(OUTPUTS_ENV) if outputs else []
        write = handled & ~(FS_MAKE_SYM | FS_REFER) if held_out else handled
        for path in [*SCRATCH, *writable]:
            if not any(_below(path, n) for n in NO_ACCESS):
                allow(path, write)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _enter(libc, ruleset):
    """This process (a child about to run a program) into the agent's domain, with no new
    privileges. Raises OSError when it cannot."""
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


# Where the kernel has no Landlock: the agent's programs make no symbolic link (Landlock's
# MAKE_SYM), by a seccomp filter (linux/seccomp.h, linux/filter.h): the runner would follow a
# link made to the tests. Per audit architecture: symlink, symlinkat (x32 numbers included).
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EACCES = 0x7FFF0000, 0x00050000, 13
NO_LINK_SYSCALLS = (
    (0xC000003E, (88, 266, 0x40000000 | 88, 0x40000000 | 266)),  # x86_64 (and x32)
    (0xC00000B7, (36,)),  # aarch64
    (0x40000003, (83, 304)),  # i386
)


def no_links_program():
    """The classic BPF program (code, jt, jf, k) that refuses NO_LINK_SYSCALLS with EACCES and
    allows every other call, on every architecture (pure)."""
    ld_word, jeq, ret = (
        0x20,
        0x15,
        0x06,
    )  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    prog = [(ld_word, 0, 0, 4)]  # seccomp_data.arch
    deny_at = []  # (index of a jump to the refusal)
    for arch, numbers in NO_LINK_SYSCALLS:
        prog.append((jeq, 0, len(numbers) + 2, arch))
        prog.append((ld_word, 0, 0, 0))  # seccomp_data.nr
        for nr in numbers:
            deny_at.append(len(prog))
            prog.append((jeq, 0, 0, nr))
        prog.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    prog.append((ret, 0, 0, SECCOMP_RET_ALLOW))  # an architecture not listed
    deny = len(prog)
    prog.append((ret, 0, 0, SECCOMP_RET_ERRNO | EACCES))
    for i in deny_at:
        code, _, jf, k = prog[i]
        prog[i] = (code, deny - i - 1, jf, k)
    return prog


def _no_links(libc):
    """Install `no_links_program` in this process (no_new_privs already set); raises OSError
    when the kernel refuses it."""

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]  # fmt: skip

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    insns = no_links_program()
    table = (Insn * len(insns))(*[Insn(*i) for i in insns])
    prog = Prog(len(insns), ctypes.cast(table, ctypes.POINTER(Insn)))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


_SHELL_OPERATORS = set(";&|<>$`(){}[]*?~!#\\\n'\"")


def task_program(args, executable=None, shell=False, cwd=None, path=None):
    """Whether a program a runner starts is the task's own rather than the agent's: its file,
    or the script that a program of the image's runs as its first argument, lies in the
    held-out tests directory (`[sys.executable, HERE / "validate.py", output]`: a validator
    shipped beside the tests). The task's programs read the tests directory; the agent's
    cannot. A shell command is the task's only when it is one such command with no shell
    syntax (nothing else could start beside it). `path`: the PATH a bare name is found on."""
    held = os.environ.get(HELD_OUT_ENV, "")
    if not held:
        return False
    try:
        if isinstance(args, (str, bytes)) or hasattr(args, "__fspath__"):
            text = os.fsdecode(args)
            if shell and _SHELL_OPERATORS.intersection(text):
                return False
            argv = text.split() if shell else [text]
        elif shell:
            return False
        else:
            argv = [os.fsdecode(a) for a in args]
    except TypeError:
        return False
    if not argv:
        return False
    base = os.fsdecode(cwd) if cwd is not None else os.getcwd()

    def resolve(name, lookup):
        if lookup and "/" not in name:
            import shutil

            name = shutil.which(name, path=path) or ""
            if not name:
                return ""
        return os.path.realpath(os.path.join(base, name))

    def held_file(name):
        shared = _paths(HELD_OUT_SHARED_ENV)
        return _below(name, held) and not any(_below(name, s) for s in shared)

    prog = resolve(os.fsdecode(executable) if executable else argv[0], True)
    if not prog or held_file(prog):
        return bool(prog)
    return len(argv) > 1 and not agents_module(prog) and held_file(resolve(argv[1], False))


def _tests_gid(default):
    """The group the held-out tests belong to (sandbox.judge.tests_group), read from their
    directory; `default` where it is root's or cannot be read."""
    try:
        gid = os.stat(os.environ.get(HELD_OUT_ENV) or "/nonexistent").st_gid
    except OSError:
        return default
    return gid or default


def guard_programs():
    """From now on every program this process starts is the agent's: it runs in the agent's
    Landlock domain (`_agent_ruleset`: the judge's report, key, configuration and processes
    out of its reach) where the kernel has Landlock, else as the agent's uid and gid (no
    supplementary group, no capability; the tests' temporary files given to it). No new
    privileges either way: a setuid binary does not raise it. A child that cannot be made the
    agent's does not run (fail closed). Cost: a child is forked rather than vforked and runs a
    little Python first, about 6 ms of CPU per program (measured on the host)."""
    ids = agent_ids()
    if ids is None or getattr(os, "_t1_guarded", False):
        return
    uid, gid = ids
    tests_gid = _tests_gid(gid)
    if os.getuid() == uid and os.getegid() == gid:
        return  # the agent's already, holding nothing of the judge's
    setattr(os, "_t1_guarded", True)  # noqa: B010 - once per process
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = _landlock_abi(libc)
    ruleset = _agent_ruleset(libc, abi) if abi >= 1 else -1
    tasks = _agent_ruleset(libc, abi, held_out=False) if abi >= 1 else -1
    isolating = os.environ.get(ISOLATE_ENV) == "1"
    hosts = _agent_ruleset(libc, abi, outputs=False) if abi >= 1 and isolating else -1
    done = []  # type: list[bool]  # set in a child once it is the agent's

    def become_agent(task=False, host=False):
        if done:
            return
        if ruleset >= 0:
            if os.getuid() != uid:
                _enter(libc, tasks if task else (hosts if host and hosts >= 0 else ruleset))
            done.append(True)
            return
        group = tests_gid if task else gid  # a program of the task's reads the tests (0640)
        if os.getuid() == uid:  # started by a program of the task's: its group dropped
            if os.getegid() != group:
                os.setresgid(gid, group, group)
            if not task:
                _no_links(libc)
            return
        for fd in (0, 1, 2):  # its own pipes and pytest's capture file, reopenable by it
            try:  # (`> /dev/stderr`); never a file of the judge's with a name
                st = os.fstat(fd)
                if (
                    stat.S_ISFIFO(st.st_mode)
                    or stat.S_ISSOCK(st.st_mode)
                    or (stat.S_ISREG(st.st_mode) and st.st_nlink == 0)
                ):
                    os.fchown(fd, uid, gid)
            except OSError:
                pass
        os.setgroups([])
        os.setresgid(gid, group, group)
        os.setresuid(uid, uid, uid)
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        if not task:
            _no_links(libc)

    import subprocess
    import threading

    popen_init = subprocess.Popen.__init__
    starting = threading.local()

    def __init__(self, *args, **kwargs):
        argv = list(args)
        theirs = argv[6] if len(argv) > 6 else kwargs.get("preexec_fn")

        def given(i, name, default=None):
            return argv[i] if len(argv) > i else kwargs.get(name, default)

        env = given(10, "env")
        try:
            task = task_program(
                given(0, "args"), given(2, "executable"), given(8, "shell", False),
                given(9, "cwd"), (env if env is not None else os.environ).get("PATH"),
            )  # fmt: skip
        except Exception:  # noqa: BLE001 - not known to be the task's: the agent's
            task = False
        host = not task and (env or {}).get(HOST_ENV) == "1"

        def preexec():
            become_agent(task, host)
            if theirs is not None:
                theirs()

        if len(argv) > 6:
            argv[6] = preexec
        else:
            kwargs["preexec_fn"] = preexec
        starting.task, starting.host = task, host  # the at-fork hook runs in the child first
        try:
            popen_init(self, *argv, **kwargs)
        finally:
            starting.task, starting.host = False, False

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]

    def system(command):
        code = subprocess.call(command, shell=True)
        return code << 8 if code >= 0 else -code

    os.system = system

    def in_child():
        try:
            become_agent(getattr(starting, "task", False), getattr(starting, "host", False))
        except BaseException:  # noqa: BLE001 - a child that is not the agent does not run
            os._exit(127)

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=in_child)

    def spawn(path, argv, env, *rest, **kw):
        pid = os.fork()  # in_child above runs in it
        if pid == 0:
            try:
                os.execve(path, argv, env)
            finally:
                os._exit(127)
        return pid

    def spawnp(file, argv, env, *rest, **kw):
        pid = os.fork()
        if pid == 0:
            try:
                os.execvpe(file, argv, env)
            finally:
                os._exit(127)
        return pid

    if hasattr(os, "posix_spawn"):
        os.posix_spawn, os.posix_spawnp = spawn, spawnp
    if ruleset < 0:
        _hand_temporaries_over(uid, gid)


def give(path, uid, gid, fd=None):
    """A file or directory the runner made for the programs it starts becomes theirs (a
    non-root runner, which cannot chown, opens its mode instead)."""
    try:
        if fd is not None:
            os.fchown(fd, uid, gid)
        else:
            os.chown(path, uid, gid)
    except OSError:
        try:
            mode = 0o777 if os.path.isdir(path) else 0o666
            if fd is not None:
                os.fchmod(fd, mode)
            else:
                os.chmod(path, mode)
        except OSError:
            pass


def _hand_temporaries_over(uid, gid):
    """The tests' temporary files and directories (tempfile, pytest's tmp_path) are made for
    the programs the tests run, which are the agent's uid: they become the agent's (tempfile
    makes them 0700/0600, the runner's alone), and so does what the runner writes below such
    a directory (a project the test copied there for the agent's `make`, a database for its
    queries), given again before each program starts (`os.register_at_fork`): as in the
    agent's Landlock domain, where its programs write the temporary places as the runner's
    uid."""
    import tempfile

    given = []  # type: list[str]

    def give_again():
        me = os.getuid()
        for top in given:
            for d, dirs, files in os.walk(top):
                for name in dirs + files:
                    path = os.path.join(d, name)
                    try:
                        if os.lstat(path).st_uid == me:
                            os.lchown(path, uid, gid)
                    except OSError:
                        pass

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=give_again)
    mkdtemp = tempfile.mkdtemp

    def mkdtemp_given(*args, **kwargs):
        path = mkdtemp(*args, **kwargs)
        give(path, uid, gid)
        given.append(os.path.abspath(path))
        return path

    tempfile.mkdtemp = mkdtemp_given
    inner = getattr(tempfile, "_mkstemp_inner", None)
    if inner is not None:

        def mkstemp_given(*args, **kwargs):
            fd, name = inner(*args, **kwargs)
            give(name, uid, gid, fd)
            return fd, name

        tempfile._mkstemp_inner = mkstemp_given  # type: ignore[attr-defined]
    try:
        import _pytest.pathlib as pathlib_
        import _pytest.tmpdir as tmpdir_
    except ImportError:
        return
    numbered = pathlib_.make_numbered_dir

    def make_numbered_dir_given(root, *args, **kwargs):
        path = numbered(root, *args, **kwargs)
        try:
            os.chmod(str(root), os.stat(str(root)).st_mode | 0o111)  # traversable
        except OSError:
            pass
        give(str(path), uid, gid)
        given.append(os.path.abspath(str(path)))
        return path

    pathlib_.make_numbered_dir = make_numbered_dir_given
    if getattr(tmpdir_, "make_numbered_dir", None) is numbered:
        setattr(tmpdir_, "make_numbered_dir", make_numbered_dir_given)  # noqa: B010


class _ImportGuard:
    """A meta path finder: a module resolves as if the agent's files were not on the path
    whenever the image provides a module of that name (the agent's file would stand in for
    it); modules only the agent provides (its solution) import as usual."""

    _t1_guard = True
    _finder = importlib.machinery.PathFinder

    def find_spec(self, name, path=None, target=None):
        finder = self._finder
        spec = finder.find_spec(name, path)
        origin = getattr(spec, "origin", None)
        if spec is None or not origin or not os.path.isabs(origin) or not agents_module(origin):
            return spec
        for entry in sys.path if path is None else path:  # the first that is not the agent's
            alt = finder.find_spec(name, [entry])
            alt_origin = getattr(alt, "origin", None)
            if alt_origin and os.path.isabs(alt_origin) and not agents_module(alt_origin):
                return alt
        return spec


def guard_imports():
    if agent_ids() is not None and not any(getattr(f, "_t1_guard", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportGuard())


def guard_pytest_config():
    """pytest (6.1 to 9) reads no conftest.py and no ini/toml/cfg file of the agent's: an
    agent's conftest imports as an empty module, its configuration file as none."""
    try:
        import types

        from _pytest.config import PytestPluginManager, findpaths
    except ImportError:
        return
    if getattr(PytestPluginManager, "_t1_guarded", False):
        return
    setattr(PytestPluginManager, "_t1_guarded", True)  # noqa: B010 - once per process
    importconftest = PytestPluginManager._importconftest

    def _importconftest(self, conftestpath, *args, **kwargs):
        if agents(str(conftestpath)):
            return types.ModuleType("t1_refused_conftest")
        return importconftest(self, conftestpath, *args, **kwargs)

    PytestPluginManager._importconftest = _importconftest  # type: ignore[method-assign]

    def refusing(load):
        def load_config(filepath, *args, **kwargs):
            if agents(str(filepath)):
                return None
            return load(filepath, *args, **kwargs)

        return load_config

    # pytest 6.1-8 read every file through one function, pytest 9 through loader tables
    if hasattr(findpaths, "load_config_dict_from_file"):
        findpaths.load_config_dict_from_file = refusing(findpaths.load_config_dict_from_file)
    for table in ("CONFIG_LOADERS_BY_NAME", "CONFIG_LOADERS_BY_SUFFIX"):
        loaders = getattr(findpaths, table, None)
        if isinstance(loaders, dict):
            for key in list(loaders):
                loaders[key] = refusing(loaders[key])


def _destroy(path):
    """The key file gone, or emptied where the directory is not ours to change."""
    try:
        os.unlink(path)
        return True
    except OSError:
        pass
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
        return True
    except OSError:
        return False


def _undumpable():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no libc to call: the key cannot be kept
        return False


_HEX_DIGITS = b"0123456789abcdefABCDEF"


def _unhex(text):
    """The bytes the hex digits of the bytearray `text` spell (whitespace skipped), as a
    bytearray, with no copy of them left in an immutable object (`agent_code` wipes the key);
    empty when anything else is there."""
    out, n, half = bytearray(len(text) // 2), 0, None  # filled in place: never reallocated
    for c in text:
        if c in b" \t\r\n":
            continue
        digit = b"0123456789abcdef".find(bytes((c | 0x20,))) if c in _HEX_DIGITS else -1
        if digit < 0:
            _wipe(out)
            return bytearray()
        if half is None:
            half = digit
        else:
            out[n], n, half = half * 16 + digit, n + 1, None
    del out[n:]
    return out


def _open():
    key_path, records = os.environ.get(KEY_ENV), os.environ.get(RECORDS_ENV)
    if not key_path or not records or os.environ.get(NESTED_ENV):
        return None
    os.environ[NESTED_ENV] = str(os.getpid())  # pytest runs the tests start stay silent
    text = bytearray(256)
    try:
        with open(key_path, "rb", buffering=0) as f:
            del text[f.readinto(text) :]
    except OSError:
        del text[:]
    kept = _destroy(key_path) and _undumpable()
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(records, flags, 0o644)
    except OSError:
        _wipe(text)
        return None  # no records at all: the harness scores the run as cut short
    key = _unhex(text)
    _wipe(text)
    if len(key) < 32 or not kept:
        reason = "no key" if len(key) < 32 else "key not kept"
        os.write(fd, (json.dumps({"unkeyed": reason, "pid": os.getpid()}) + "\n").encode())
        os.close(fd)
        return None
    return _Channel(key, fd)


def open_runner(runner):
    """The channel for a test runner other than pytest, opened as pytest opens it (the key read
    and destroyed, the process non-dumpable, nested pytest runs silent, its programs the
    agent's): call it before the tests are imported. None when the run has no channel or the
    key is not there."""
    guard_imports()
    guard_programs()
    channel = _open()
    if channel is not None:
        channel.emit("start", pid=os.getpid(), runner=str(runner))
        watch_agent_code(channel)
    return channel


def watch_agent_code(channel):
    """`channel.agent_code(path)` before this process runs code of the agent's, known by the
    file it comes from rather than by the name the code gives itself (the interpreter's audit
    hook, Python 3.8; none before):
    - a module whose file is the agent's (`agents_module`), whatever loads it: source,
      bytecode with no source beside it (its code objects carry any name the compiler was
      told), a native extension (no Python code object at all), by any route (an import,
      `spec_from_file_location`): marked as the import system makes the module;
    - Python code compiled under the name of a file of the agent's (`runpy`, `exec(compile(
      source, path, ...))`): marked as it executes;
    - a shared library of the agent's loaded by `ctypes`;
    - any pickle that names a global: the data chooses the callables it runs (`exec` among
      them), and whose data it is the judge cannot tell, so every such pickle is marked, named
      by the agent's file the calling frames hold open or by path, else `<pickle>`;
    - any code the tests themselves run with `eval` or `exec` (called from their own files,
      `_the_tests_own`: an answer read as a literal): `<eval>`. Code a library runs (a
      dataclass's methods, `ast.literal_eval`) is the library's, and a string the tests only
      `compile` (to check its syntax) runs nothing.
    """
    if not hasattr(sys, "addaudithook"):
        return
    marked, checked = set(), set()

    def mark(path):
        if path not in marked:
            marked.add(path)
            channel.agent_code(path)

    def from_file(path):
        """Marks `path` when it is the agent's (each file decided once); whether it is."""
        if path not in checked:
            checked.add(path)
            if agents_module(path):
                mark(path)
        return path in marked

    def hook(event, args):
        if event == "exec" and args:
            name = getattr(args[0], "co_filename", None)
            if isinstance(name, str) and name.startswith("/") and from_file(name):
                return
            if EVAL not in marked and _the_tests_own(_caller()):
                mark(EVAL)
        elif event == "ctypes.dlopen" and args and isinstance(args[0], str):
            path = _library(args[0])
            if path is not None and agents_module(path):
                mark(path)
        elif event == "pickle.find_class" and PICKLE not in checked:
            checked.add(PICKLE)
            mark(_pickled_from(_caller()))

    sys.addaudithook(hook)
    _watch_module_specs(from_file, _isolation(channel))


def _isolation(channel):
    """The agent's modules run in a host process of their own, only values crossing
    (t1_isolate.py beside this file), when the judge asks for it and the kernel has Landlock
    (the host's domain writes only in the scratch places: what the agent's code changes there
    no later test reads as the agent's output); else None (they run here, marked)."""
    if os.environ.get(ISOLATE_ENV) != "1" or agent_ids() is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if _landlock_abi(libc) < 1:  # the host would run as the agent's uid: its outputs writable
        return None
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "t1_isolate.py")
    spec = importlib.util.spec_from_file_location("t1_isolate", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Isolation(channel.word)


def _library(name):
    """The file the dynamic loader takes for `name`: a path as given, else the first of
    LD_LIBRARY_PATH's directories that holds it (the system's own directories are the
    image's); None when none does."""
    if "/" in name:
        return os.path.abspath(name)
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        path = os.path.join(d or ".", name)
        if os.path.exists(path):
            return os.path.abspath(path)
    return None


PICKLE = "<pickle>"
EVAL = "<eval>"


def _caller():
    """The Python frame that raised the audit event the hook is in (None: raised from C with
    no Python code above it, as at the interpreter's start)."""
    try:
        return sys._getframe(2)
    except ValueError:
        return None


def _the_tests_own(frame):
    """Whether `frame` runs the task's tests (a file below the held-out tests directory, not
    what the harness stages there): code they run with `eval` or `exec` is made of data, and
    the data is the agent's as often as not (an answer read as a literal, a file of its
    outputs)."""
    name = getattr(getattr(frame, "f_code", None), "co_filename", "")
    held = os.environ.get(HELD_OUT_ENV, "")
    shared = _paths(HELD_OUT_SHARED_ENV)
    return bool(held) and _below(name, held) and not any(_below(name, s) for s in shared)


def _pickled_from(frame, depth=64):
    """The agent's file that the frames calling the unpickler hold: a file open for reading
    (`with open("/app/model.pkl", "rb") as f: pickle.load(f)`), else a path naming a regular
    file (`torch.load(path)`), innermost first; else PICKLE."""
    opened = []  # type: list[str]
    named = []  # type: list[str]
    while frame is not None and depth > 0:
        for value in list(frame.f_locals.values()):
            try:  # any object: its attributes may run code of their own, or raise
                is_file = hasattr(value, "read")
                name = getattr(value, "name", None) if is_file else value
                fspath = getattr(name, "__fspath__", None)
                name = fspath() if callable(fspath) else name
            except Exception:  # noqa: BLE001 - not a file the frame holds
                continue
            if isinstance(name, str) and name.startswith("/"):
                (opened if is_file else named).append(name)
        frame, depth = frame.f_back, depth - 1
    for name in opened + [n for n in named if os.path.isfile(n)]:
        if agents_module(name):
            return name
    return PICKLE


def _watch_module_specs(before, isolation=None):
    """`before(origin)` each time the import system makes a module from a file (every
    loader, every route goes through `module_from_spec`): before a native extension's
    initialisation runs, before a module's code executes. Under `isolation` a module whose
    file is the agent's is made here and executed in the isolated host instead (its loader
    replaced on the spec, which both the import system and the tests' own
    `spec.loader.exec_module(module)` then call)."""
    import importlib._bootstrap as bootstrap
    import importlib.util

    real = bootstrap.module_from_spec

    def module_from_spec(spec):
        origin = getattr(spec, "origin", None)
        if isinstance(origin, str) and origin.startswith("/"):
            if isolation is not None and agents_module(origin):
                spec.loader = isolation.loader(spec)
            else:
                before(origin)
        return real(spec)

    bootstrap.module_from_spec = module_from_spec
    importlib.util.module_from_spec = module_from_spec


def open_early():
    """The channel of a pytest process, opened at its start by the sitecustomize (the start
    record written): kept here until the plugin takes it over."""
    global _CHANNEL
    if _CHANNEL is None:
        _CHANNEL = open_runner("pytest")


def pytest_configure(config):
    """The first pytest of the run records through an object registered with its own plugin
    manager only, so that pytest sessions run inside it (pytester's in-process runs) add
    nothing: the channel the process opened at its start, else one opened now."""
    global _CHANNEL
    guard_programs()
    plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p]
    if "t1_verdict" in plugins:  # named by our sitecustomize, now read: no child inherits it
        plugins.remove("t1_verdict")
        if plugins:
            os.environ["PYTEST_PLUGINS"] = ",".join(plugins)
        else:
            del os.environ["PYTEST_PLUGINS"]
    if _CHANNEL is None:
        early = sys.modules.get(EARLY_MODULE)
        if early is not None and getattr(early, "_CHANNEL", None) is not None:
            _CHANNEL = early._CHANNEL
            setattr(early, "_CHANNEL", None)  # noqa: B010 - taken over: one holder
        else:
            _CHANNEL = open_runner("pytest")
        if _CHANNEL is not None:
            config.pluginmanager.register(_Recorder(_CHANNEL), "t1_verdict_recorder")


def _message(report):
    text = getattr(report, "longreprtext", "") or ""
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        text = str(report.longrepr[2])
    return text[-MAX_MESSAGE:]


def _outcome(report):
    """The outcome one phase's report adds, as pytest's `-rA` summary lists it (None: none)."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpass" if xfail else "passed"
        if report.skipped:
            return "xfail" if xfail else "skipped"
        return "failed"
    if report.failed:
        return "error"
    if report.when == "setup" and report.skipped:
        return "xfail" if xfail else "skipped"
    return None


DESELECT_ENV = "T1_DESELECT"  # tests (node ids, one a line) the judge runs again without


class _Recorder:
    def __init__(self, channel):
        self.channel = channel

    def pytest_collection_modifyitems(self, session, config, items):
        """Leave out the tests the judge names: they ran the agent's code in an earlier run
        of this verifier, and this run judges the others in a runner that has not."""
        names = set(os.environ.get(DESELECT_ENV, "").split("\n")) - {""}
        if not names:
            return
        left = [i for i in items if i.nodeid in names]
        if left:
            items[:] = [i for i in items if i.nodeid not in names]
            config.hook.pytest_deselected(items=left)

    def pytest_runtest_logstart(self, nodeid, location):
        self.channel.current = nodeid

    def pytest_runtest_logfinish(self, nodeid, location):
        self.channel.current = ""

    def pytest_runtest_logreport(self, report):
        outcome = _outcome(report)
        if outcome is not None:
            self.channel.test(
                report.nodeid,
                outcome,
                _message(report) if outcome != "passed" else "",
                getattr(report, "duration", 0.0) or 0.0,
            )

    def pytest_collectreport(self, report):
        if report.failed:
            self.channel.test(report.nodeid or "collection", "error", _message(report))

    def pytest_sessionfinish(self, session, exitstatus):
        self.channel.end(exitstatus)
