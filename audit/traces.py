"""What a traced process tree did, read from `strace -f -y` output (pure).

The executable judge traces two programs: the reference solution (`audit.trials`, the files
it reads and writes, the connections it opens) and the verifier, run once more in the
oracle's sandbox (`audit.trials.VerifierTraceAgent`: the files it checks, the connections it
opens). Evidence is what the programs did, whatever their source spells: a file name put
together at run time, a URL held in a variable, an answer decompressed from a fixture.

`-f` splits a call that another process interrupts into `<unfinished ...>` and
`<... resumed>` halves; they are joined again (`joined`: GNU tar's `creat` of its archive
was split so on some runs, and the shipped stale archive went unnoticed).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

# The syscalls both traces ask for. Opens and stats: the files; execve and the clones: which
# process ran which program (so a program of the agent's that the verifier runs is told
# apart from the verifier); connect: the network.
TRACE_CALLS = (
    "open,openat,openat2,creat,stat,lstat,newfstatat,statx,execve,clone,clone3,fork,vfork,connect"
)
_LINE = re.compile(r"^(\d+) +(\w+)\((.*)\) += (-?\d+|\?)(?:<(.*?)>)?(?: .*)?$")
_FIRST_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')
_CWD = re.compile(r"^(?:AT_FDCWD|\d+)<([^>]*)>, ")
_ARGV = re.compile(r'^"((?:[^"\\]|\\.)*)", \[(.*?)\]')
_INET = re.compile(
    r"sa_family=(AF_INET6?), sin6?_port=htons\((\d+)\).*?"
    r'(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")'
)
_STATS = frozenset({"stat", "lstat", "newfstatat", "statx"})
_OPENS = frozenset({"open", "openat", "openat2", "creat"})
_CLONES = frozenset({"clone", "clone3", "fork", "vfork"})


@dataclass
class Trace:
    """A process tree's file and network activity, in call order."""

    opens: list[tuple[int, str, str]] = field(default_factory=list)  # (pid, path, flags)
    stats: list[tuple[int, str]] = field(default_factory=list)  # (pid, regular file found)
    argv: dict[int, list[str]] = field(default_factory=dict)  # pid -> last program run
    parent: dict[int, int] = field(default_factory=dict)  # child pid -> parent pid
    connects: list[tuple[int, str]] = field(default_factory=list)  # (pid, "family host:port")

    def reads(self) -> list[str]:
        """Files opened for reading (not directories), first read first."""
        out: dict[str, None] = {}
        for _, path, flags in self.opens:
            if "O_DIRECTORY" not in flags and "O_WRONLY" not in flags:
                out.setdefault(path, None)
        return list(out)

    def first_opens(self) -> dict[str, str]:
        """Each file's first open: `read` (its content was used) or `write` (made or
        overwritten before anything read it)."""
        out: dict[str, str] = {}
        for _, path, flags in self.opens:
            if "O_DIRECTORY" in flags or path in out:
                continue
            written = "O_WRONLY" in flags or "O_TRUNC" in flags or "O_CREAT" in flags
            out[path] = "write" if written else "read"
        return out

    def listed(self) -> set[str]:
        """Directories opened for listing."""
        return {path for _, path, flags in self.opens if "O_DIRECTORY" in flags}

    def descends(self, pid: int, roots: set[int]) -> bool:
        seen = set()
        while pid not in roots and pid in self.parent and pid not in seen:
            seen.add(pid)
            pid = self.parent[pid]
        return pid in roots

    def running(self, programs: set[str]) -> set[int]:
        """The processes that ran one of `programs` (as the program or its script argument),
        with every process they started."""
        roots = {pid for pid, argv in self.argv.items() if any(a in programs for a in argv[:3])}
        pids = set(self.argv) | set(self.parent) | {p for p, _, _ in self.opens}
        return {pid for pid in pids if self.descends(pid, roots)}

    def network(self) -> list[str]:
        """Connections to anything but this machine's loopback, and every DNS query (port
        53 wherever it goes): the network a program used or tried to."""
        out: dict[str, None] = {}
        for _, dest in self.connects:
            host, _, port = dest.split(" ", 1)[1].rpartition(":")
            if port == "53" or not _loopback(host):
                out.setdefault(dest, None)
        return list(out)


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1", "0.0.0.0", "::")


def _unescape(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape", "replace")


_UNFINISHED = re.compile(r"^(\d+) +(.*?) *<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+) +<\.\.\. \w+ resumed>(.*)$")


def joined(text: str) -> list[str]:
    """strace's lines with each call that another process interrupted (`<unfinished ...>`,
    later `<... call resumed>`) put back together on one line."""
    pending: dict[str, str] = {}
    out = []
    for line in text.splitlines():
        if (u := _UNFINISHED.match(line)) is not None:
            pending[u[1]] = f"{u[1]} {u[2]}"
        elif (r := _RESUMED.match(line)) is not None:
            if r[1] in pending:
                out.append(pending.pop(r[1]) + r[2])
        else:
            out.append(line)
    return out


def parse_trace(text: str) -> Trace:
    """The calls of `strace -f -y -e trace=TRACE_CALLS` output that completed (interrupted
    ones joined again)."""
    t = Trace()
    for line in joined(text):
        m = _LINE.match(line)
        if m is None:
            continue
        pid, call, args, ret, resolved = int(m[1]), m[2], m[3], m[4], m[5]
        ok = ret != "?" and not ret.startswith("-")
        if call in _OPENS:
            if ok and resolved and resolved.startswith("/"):
                flags = args.rsplit('", ', 1)[-1] if '", ' in args else ""
                if call == "creat":  # creat(path, mode): an open for writing, truncated
                    flags = "O_WRONLY|O_CREAT|O_TRUNC"
                t.opens.append((pid, resolved, flags))
        elif call in _STATS:
            s = _FIRST_STR.search(args)
            if ok and s is not None and s[1] and "S_IFREG" in args:  # files, not directories
                path = _unescape(s[1])
                if not path.startswith("/"):
                    cwd = _CWD.match(args)
                    if cwd is None:
                        continue
                    path = posixpath.normpath(posixpath.join(cwd[1], path))
                t.stats.append((pid, path))
        elif call == "execve":
            a = _ARGV.match(args)
            if ok and a is not None:
                t.argv[pid] = [_unescape(x) for x in _FIRST_STR.findall(a[2])] or [a[1]]
                t.argv[pid][0] = _unescape(a[1])
        elif call in _CLONES:
            if ok and ret.isdigit():
                t.parent[int(ret)] = pid
        elif call == "connect":
            n = _INET.search(args)
            if n is not None:
                t.connects.append((pid, f"{n[1]} {n[3] or n[4]}:{n[2]}"))
    return t


# Files no verifier or solution reads as evidence of anything: the system, interpreters,
# the trial's own plumbing.
SYSTEM_PATHS = re.compile(
    r"^/(proc|sys|dev|usr|lib|lib32|lib64|bin|sbin|etc|run|var/lib/(dpkg|apt)|var/cache/"
    r"(ldconfig|debconf)|tests|logs|tmp/\.t1-probe)(/|$)|/site-packages/|"
    r"/dist-packages/|/__pycache__/|^/root/\.cache/|\.pyc$|/pyvenv\.cfg$|/nsswitch|"
    r"/\.pytest_cache(/|$)|^/tmp/pytest-of-"
)


def checked_files(trace: Trace, programs: set[str]) -> list[str]:
    """The files a verifier opened or found (stat) that exist, that are not the system's,
    its own, or read by the programs in `programs` (the agent's, which the verifier runs),
    in first-access order, with the directories it listed first dropped: a file it found by
    listing its directory is one the agent named, whatever it is called."""
    skip = trace.running(programs)
    listed = {p for pid, p, flags in trace.opens if "O_DIRECTORY" in flags and pid not in skip}
    out: dict[str, None] = {}
    events = [(pid, p, flags) for pid, p, flags in trace.opens]
    events += [(pid, p, "") for pid, p in trace.stats]
    for pid, path, flags in events:
        if pid in skip or "O_DIRECTORY" in flags or "O_WRONLY" in flags:
            continue
        if SYSTEM_PATHS.search(path) or posixpath.dirname(path) in listed:
            continue
        out.setdefault(path, None)
    return list(out)
