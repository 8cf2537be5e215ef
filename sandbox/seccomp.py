"""The local backend's seccomp profile: a classic BPF program, handed to bubblewrap
(`--seccomp FD`), that refuses at least what Docker's default profile refuses to a container
with this project's capabilities (no CAP_SYS_ADMIN, SYS_PTRACE, SYS_NICE, ...).

Refused with EPERM: new namespaces (`unshare`, `setns`, `clone` with a CLONE_NEW* flag), every
mount API (old and new), keyrings, bpf, perf events, userfaultfd, io_uring, file handles
(`open_by_handle_at`, the 'shocker' escape), kernel modules, kexec, reboot, swap, clocks,
quotas, accounting, syslog, iopl/ioperm; what Docker allows only with CAP_SYS_PTRACE (`kcmp`,
`pidfd_getfd`, `process_madvise`) or CAP_SYS_NICE (the NUMA calls `mbind`, `set_mempolicy`,
`get_mempolicy`, `migrate_pages`, `move_pages`, `set_mempolicy_home_node`), and the obsolete
calls it never allows (`ustat`, `sysfs`, ...). Docker's argument rules are kept too, on the
low 32 bits the kernel actually reads (an `int` argument): `socket(AF_VSOCK, ...)` is refused
(vsock is not network-namespaced: on a VM guest it reaches the hypervisor, whatever the
sandbox's network), and `personality` only takes the personas Docker allows. System calls
newer than the table (above LAST_KNOWN) answer ENOSYS, as runc makes Docker's profile do: a
call this module has not reviewed is refused, and the C library falls back. `clone3` answers
ENOSYS too (its flags live in memory a filter cannot read), so the C library falls back to
`clone`, whose flags it can. Any other architecture's calling convention (i386 `int 0x80`,
the x32 ABI) is refused whole, so a 32-bit entry cannot bypass the table. `ptrace` stays
allowed as in Docker: in its own PID namespace and without CAP_SYS_PTRACE a process can only
trace its own kind.

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
# struct seccomp_data (little-endian): arg0's low 32 bits at 16 (what an `int` argument is)
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16
LAST_KNOWN = 450  # set_mempolicy_home_node, the newest call Docker's default profile names
SOCKET, PERSONALITY = 41, 135
AF_VSOCK = 40
# personality(2) values Docker's default allows: PER_LINUX, UNAME26, PER_LINUX32,
# UNAME26|PER_LINUX32, and 0xffffffff (a query)
PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

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
    # Docker's default refuses these to a container without CAP_SYS_PTRACE / CAP_SYS_NICE
    # (its conditional rules), or to every container (the obsolete and unimplemented ones)
    "ustat": 136,
    "sysfs": 139,
    "getpmsg": 181,
    "putpmsg": 182,
    "afs_syscall": 183,
    "tuxcall": 184,
    "security": 185,
    "vserver": 236,
    "mbind": 237,
    "set_mempolicy": 238,
    "get_mempolicy": 239,
    "migrate_pages": 256,
    "move_pages": 279,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "set_mempolicy_home_node": 450,
}


# What Docker's default profile (moby's profiles/seccomp/default.json) refuses, by name, to a
# container with this project's capabilities (sandbox.local.CAPABILITIES): every x86_64 call
# outside its allow rules. REFUSED_X86_64 holds each of them (a test pins it); Docker's
# argument rules (clone, socket, personality) are in `program`.
DOCKER_DEFAULT_REFUSED = frozenset(
    """syslog uselib ustat sysfs vhangup pivot_root _sysctl acct settimeofday mount umount2
    swapon swapoff reboot sethostname setdomainname iopl ioperm create_module init_module
    delete_module get_kernel_syms query_module quotactl nfsservctl getpmsg putpmsg afs_syscall
    tuxcall security lookup_dcookie clock_settime vserver mbind set_mempolicy get_mempolicy
    kexec_load add_key request_key keyctl migrate_pages unshare move_pages perf_event_open
    fanotify_init open_by_handle_at setns kcmp finit_module kexec_file_load bpf userfaultfd
    open_tree move_mount fsopen fsconfig fsmount fspick pidfd_getfd process_madvise
    mount_setattr quotactl_fd set_mempolicy_home_node""".split()
)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


Insn = tuple[int, "int | str", "int | str", int]  # (code, jt, jf, k); jt/jf: offset or label


def _assemble(insns: list[Insn | str]) -> bytes:
    """Bytes of `struct sock_filter[]` from instructions whose jump targets may be labels
    (a str item marks the next instruction with that label; jumps only go forward)."""
    labels: dict[str, int] = {}
    code: list[Insn] = []
    for item in insns:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)
    out = []
    for pc, (op, jt, jf, k) in enumerate(code):
        rel = [labels[j] - pc - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= r <= 255 for r in rel):
            raise ValueError(f"seccomp jump out of range at {pc}: {rel}")
        out.append(_insn(op, rel[0], rel[1], k))
    if len(out) > 4096:  # BPF_MAXINSNS
        raise ValueError(f"seccomp program too long: {len(out)} instructions")
    return b"".join(out)


def program(refused: dict[str, int] = REFUSED_X86_64) -> bytes:
    """The filter as bytes of `struct sock_filter[]` (what `seccomp_export_bpf` writes)."""
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    insns: list[Insn | str] = [
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        (BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),  # x86_64: skip the next (deny)
        (BPF_RET_K, 0, 0, deny),
        (BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        (BPF_JGE_K, "deny", 0, X32_SYSCALL_BIT),  # the x32 ABI
        (BPF_JGE_K, "enosys", 0, LAST_KNOWN + 1),  # newer than the table
        *[(BPF_JEQ_K, "deny", 0, n) for n in sorted(set(refused.values()))],
        (BPF_JEQ_K, "enosys", 0, CLONE3),
        (BPF_JEQ_K, "clone", 0, CLONE),
        (BPF_JEQ_K, "socket", 0, SOCKET),
        (BPF_JEQ_K, "personality", 0, PERSONALITY),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        "clone",  # a namespace flag: refused
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        (BPF_JSET_K, "deny", "allow", CLONE_NEW_FLAGS),
        "socket",  # the address family, as the kernel reads it (an int)
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        (BPF_JEQ_K, "deny", "allow", AF_VSOCK),
        "personality",  # one of PERSONAS, else refused
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
        *[(BPF_JEQ_K, "allow", 0, p) for p in PERSONAS[:-1]],
        (BPF_JEQ_K, "allow", "deny", PERSONAS[-1]),
        "deny",
        (BPF_RET_K, 0, 0, deny),
        "enosys",
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        "allow",
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return _assemble(insns)


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
    with every REFUSED_X86_64 call (or each of `refused`: the verifier phase's), the namespace
    forms of `clone` and `socket(AF_VSOCK)` taken out of its allow rules, so it is at least as
    strict as both. Podman's default allows unshare, setns, mount, keyctl, kcmp and vsock
    sockets to a container without CAP_SYS_ADMIN; this one does not."""
    if base is None:
        base = _engine_default()
    calls = REFUSED_X86_64 if refused is None else refused
    refused_names = set(calls) | {"clone", "clone3", "socket"}
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
    syscalls += [
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [arg]} for arg in _families()
    ]
    if base.get("defaultAction", "SCMP_ACT_ERRNO") == "SCMP_ACT_ALLOW":
        names = sorted(calls)
        syscalls.append({"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM})
    return json.dumps({**base, "syscalls": syscalls}, separators=(",", ":"))


MAX_FAMILY = 64  # above AF_MAX (46 in Linux 6.x)


def _families() -> list[dict]:
    """socket()'s first argument allowed as OCI rules: every family below MAX_FAMILY but
    AF_VSOCK, as masked-equal comparisons on the whole 64-bit register (a plain `!= 40`
    would let 0x1_0000_0028 through, which the kernel reads as the int 40): aligned blocks
    of [0, MAX_FAMILY) minus AF_VSOCK, each `arg & ~(size - 1) == start`."""
    rules, start = [], 0
    while start < MAX_FAMILY:
        size = 1
        while (
            start % (size * 2) == 0
            and start + size * 2 <= MAX_FAMILY
            and not (start <= AF_VSOCK < start + size * 2)
        ):
            size *= 2
        if not start <= AF_VSOCK < start + size:
            mask = ~(size - 1) & 0xFFFFFFFFFFFFFFFF
            rules.append({"index": 0, "value": mask, "valueTwo": start, "op": "SCMP_CMP_MASKED_EQ"})
        start += size
    return rules


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
