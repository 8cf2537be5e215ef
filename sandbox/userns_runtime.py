"""The OCI runtime of the private Podman engine: runc, but each container's user namespace is
owned by an unprivileged host uid of its own, as the local backend's are (sandbox.idmap).

The kernel charges what a namespace's processes hold in per-user counts (inotify instances and
watches, namespaces, pending signals) to the namespace's owner in the parent namespace. runc
makes a container's user namespace itself, as root, so every container's counts were host
root's: one container holding 128 inotify instances made `inotify_init` fail for every root
process of the host and every other sandbox. This runtime makes the namespace first, from a
child that has become `owner_base + the conmon's pid` (a pid lives as long as its container's
conmon, so no two live containers share an owner; the local backend's holders use the same
range and pid space), writes the spec's id maps into it, and hands runc its path. Podman has
prepared the container's storage for those maps, so runc joining the namespace sees what it
would have made.

One more step follows from it. runc sets a new process's resource limits from outside
(`prlimit` on its pid), which needs the caller to own the process's user namespace or to hold
CAP_SYS_RESOURCE; a host root without that capability (this project's CI machine) is neither
for a namespace owned by another uid. So this runtime sets the spec's limits on itself before
it execs runc (the container's first process and every `exec`'s inherit them), and takes them
out of the spec. Lowering a limit needs no privilege; raising one above this process's hard
limit fails here, as runc's own `prlimit` would.

Only `create` (a container's namespace: made unless the spec has none, as an image build's
step, or joins one, as a container in another's namespace does) and `exec` (its limits) are
changed; every other runc command is runc's as it was. Stdlib only: `sandbox.podman` installs
this file behind a shell front that sends only those two commands here (`front_text`).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # each import costs every start of the runtime (ctypes: imported when used)
    from collections.abc import Callable, Sequence
    from pathlib import Path

    Limits = list[tuple[int, int, int]]  # (resource.RLIMIT_*, soft, hard)

CLONE_NEWUSER = 0x10000000
# runc's global options that take a value as the next argument (the rest are flags).
VALUE_OPTIONS = frozenset({"--root", "--log", "--log-format", "--criu", "--rootless"})


def subcommand(args: Sequence[str]) -> int | None:
    """Index of runc's command in `args` (after its global options), or None."""
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            return i
        i += 2 if a in VALUE_OPTIONS else 1
    return None


def option(args: Sequence[str], name: str) -> str | None:
    """The value of `name` (`--name VALUE` or `--name=VALUE`) among a command's arguments."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def id_map(mappings: Sequence[dict]) -> str:
    """An OCI spec's id mappings as /proc/PID/uid_map text."""
    return "".join(f"{m['containerID']} {m['hostID']} {m['size']}\n" for m in mappings)


def namespace_to_make(spec: dict) -> dict | None:
    """The spec's user-namespace entry when the runtime would make it (no `path`), else None."""
    for ns in spec.get("linux", {}).get("namespaces", []):
        if ns.get("type") == "user" and not ns.get("path"):
            return ns
    return None


def take_limits(process: dict) -> Limits:
    """Remove a process's `rlimits` from its spec; (resource, soft, hard) to set on ourselves."""
    return [
        (getattr(resource, r["type"]), int(r["soft"]), int(r["hard"]))
        for r in process.pop("rlimits", None) or []
    ]


def owned_namespace(owner: int, uid_map: str, gid_map: str) -> tuple[int, int]:
    """A user namespace owned by host uid `owner`, with these maps: made by a child that takes
    that uid and unshares, and stays until the returned fd is closed. Returns (pid, fd)."""
    import ctypes

    release_r, release_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the namespace's maker: nothing here may return into the caller's code
        try:
            os.close(release_w)
            os.close(ready_r)
            os.setgroups([])
            os.setresgid(owner, owner, owner)
            os.setresuid(owner, owner, owner)
            if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) != 0:
                os._exit(1)
            os.write(ready_w, b"1")
            os.read(release_r, 1)
        finally:
            os._exit(0)
    os.close(release_r)
    os.close(ready_w)
    ok = os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    if not ok:
        os.close(release_w)
        os.waitpid(pid, 0)
        raise OSError(f"no user namespace could be made for owner {owner}")
    for name, text in (("uid_map", uid_map), ("gid_map", gid_map)):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(text)
    return pid, release_w


def rewrite(path: str, change: Callable[[dict], Limits]) -> Limits:
    """Load the JSON at `path`, apply `change` (it edits the document and returns the limits it
    took), write it back; the limits."""
    with open(path) as f:
        doc = json.load(f)
    limits = change(doc)
    tmp = f"{path}.t1-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
    return limits


def main(argv: Sequence[str], owner_base: int, runc: str) -> int:
    """Run runc with `argv`, making a container's namespace (create) and setting the limits
    (create, exec) first; runc's exit status."""
    args = list(argv)
    at = subcommand(args)
    command = args[at] if at is not None else ""
    rest = args[at + 1 :] if at is not None else []
    made: tuple[int, int] | None = None
    try:
        if command == "create" and option(rest, "--bundle") is not None:

            def own(spec: dict) -> Limits:
                nonlocal made
                ns = namespace_to_make(spec)
                if ns is not None:
                    linux = spec["linux"]
                    made = owned_namespace(
                        owner_base + os.getppid(),
                        id_map(linux.get("uidMappings", [])),
                        id_map(linux.get("gidMappings", [])),
                    )
                    ns["path"] = f"/proc/{made[0]}/ns/user"
                return take_limits(spec.get("process", {}))

            limits = rewrite(os.path.join(str(option(rest, "--bundle")), "config.json"), own)
        elif command == "exec" and option(rest, "--process") is not None:
            limits = rewrite(str(option(rest, "--process")), take_limits)
        else:
            os.execv(runc, [runc, *args])
        for which, soft, hard in limits:
            resource.setrlimit(which, (soft, hard))
    except (OSError, ValueError, KeyError) as e:
        print(f"t1-runc: {command}: {e}", file=sys.stderr)
        if made is not None:
            os.close(made[1])
            os.waitpid(made[0], 0)
        return 1
    if made is None:
        os.execv(runc, [runc, *args])
    pid = os.fork()
    if pid == 0:
        os.close(made[1])
        os.execv(runc, [runc, *args])
    _, status = os.waitpid(pid, 0)
    os.close(made[1])  # runc's container init holds the namespace now (or failed)
    os.waitpid(made[0], 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def front_text(python: str, owner_base: int, runc: str, module: Path) -> str:
    """The runtime's executable, a shell front for this module installed at `module` (a
    `<identifier>.py`): it execs runc itself unless an argument is `create` or `exec` (most
    calls: start, kill, delete, state; a Python start saved each); then `python` (isolated, no
    site) imports the module (its bytecode cached beside it) and runs `main`, which parses
    runc's command line exactly."""
    call = (
        f"import sys; sys.path[:0] = [{str(module.parent)!r}]; import {module.stem} as m; "
        f"sys.exit(m.main(sys.argv[1:], {owner_base!r}, {runc!r}))"
    )
    return (
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  case "$a" in create|exec) exec {python} -IS -c "{call}" "$@" ;; esac\n'
        "done\n"
        f'exec {runc} "$@"\n'
    )
