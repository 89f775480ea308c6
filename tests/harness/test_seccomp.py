"""The seccomp program, read back and run on a small classic BPF interpreter for each ABI."""

from __future__ import annotations

import os
import struct

import pytest

from yyb.harness import probe, sandbox, seccomp

ALLOW = seccomp.RET_ALLOW
EPERM = seccomp.RET_ERRNO | seccomp.EPERM
ENOSYS = seccomp.RET_ERRNO | seccomp.ENOSYS
KILL = seccomp.RET_KILL_PROCESS
I386 = 0x40000003  # AUDIT_ARCH_I386
ARM = 0x40000028  # AUDIT_ARCH_ARM


def rows(program: bytes) -> list[tuple[int, int, int, int]]:
    assert len(program) % 8 == 0
    return [struct.unpack_from("<HBBI", program, at) for at in range(0, len(program), 8)]


def decide(program: bytes, nr: int, arch: int, *args: int) -> int:
    """What the kernel would return for one call: the few opcodes the filter uses, and a
    refusal of any other (so a new opcode in the program fails here first)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = rows(program)
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == seccomp.LOAD_WORD:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op == seccomp.RETURN:
            return k
        else:
            taken = {
                seccomp.JUMP_EQUAL: acc == k,
                seccomp.JUMP_AT_LEAST: acc >= k,
                seccomp.JUMP_BITS_SET: bool(acc & k),
            }[op]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_program_checks_the_arch_first_and_ends_in_a_return(machine):
    arch = seccomp.ARCHES[machine]
    program = seccomp.program(machine)
    code = rows(program)
    assert len(code) == (18 if arch.x32 else 17)
    assert code[0] == (seccomp.LOAD_WORD, 0, 0, seccomp.ARCH_OFFSET)
    op, jt, jf, k = code[1]
    assert (op, jt, k) == (seccomp.JUMP_EQUAL, 0, arch.audit)
    assert code[1 + 1 + jf] == (seccomp.RETURN, 0, 0, KILL)
    assert code[-1][0] == seccomp.RETURN
    for index, (op, jt, jf, _) in enumerate(code):
        if op not in (seccomp.LOAD_WORD, seccomp.RETURN):  # every jump lands inside
            assert index + 1 + max(jt, jf) < len(code)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_each_call_gets_its_answer(machine):
    arch = seccomp.ARCHES[machine]
    number = arch.numbers
    program = seccomp.program(machine)

    def answer(name_or_nr, *args, audit=arch.audit):
        nr = number[name_or_nr] if isinstance(name_or_nr, str) else name_or_nr
        return decide(program, nr, audit, *args)

    newuser, sigchld = seccomp.CLONE_NEWUSER, 17
    assert answer("unshare", newuser) == EPERM
    assert answer("unshare", newuser | 0x20000) == EPERM  # with CLONE_NEWNS as well
    assert answer("unshare", 0x20000) == ALLOW  # the kernel refuses it without a capability
    assert answer("unshare", 0x400) == ALLOW  # CLONE_FILES: harmless, some programs use it
    assert answer("clone", sigchld) == ALLOW  # fork
    assert answer("clone", 0x3D0F00) == ALLOW  # a thread
    assert answer("clone", newuser | sigchld) == EPERM
    assert answer("clone", (1 << 32) | newuser) == EPERM  # high bits do not hide the flag
    assert answer("clone3") == ENOSYS
    for name in seccomp.PROCESS_ACCESS:
        assert answer(name) == EPERM, name
    for nr in (0, 1, 59, 63, 221, 268, 434, 0xFFFF):  # read, write, execve, setns, pidfd_open...
        if nr not in number.values():
            assert answer(nr, newuser) == ALLOW, nr
    assert answer("unshare", newuser, audit=I386) == KILL
    assert answer(11, audit=ARM) == KILL
    assert answer(0, audit=0) == KILL
    if arch.x32:
        assert answer(seccomp.X32_SYSCALL_BIT + number["unshare"], newuser) == KILL
        assert answer(seccomp.X32_SYSCALL_BIT) == KILL


def test_an_unknown_machine_has_no_program_and_the_sandbox_refuses_to_start(monkeypatch):
    assert seccomp.program("riscv64") is None
    monkeypatch.setattr(seccomp, "ARCHES", {})
    machine = os.uname().machine
    with pytest.raises(sandbox.SandboxUnavailable) as caught:
        probe.probe()
    message = str(caught.value)
    assert f"no seccomp filter for this machine ({machine})" in message
    assert len(message.splitlines()) == 1


@pytest.mark.skipif(os.uname().machine not in seccomp.ARCHES, reason="no filter for this host")
def test_a_launch_hands_the_program_through_a_pipe_closed_after(tmp_path):
    box = sandbox.Sandbox(writable=[str(tmp_path)])
    with box.launch(["/bin/true"]) as launch:
        [fd] = launch.pass_fds
        at = launch.argv.index("--seccomp")
        assert launch.argv[at + 1] == str(fd) and at < launch.argv.index("--")
        assert os.read(fd, 4096) == seccomp.program(os.uname().machine)
    with pytest.raises(OSError):
        os.fstat(fd)
