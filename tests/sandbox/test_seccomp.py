"""The seccomp profile as data: the BPF program run by a small interpreter of the five
instructions it uses, and the engine profile derived from Podman's default (pure; the same
refusals are exercised in real sandboxes by tests/sandbox/test_hostile.py)."""

from __future__ import annotations

import errno
import json
import struct

import pytest

from sandbox import seccomp

I386 = 0x40000003


def run_filter(prog: bytes, nr: int, arch: int = seccomp.AUDIT_ARCH_X86_64, arg0: int = 0) -> int:
    """Classic BPF over struct seccomp_data, for the opcodes the program uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == seccomp.BPF_LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == seccomp.BPF_RET_K:
            return k
        elif code in (seccomp.BPF_JEQ_K, seccomp.BPF_JGE_K, seccomp.BPF_JSET_K):
            taken = {
                seccomp.BPF_JEQ_K: acc == k,
                seccomp.BPF_JGE_K: acc >= k,
                seccomp.BPF_JSET_K: bool(acc & k),
            }[code]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


DENY = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
PROGRAM = seccomp.program()


@pytest.mark.parametrize("name", sorted(seccomp.REFUSED_X86_64))
def test_every_refused_call_is_refused(name):
    assert run_filter(PROGRAM, seccomp.REFUSED_X86_64[name]) == DENY


@pytest.mark.parametrize(
    "nr", [0, 1, 2, 59, 57, 61, 101, 231]
)  # read write open execve fork wait4 ptrace exit_group
def test_ordinary_calls_are_allowed(nr):
    assert run_filter(PROGRAM, nr) == seccomp.SECCOMP_RET_ALLOW


def test_clone_is_refused_only_with_a_namespace_flag():
    fork_flags = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD
    thread_flags = 0x003D0F00
    assert run_filter(PROGRAM, seccomp.CLONE, arg0=fork_flags) == seccomp.SECCOMP_RET_ALLOW
    assert run_filter(PROGRAM, seccomp.CLONE, arg0=thread_flags) == seccomp.SECCOMP_RET_ALLOW
    for flag in (0x10000000, 0x00020000, 0x40000000, 0x20000000):  # NEWUSER NEWNS NEWNET NEWPID
        assert run_filter(PROGRAM, seccomp.CLONE, arg0=fork_flags | flag) == DENY


def test_clone3_says_enosys_so_libc_falls_back_to_clone():
    assert run_filter(PROGRAM, seccomp.CLONE3) == seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS


def test_other_calling_conventions_cannot_bypass_the_table():
    assert run_filter(PROGRAM, 310, arch=I386) == DENY  # i386 unshare, via int 0x80
    assert run_filter(PROGRAM, 0, arch=I386) == DENY
    assert run_filter(PROGRAM, seccomp.X32_SYSCALL_BIT | 272) == DENY  # x32 unshare


PODMAN_LIKE = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 38,
    "syscalls": [
        {
            "names": ["read", "unshare", "setns", "keyctl", "clone", "clone3"],
            "action": "SCMP_ACT_ALLOW",
        },
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["mount"], "action": "SCMP_ACT_ALLOW"},
    ],
}


def test_engine_profile_takes_the_refused_calls_out_of_every_allow_rule():
    prof = json.loads(seccomp.docker_profile(PODMAN_LIKE))
    allowed = {n for r in prof["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" and "args" not in r
               for n in r["names"]}  # fmt: skip
    assert "read" in allowed
    assert not allowed & {"unshare", "setns", "keyctl", "bpf", "mount", "clone", "clone3"}
    clone = [r for r in prof["syscalls"] if r["names"] == ["clone"]]
    assert clone[0]["args"][0]["value"] == seccomp.CLONE_NEW_FLAGS
    assert clone[0]["args"][0]["valueTwo"] == 0 and clone[0]["action"] == "SCMP_ACT_ALLOW"
    assert prof["defaultAction"] == "SCMP_ACT_ERRNO"


def test_engine_profile_without_a_default_denies_explicitly():
    prof = json.loads(seccomp.docker_profile({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}))
    denied = {n for r in prof["syscalls"] if r["action"] == "SCMP_ACT_ERRNO" for n in r["names"]}
    assert set(seccomp.REFUSED_X86_64) <= denied


# -- Docker's default, by its argument rules and beyond its table (issue 32) --------------------
def test_vsock_sockets_are_refused_whatever_the_high_bits():
    """vsock is not network-namespaced (on a VM guest it reaches the hypervisor): refused in
    every sandbox; the kernel reads the family as an int, so 0x1_0000_0028 is AF_VSOCK too."""
    assert run_filter(PROGRAM, seccomp.SOCKET, arg0=seccomp.AF_VSOCK) == DENY
    assert run_filter(PROGRAM, seccomp.SOCKET, arg0=(1 << 32) | seccomp.AF_VSOCK) == DENY
    for family in (1, 2, 10, 16, 17):  # unix inet inet6 netlink packet
        assert run_filter(PROGRAM, seccomp.SOCKET, arg0=family) == seccomp.SECCOMP_RET_ALLOW


def test_personality_takes_only_the_personas_docker_allows():
    for persona in seccomp.PERSONAS:
        assert run_filter(PROGRAM, seccomp.PERSONALITY, arg0=persona) == seccomp.SECCOMP_RET_ALLOW
    for persona in (0x0400000, 0x0040000, 0x0200000):  # READ_IMPLIES_EXEC ADDR_NO_RANDOMIZE ..
        assert run_filter(PROGRAM, seccomp.PERSONALITY, arg0=persona) == DENY


def test_calls_newer_than_the_table_say_enosys():
    enosys = seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
    for nr in (seccomp.LAST_KNOWN + 1, 452, 467, 1000):  # cachestat fchmodat2 open_tree_attr
        assert run_filter(PROGRAM, nr) == enosys
    assert run_filter(PROGRAM, seccomp.LAST_KNOWN - 1) == seccomp.SECCOMP_RET_ALLOW  # futex_waitv


def _masked(rule: dict, value: int) -> bool:
    return all(value & a["value"] == a["valueTwo"] for a in rule["args"])


def test_engine_profile_allows_socket_for_every_family_but_vsock():
    prof = json.loads(seccomp.docker_profile(PODMAN_LIKE | {"syscalls": [
        {"names": ["socket", "read"], "action": "SCMP_ACT_ALLOW"}]}))  # fmt: skip
    rules = [r for r in prof["syscalls"] if "socket" in r["names"]]
    assert all(r["action"] == "SCMP_ACT_ALLOW" and r.get("args") for r in rules), rules
    assert all(a["op"] == "SCMP_CMP_MASKED_EQ" for r in rules for a in r["args"])
    for family in range(0, seccomp.MAX_FAMILY):
        allowed = any(_masked(r, family) for r in rules)
        assert allowed == (family != seccomp.AF_VSOCK), family
    for sneaky in ((1 << 32) | seccomp.AF_VSOCK, (1 << 63) | 2, seccomp.MAX_FAMILY):
        assert not any(_masked(r, sneaky) for r in rules), hex(sneaky)


def test_every_call_dockers_default_refuses_is_refused():
    """The module's claim, checked against Docker's list: before, kcmp, move_pages and 15
    more of them were allowed."""
    from tests.sandbox.test_host_bounds import DOCKER_REFUSED

    assert seccomp.DOCKER_DEFAULT_REFUSED == set(DOCKER_REFUSED)
    assert {n: seccomp.REFUSED_X86_64.get(n) for n in DOCKER_REFUSED} == DOCKER_REFUSED
