"""The local backend's seccomp profile: a classic BPF program, handed to bubblewrap
(`--seccomp FD`), that refuses the system calls Docker's default profile refuses to a
container without CAP_SYS_ADMIN — at least as strict, never looser.

Refused with EPERM: new namespaces (`unshare`, `setns`, `clone` with a CLONE_NEW* flag), every
mount API (old and new), keyrings, bpf, perf events, userfaultfd, io_uring, file handles
(`open_by_handle_at`, the 'shocker' escape), kernel modules, kexec, reboot, swap, clocks,
quotas, accounting, syslog, iopl/ioperm. `clone3` answers ENOSYS (its flags live in memory a
filter cannot read), so the C library falls back to `clone`, whose flags it can. Any other
architecture's calling convention (i386 `int 0x80`, the x32 ABI) is refused whole, so a
32-bit entry cannot bypass the table. `ptrace` stays allowed as in Docker: in its own PID
namespace and without CAP_SYS_PTRACE a process can only trace its own kind.

Only x86_64 is described; elsewhere `profile()` returns None and the caller says so.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import struct

# linux/audit.h, linux/seccomp.h, linux/filter.h
AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
X32_SYSCALL_BIT = 0x40000000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (little-endian)

CLONE_NEW_FLAGS = (
    0x00000080  # CLONE_NEWTIME
    | 0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
CLONE, CLONE3 = 56, 435

# x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl) of the refused calls.
REFUSED_X86_64: dict[str, int] = {
    "syslog": 103,
    "uselib": 134,
    "vhangup": 153,
    "pivot_root": 155,
    "_sysctl": 156,
    "adjtimex": 159,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "get_kernel_syms": 177,
    "query_module": 178,
    "quotactl": 179,
    "nfsservctl": 180,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "quotactl_fd": 443,
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program(refused: dict[str, int] = REFUSED_X86_64) -> bytes:
    """The filter as bytes of `struct sock_filter[]` (what `seccomp_export_bpf` writes)."""
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    numbers = sorted(set(refused.values()))
    body: list[tuple[int, int, int, int]] = []
    # Layout: [arch check][nr load][x32 check][one jeq per refused nr][clone3][clone]...
    # Jumps are relative; the targets at the end are ALLOW, DENY, ENOSYS, CLONE-CHECK.
    body.append((BPF_LD_W_ABS, 0, 0, OFFSET_ARCH))
    body.append((BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64))  # x86_64: skip the next (deny)
    body.append((BPF_RET_K, 0, 0, deny))
    body.append((BPF_LD_W_ABS, 0, 0, OFFSET_NR))
    checks: list[tuple[str, int]] = [("x32", X32_SYSCALL_BIT)]
    checks += [("deny", n) for n in numbers]
    checks += [("enosys", CLONE3), ("clone", CLONE)]
    # Tail: index 0 ALLOW, 1 DENY, 2 ENOSYS, 3.. the clone flag check (load arg0, jset, allow).
    tail = [
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (BPF_RET_K, 0, 0, deny),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        (BPF_JSET_K, 0, 1, CLONE_NEW_FLAGS),  # a namespace flag: to DENY (next), else ALLOW
        (BPF_RET_K, 0, 0, deny),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    target = {"deny": 1, "enosys": 2, "clone": 3}
    n_checks = len(checks)
    for i, (kind, k) in enumerate(checks):
        # distance from the instruction after this one to the tail's start
        to_tail = n_checks - i - 1
        if kind == "x32":
            body.append((BPF_JGE_K, to_tail + target["deny"], 0, k))
        else:
            body.append((BPF_JEQ_K, to_tail + target[kind], 0, k))
    insns = body + tail
    if len(insns) > 4096:  # BPF_MAXINSNS
        raise ValueError(f"seccomp program too long: {len(insns)} instructions")
    return b"".join(_insn(*i) for i in insns)


def profile() -> bytes | None:
    """The program for this machine's architecture, or None where none is described."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return _PROGRAM


def profile_fd() -> int | None:
    """A fresh file descriptor (not inherited by default) reading the program from its
    start, for one `bwrap --seccomp FD`; the caller passes it to the child and closes it."""
    prog = profile()
    if prog is None:
        return None
    fd = os.memfd_create("t1-seccomp", os.MFD_CLOEXEC)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_PROGRAM = program()


ENGINE_DEFAULT_PROFILES = ("/usr/share/containers/seccomp.json", "/etc/containers/seccomp.json")


def docker_profile(base: dict | None = None, refused: dict[str, int] | None = None) -> str:
    """The same refusals as a Docker/OCI seccomp profile (JSON, for `--security-opt
    seccomp=`): the engine's own default profile (`base`, else Podman's file where present)
    with every REFUSED_X86_64 call and the namespace forms of `clone` taken out of its allow
    rules, so it is at least as strict as both. Podman's default allows unshare, setns,
    mount and keyctl to a container without CAP_SYS_ADMIN; this one does not."""
    if base is None:
        base = _engine_default()
    calls = REFUSED_X86_64 if refused is None else refused
    refused_names = set(calls) | {"clone", "clone3"}
    syscalls = []
    for rule in base.get("syscalls", []):
        if rule.get("action") == "SCMP_ACT_ALLOW":
            names = [n for n in rule.get("names", []) if n not in refused_names]
            if not names:
                continue
            rule = {**rule, "names": names}
        syscalls.append(rule)
    no_new_ns = [{"index": 0, "value": CLONE_NEW_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]
    syscalls.append({"names": ["clone"], "action": "SCMP_ACT_ALLOW", "args": no_new_ns})
    syscalls.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    if base.get("defaultAction", "SCMP_ACT_ERRNO") == "SCMP_ACT_ALLOW":
        names = sorted(calls)
        syscalls.append({"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM})
    return json.dumps({**base, "syscalls": syscalls}, separators=(",", ":"))


def _engine_default() -> dict:
    """The engine's default profile where this host has it; else allow-by-default (the
    refusals are then added as explicit rules)."""
    for path in ENGINE_DEFAULT_PROFILES:
        try:
            with open(path, encoding="utf-8") as f:
                data: dict = json.load(f)
                return data
        except (OSError, ValueError):
            continue
    return {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}


# The verifier phase (sandbox.judge) refuses, besides, what lets a process reach into another
# one of its own uid: tracing it, reading or writing its memory, taking its descriptors.
VERIFIER_EXTRA_X86_64 = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
}


def verifier_refused() -> dict[str, int]:
    return {**REFUSED_X86_64, **VERIFIER_EXTRA_X86_64}


_VERIFIER_PROGRAM = program(verifier_refused())


def verifier_profile_fd() -> int | None:
    """`profile_fd` of the verifier phase's program."""
    if profile() is None:
        return None
    fd = os.memfd_create("t1-seccomp-verifier", os.MFD_CLOEXEC)
    os.write(fd, _VERIFIER_PROGRAM)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
