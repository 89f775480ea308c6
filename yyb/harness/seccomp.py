"""The seccomp filter of every sandboxed process: no new user namespace, no reaching into another
process.

A classic BPF program (``struct sock_filter`` entries, as ``seccomp_export_bpf`` writes them)
that bubblewrap loads with ``--seccomp FD`` just before it starts the command, so it covers
``setpriv`` and everything the command starts. It refuses, with ``EPERM``:

- ``unshare`` and ``clone`` whose flags hold ``CLONE_NEWUSER``: as root the sandbox cannot use
  bubblewrap's ``--disable-userns`` (that needs a user namespace of its own, which would map the
  sandbox uid to host root), and a nested user namespace gives a process with no capability
  every capability over the new namespaces, a large piece of kernel to attack. Other flags
  pass: without a capability the kernel refuses the other namespaces itself.
- ``ptrace``, ``process_vm_readv``, ``process_vm_writev`` and ``pidfd_getfd``: the processes of
  one sandbox share a uid, and a tool a harness starts must not read, write or steal a
  descriptor from the harness (or a sibling). Debuggers and ``strace`` do not work inside.

``clone3`` answers ``ENOSYS``: its flags lie in memory, which a filter cannot read, and C
libraries fall back to ``clone`` on ``ENOSYS``, whose flags the filter does see. ``setns`` is
left alone: without a capability it can enter nothing. Everything else is allowed.

A system call of another ABI (i386 or x32 on x86_64, arm32 on aarch64) kills the process: its
numbers mean other calls, so the checks above would not hold for it, and a loud ``SIGSYS`` is
easier to diagnose than a program failing on its first call. Only x86_64 and aarch64 hosts get
a filter; ``program`` returns None elsewhere and the sandbox then refuses to start.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
NR_OFFSET = 0
ARCH_OFFSET = 4
ARG0_LOW_OFFSET = 16  # the low 32 bits of args[0]: both supported ABIs are little-endian

# Classic BPF opcodes (linux/bpf_common.h).
LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JUMP_BITS_SET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K

# Actions (linux/seccomp.h).
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
EPERM = 1
ENOSYS = 38

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000

# Refused outright: each reaches into another process.
PROCESS_ACCESS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
# Refused when args[0] holds CLONE_NEWUSER (for both, args[0] is the flags).
NAMESPACE_FLAGS = ("unshare", "clone")


@dataclass(frozen=True)
class Arch:
    """One ABI the filter knows: its audit value and the numbers of the calls it looks at."""

    audit: int
    numbers: dict[str, int]
    x32: bool = False  # the same audit value also carries x32 calls (nr >= X32_SYSCALL_BIT)


ARCHES = {
    "x86_64": Arch(
        AUDIT_ARCH_X86_64,
        {
            "clone": 56,
            "ptrace": 101,
            "unshare": 272,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "clone3": 435,
            "pidfd_getfd": 438,
        },
        x32=True,
    ),
    "aarch64": Arch(
        AUDIT_ARCH_AARCH64,
        {
            "unshare": 97,
            "ptrace": 117,
            "clone": 220,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "clone3": 435,
            "pidfd_getfd": 438,
        },
    ),
}


def instructions(arch: Arch) -> list[tuple[int, int, int, int]]:
    """The filter for ``arch`` as ``(code, jt, jf, k)`` rows; the arch check comes first."""
    rows: list = [
        (LOAD_WORD, 0, 0, ARCH_OFFSET),
        (JUMP_EQUAL, 0, "kill", arch.audit),
        (LOAD_WORD, 0, 0, NR_OFFSET),
    ]
    if arch.x32:
        rows.append((JUMP_AT_LEAST, "kill", 0, X32_SYSCALL_BIT))
    rows += [(JUMP_EQUAL, "flags", 0, arch.numbers[name]) for name in NAMESPACE_FLAGS]
    rows.append((JUMP_EQUAL, "enosys", 0, arch.numbers["clone3"]))
    rows += [(JUMP_EQUAL, "eperm", 0, arch.numbers[name]) for name in PROCESS_ACCESS]
    rows += [
        (RETURN, 0, 0, RET_ALLOW),
        "flags",
        (LOAD_WORD, 0, 0, ARG0_LOW_OFFSET),
        (JUMP_BITS_SET, "eperm", 0, CLONE_NEWUSER),
        (RETURN, 0, 0, RET_ALLOW),
        "eperm",
        (RETURN, 0, 0, RET_ERRNO | EPERM),
        "enosys",
        (RETURN, 0, 0, RET_ERRNO | ENOSYS),
        "kill",
        (RETURN, 0, 0, RET_KILL_PROCESS),
    ]
    return _resolve(rows)


def _resolve(rows: list) -> list[tuple[int, int, int, int]]:
    """Replace label names in jump rows by offsets (a classic BPF jump only goes forward, by the
    number of rows it skips); the strings in ``rows`` mark where each label stands."""
    where, program = {}, []
    for row in rows:
        if isinstance(row, str):
            where[row] = len(program)
        else:
            program.append(row)
    resolved = []
    for index, (code, jt, jf, k) in enumerate(program):
        jt, jf = (where[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf))
        assert 0 <= jt <= 255 and 0 <= jf <= 255, "a jump too far for classic BPF"
        resolved.append((code, jt, jf, k))
    return resolved


def program(machine: str) -> bytes | None:
    """The filter for a host whose ``uname`` machine is ``machine``, as the bytes bubblewrap
    reads; None for a machine the filter does not know."""
    arch = ARCHES.get(machine)
    if arch is None:
        return None
    return b"".join(struct.pack("<HBBI", *row) for row in instructions(arch))
