"""Hostile stand-ins against the seccomp filter: no user namespace, no reaching into another
process of the sandbox.

Every stand-in is run twice where it matters: through the real attempt path, where each try
must be refused, and in the same sandbox with the filter left out, where the same code must
work (as far as this host permits), so that a refusal is the filter's doing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from yyb.harness import sandbox, seccomp

MACHINE = os.uname().machine
pytestmark = [
    pytest.mark.skipif(MACHINE not in seccomp.ARCHES, reason=f"no filter for {MACHINE}"),
    pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs /usr/bin/python3"),
]

# Each try prints `escape NAME: WORKED` or `escape NAME: refused ERRNO`.
REACHER = """
import ctypes, errno, os, signal, struct, subprocess, time

NR = {numbers}
CLONE_NEWUSER, SIGCHLD, PTRACE_SEIZE = 0x10000000, 17, 0x4206
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
libc.process_vm_readv.restype = ctypes.c_ssize_t
libc.process_vm_writev.restype = ctypes.c_ssize_t


class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def say(name, error):  # error: None when it worked, else an errno
    word = "WORKED" if error is None else "refused " + errno.errorcode.get(error, str(error))
    print(f"escape {{name}}: {{word}}", flush=True)


def checked(result):
    return None if result >= 0 else ctypes.get_errno()


def in_child(attempt):
    # A namespace made stays in the child; the answer comes back as its exit status.
    pid = os.fork()
    if pid == 0:
        error = attempt()
        os._exit(0 if error is None else error)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return None if code == 0 else code


def spawned(result):  # a raw clone or clone3: the child leaves at once
    if result == 0:
        os._exit(0)
    if result > 0:
        os.waitpid(result, 0)
        return None
    return ctypes.get_errno()


done = subprocess.run(["/usr/bin/unshare", "-U", "-r", "id"], capture_output=True, text=True)
if done.returncode == 0:
    say("unshare-tool", None)
else:
    say("unshare-tool", errno.EPERM if "not permitted" in done.stderr else -1)
say("unshare-call", in_child(lambda: checked(libc.unshare(CLONE_NEWUSER))))
if hasattr(os, "unshare"):

    def python_unshare():
        try:
            os.unshare(os.CLONE_NEWUSER)
        except OSError as exc:
            return exc.errno

    say("os-unshare", in_child(python_unshare))
say("clone-newuser", in_child(
    lambda: spawned(libc.syscall(NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
))
# struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls
clone_args = ctypes.create_string_buffer(struct.pack(
    "<8Q", CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0
))
say("clone3-newuser", in_child(
    lambda: spawned(libc.syscall(NR["clone3"], clone_args, ctypes.sizeof(clone_args)))
))

# Another process of the sandbox: the shell that started this one (the harness), a sibling,
# and a child holding a secret at an address this process knows (its own copy's).
say("ptrace-parent", in_child(lambda: checked(libc.ptrace(PTRACE_SEIZE, os.getppid(), None, None))))
secret = ctypes.create_string_buffer(b"SECRET-OF-THE-HARNESS")
holder = os.fork()
if holder == 0:
    time.sleep(60)
    os._exit(0)
say("ptrace-sibling", in_child(lambda: checked(libc.ptrace(PTRACE_SEIZE, holder, None, None))))
got = ctypes.create_string_buffer(len(secret))
local, remote = iovec(ctypes.addressof(got), len(got)), iovec(ctypes.addressof(secret), len(got))
read = checked(libc.process_vm_readv(holder, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
say("process-vm-readv", read if read is not None or got.value == secret.value else -1)
say("process-vm-writev", checked(
    libc.process_vm_writev(holder, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
))
pidfd = libc.syscall(NR["pidfd_open"], holder, 0)
say("pidfd-getfd", checked(libc.syscall(NR["pidfd_getfd"], pidfd, 1, 0)) if pidfd >= 0 else -2)
os.kill(holder, signal.SIGKILL)
os.waitpid(holder, 0)
"""

TRIES = {  # what each try answers under the filter
    "unshare-tool": "EPERM",
    "unshare-call": "EPERM",
    "clone-newuser": "EPERM",
    "clone3-newuser": "ENOSYS",
    "ptrace-parent": "EPERM",
    "ptrace-sibling": "EPERM",
    "process-vm-readv": "EPERM",
    "process-vm-writev": "EPERM",
    "pidfd-getfd": "EPERM",
}
USER_NAMESPACE = ("unshare-tool", "unshare-call", "os-unshare", "clone-newuser", "clone3-newuser")


def reacher() -> str:
    numbers = dict(seccomp.ARCHES[MACHINE].numbers, pidfd_open=434)  # one number on both
    return REACHER.format(numbers=numbers)


def behaviour() -> str:
    """The stand-in, as a behaviour snippet the dispatcher shell sources."""
    return (
        "grep '^Seccomp:' /proc/self/status\n"
        f"/usr/bin/python3 - <<'PY'\n{reacher()}PY\nenvelope succeeded\n"
    )


def tries(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        if line.startswith("escape "):
            name, _, answer = line[len("escape ") :].partition(": ")
            found[name] = answer
    return found


def test_a_candidate_can_make_no_user_namespace_nor_reach_into_another_process(bench):
    model = bench.behaviour("reacher", behaviour())
    _, [result] = bench.run([model])
    stdout = bench.linked(result, "stdout").decode()
    assert "Seccomp:\t2" in stdout, stdout
    found = tries(stdout)
    for name, answer in TRIES.items():
        assert found.get(name) == f"refused {answer}", (name, stdout)
    if "os-unshare" in found:  # Python 3.12 and later
        assert found["os-unshare"] == "refused EPERM"


@pytest.fixture
def open_folder():
    """A folder the sandbox uid may pass through and write in."""
    folder = Path(tempfile.mkdtemp(prefix="yyb-seccomp-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    (folder / "work").mkdir()
    sandbox.hand_over(str(folder / "work"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _run(open_folder: Path, filtered: bool) -> str:
    work = str(open_folder / "work")
    box = sandbox.Sandbox(writable=[work], hidden=[str(open_folder)], cwd=work)
    script = ["/bin/sh", "-c", "grep '^Seccomp:' /proc/self/status; /usr/bin/python3 -c \"$1\""]
    with box.launch([*script, "reacher", reacher()]) as launch:
        argv = launch.argv
        if not filtered:  # the same sandbox, the filter left out
            at = argv.index("--seccomp")
            argv = argv[:at] + argv[at + 2 :]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, pass_fds=launch.pass_fds
        )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_the_filter_the_same_stand_in_escapes(open_folder):
    """The control: each try works in the same sandbox with no filter (the user namespace
    ones only where nothing else forbids them), and fails with it."""
    bare = _run(open_folder, filtered=False)
    found = tries(bare)
    assert set(TRIES) <= set(found), bare
    userns = False  # as an unprivileged user, bubblewrap forbids a nested one itself
    if os.geteuid() == 0:  # only the filter does, where the host lets the sandbox uid make one
        drop = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        made = subprocess.run([*drop, "/usr/bin/unshare", "-U", "true"], capture_output=True)
        userns = made.returncode == 0
    for name, answer in found.items():
        if name in USER_NAMESPACE and not userns:
            continue
        assert answer == "WORKED", (name, bare)
    guarded = tries(_run(open_folder, filtered=True))
    for name, answer in TRIES.items():
        assert guarded[name] == f"refused {answer}", (name, guarded)
