"""The gateway port in the real sandbox: 127.0.0.1:PORT reaches the gateway's socket and
nothing else; hostile candidates (stand-ins run as the harness) cannot widen it.

Each test runs as the controller is: as root (the drop to the sandbox uid) and, as root too,
as an unprivileged controller would (the user-namespace construction, started as uid 65534);
an unprivileged test process runs the second only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import statistics
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.harness.gateway_standin import Gateway
from yyb.harness import channel, forwarder, gatewayport, sandbox, seccomp, supervise

pytestmark = pytest.mark.skipif(
    os.uname().machine not in seccomp.ARCHES, reason="no seccomp filter for this host"
)
PORT = 8088
UNPRIVILEGED_UID = 65534
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# Run as root, the unprivileged construction is emulated (started as uid 65534 with setpriv,
# os.geteuid patched while the argv is built); an unprivileged test process (docs/testing.md)
# runs that mode for real.
MODES = ["unprivileged"] if os.geteuid() != 0 else ["root", "unprivileged"]


@pytest.fixture
def folder():
    """A folder the sandbox uid may pass through, outside the system temp folder."""
    made = Path(tempfile.mkdtemp(prefix="yyb-port-", dir="/var/tmp"))
    os.chmod(made, 0o755)
    (made / "work").mkdir()
    if os.geteuid() == 0:
        os.chown(made / "work", UNPRIVILEGED_UID, UNPRIVILEGED_UID)
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def gateway(folder):
    """The stand-in gateway, serving with SIGPIPE ignored as yyb's own does: a test process
    that ran ``yyb.cli.main`` has it at its default, and a client cut off mid-answer (the
    forwarder killed, say) would otherwise kill the test process with its write."""
    owner = UNPRIVILEGED_UID if os.geteuid() == 0 else None
    before = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    served = Gateway(str(folder / "gateway.sock"), owner)
    yield served
    served.close()
    signal.signal(signal.SIGPIPE, before)


class Runner:
    """Runs a command in the sandbox as ``mode`` says, supervised as an attempt is."""

    def __init__(self, folder: Path, mode: str):
        self.folder = folder
        self.mode = mode

    def run(self, command, gateway=None, pass_fds=(), env=None, timeout_ms=60_000):
        work = str(self.folder / "work")
        port = gatewayport.Port(gateway.path, PORT) if gateway is not None else None
        box = sandbox.Sandbox(writable=[work], hidden=[str(self.folder)], cwd=work, gateway=port)
        prefix = []
        with pytest.MonkeyPatch.context() as patch:
            if self.mode == "unprivileged" and os.geteuid() == 0:
                patch.setattr(os, "geteuid", lambda: 1000)  # build the unprivileged argv
                prefix = ["/usr/bin/setpriv", f"--reuid={UNPRIVILEGED_UID}"]
                prefix += [f"--regid={UNPRIVILEGED_UID}", "--clear-groups", "--"]
            with box.launch(command) as launch:
                patch.undo()
                return supervise.run(
                    prefix + launch.argv,
                    env or ENV,
                    None,
                    timeout_ms,
                    pass_fds=(*pass_fds, *launch.pass_fds),
                )

    def python(self, script: str, gateway=None, finding=False, **given):
        """A Python stand-in: (outcome, its stdout as text); ``finding``: with a function
        ``forwarders()`` listing the forwarder's pids, as a candidate would find them."""
        script = textwrap.dedent(script).replace("@PORT@", str(PORT))
        command = ["/usr/bin/python3", "-c", (FINDING if finding else "") + script]
        outcome = self.run(command, gateway, **given)
        return outcome, outcome.stdout.data.decode(errors="replace")


@pytest.fixture(params=MODES)
def runner(request, folder):
    return Runner(folder, request.param)


FINDING = """
import os
def forwarders():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                words = handle.read().split(b"\\0")
        except OSError:
            continue
        if words[0] == b"/usr/bin/python3" and b"/run/yyb/forward.py" in words:
            found.append(int(pid))
    return found
"""


def lines(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


REACH = """
import json, socket, urllib.request
base = "http://127.0.0.1:@PORT@"
got = json.loads(urllib.request.urlopen(base + "/v1/models").read())
print("get", got["method"], got["path"], got["host"])
asked = urllib.request.Request(base + "/v1/chat/completions", data=b'{"model": "m"}')
got = json.loads(urllib.request.urlopen(asked).read())
print("post", got["method"], got["path"], got["body"])
try:
    six = socket.create_connection(("::1", @PORT@), timeout=5)
    six.sendall(b"GET /six HTTP/1.0\\r\\n\\r\\n")
    print("six", six.recv(100).split(b"\\r\\n")[0].decode())
except OSError as exc:
    print("six", "none", exc.errno)
print("listing", " ".join(sorted(__import__("os").listdir("/run/yyb"))))
"""


def test_the_harness_reaches_the_gateway_at_the_port(runner, gateway):
    outcome, stdout = runner.python(REACH, gateway)
    assert outcome.exit_code == 0, outcome.stderr.data
    found = lines(stdout)
    assert found["get"] == f"GET /v1/models 127.0.0.1:{PORT}"
    assert found["post"] == 'POST /v1/chat/completions {"model": "m"}'
    assert found["six"] in (
        "HTTP/1.1 200 OK",
        "none 97",
        "none 99",
    )  # [::1] wherever the kernel has it
    assert found["listing"] == "forward.py gateway.sock"
    assert gateway.served >= 2
    assert outcome.cleanup_confirmed and outcome.leftover == []


def test_without_a_gateway_the_port_is_closed_and_nothing_is_shown(runner, gateway):
    outcome, stdout = runner.python(
        """
        import os, socket
        try:
            socket.create_connection(("127.0.0.1", @PORT@), timeout=5)
            print("port open")
        except OSError as exc:
            print("port refused", exc.errno)
        print("run", sorted(os.listdir("/run")))
        """
    )
    assert outcome.exit_code == 0, outcome.stderr.data
    assert lines(stdout)["port"].startswith("refused")
    assert lines(stdout)["run"] == "[]"
    assert gateway.served == 0


ELSEWHERE = """
import socket, sys
def attempt(name, family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(address)
        print(name, "CONNECTED")
    except OSError as exc:
        print(name, "refused", exc.errno)
host_port, path, abstract = int(sys.argv[1]), sys.argv[2], sys.argv[3]
attempt("host-loopback", socket.AF_INET, ("127.0.0.1", host_port))
attempt("host-loopback-other-port", socket.AF_INET, ("127.0.0.1", @PORT@ + 1))
attempt("external", socket.AF_INET, ("192.0.2.1", 80))
attempt("external-dns", socket.AF_INET, ("8.8.8.8", 53))
attempt("external-six", socket.AF_INET6, ("2001:db8::1", 80))
attempt("host-socket-file", socket.AF_UNIX, path)
attempt("host-abstract", socket.AF_UNIX, "\\0" + abstract)
"""


def test_no_address_but_the_gateway_is_reachable(runner, gateway, folder):
    """What the host offers on its loopback, in an abstract socket or a socket file next to the
    gateway's: each reachable from the host (the control), refused inside."""
    host = socket.create_server(("127.0.0.1", 0))
    other = str(folder / "other.sock")
    others = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    others[0].bind(other)
    others[1].bind("\0yyb-port-" + folder.name)
    os.chmod(other, 0o777)
    heard = []
    for listener in (host, *others):
        listener.listen(8)
        threading.Thread(target=_note, args=(listener, heard), daemon=True).start()
    for address, family in ((host.getsockname(), socket.AF_INET), (other, socket.AF_UNIX)):
        with socket.socket(family) as probe:
            probe.connect(address)  # the control: these are open, from the host
    time.sleep(0.2)
    assert len(heard) == 2
    script = ELSEWHERE.replace("@PORT@", str(PORT))
    command = ["/usr/bin/python3", "-c", script, str(host.getsockname()[1]), other]
    outcome = runner.run([*command, "yyb-port-" + folder.name], gateway)
    stdout = outcome.stdout.data.decode()
    assert outcome.exit_code == 0, outcome.stderr.data
    found = lines(stdout)
    assert len(found) == 7, stdout
    assert all(answer.startswith("refused") for answer in found.values()), stdout
    time.sleep(0.2)
    assert len(heard) == 2  # nothing arrived from inside
    for listener in (host, *others):
        listener.close()


def _note(listener: socket.socket, heard: list) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        heard.append(conn)


def test_killing_the_forwarder_cuts_only_the_candidate_off(runner, gateway):
    outcome, stdout = runner.python(
        """
        import os, signal, socket, time, urllib.request
        urllib.request.urlopen("http://127.0.0.1:@PORT@/before").read()
        found = forwarders()
        print("forwarders", len(found))
        for pid in found:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)
        try:
            socket.create_connection(("127.0.0.1", @PORT@), timeout=5)
            print("after reached")
        except OSError as exc:
            print("after refused", exc.errno)
        """,
        gateway,
        finding=True,
    )
    assert outcome.exit_code == 0, outcome.stderr.data
    found = lines(stdout)
    assert found["forwarders"] == "1" and found["after"].startswith("refused"), stdout
    assert outcome.cleanup_confirmed
    with socket.socket(socket.AF_UNIX) as direct:  # the gateway itself never noticed
        direct.connect(gateway.path)
        direct.sendall(b"GET /after HTTP/1.0\r\n\r\n")
        assert direct.recv(100).startswith(b"HTTP/1.1 200")


REPLACE = """
import hashlib, os, shutil, socket, urllib.request
def attempt(name, action):
    try:
        action()
        print(name, "WORKED")
    except OSError as exc:
        print(name, "refused", exc.errno)
program = "/run/yyb/forward.py"
attempt("write", lambda: open(program, "a").write("x"))
attempt("remove", lambda: os.remove(program))
attempt("rename", lambda: os.rename(program, "/run/yyb/old.py"))
attempt("chmod", lambda: os.chmod(program, 0o777))
attempt("new-file", lambda: open("/run/yyb/other.py", "w").close())
attempt("remove-socket", lambda: os.remove("/run/yyb/gateway.sock"))
attempt("folder-rename", lambda: os.rename("/run/yyb", "/run/old"))
attempt("folder-remove", lambda: shutil.rmtree("/run/yyb"))
def plant():
    s = socket.socket(socket.AF_UNIX)
    s.bind("/run/yyb/planted.sock")
attempt("plant-socket", plant)
with open(program, "rb") as handle:
    print("program", hashlib.sha256(handle.read()).hexdigest())
print("still", urllib.request.urlopen("http://127.0.0.1:@PORT@/x").status)
"""


def test_the_forwarder_program_and_the_socket_cannot_be_replaced(runner, gateway):
    outcome, stdout = runner.python(REPLACE, gateway)
    assert outcome.exit_code == 0, outcome.stderr.data
    found = lines(stdout)
    assert found.pop("program") == hashlib.sha256(gatewayport.program()).hexdigest()
    assert found.pop("still") == "200"
    assert len(found) == 9, stdout
    for name, answer in found.items():
        assert answer.startswith("refused"), (name, stdout)


FLOOD = """
import socket, time, urllib.request
held = []
for _ in range(@COUNT@):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", @PORT@))
    held.append(s)
time.sleep(2)
print("held", len(held))
for s in held:
    s.close()
time.sleep(0.5)
print("after", urllib.request.urlopen("http://127.0.0.1:@PORT@/after", timeout=30).status)
"""


def test_a_flood_of_connections_leaves_the_gateway_bounded(runner, gateway):
    """300 connections held open, none sending: the gateway never holds more than the
    forwarder's limit, and the port serves again once they are gone."""
    outcome, stdout = runner.python(FLOOD.replace("@COUNT@", "300"), gateway)
    assert outcome.exit_code == 0, outcome.stderr.data
    assert lines(stdout) == {"held": "300", "after": "200"}
    assert gateway.peak == forwarder.MAX_CONNECTIONS


HOLDER = """
import os, time
print("fds", os.getpid(), sorted(map(int, os.listdir("/proc/self/fd"))))
for pid in forwarders():
    try:
        held = [os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%s/fd" % pid)]
        print("forwarder", " ".join(sorted(held)))
    except OSError as exc:
        print("forwarder unreadable", exc.errno)
os.write(int(os.environ["YYB_ENVELOPE_FD"]), b"envelope")
"""


def test_the_forwarder_does_not_hold_the_envelope_channel(runner, gateway):
    written = channel.Channel(1024)
    env = {**ENV, "YYB_ENVELOPE_FD": str(written.fd)}
    try:
        outcome, stdout = runner.python(
            HOLDER, gateway, pass_fds=(written.fd,), env=env, finding=True
        )
    finally:
        start = time.monotonic()
        got = written.collect(wait_s=5)
        waited = time.monotonic() - start
    assert outcome.exit_code == 0, outcome.stderr.data
    assert got == b"envelope" and waited < 1, waited
    held = lines(stdout)["forwarder"].split()
    assert not any(fd.startswith("pipe:") for fd in held), held
    assert held.count("/dev/null") == 3
    assert {fd.split(":")[0] for fd in held} <= {"/dev/null", "socket", "anon_inode"}


def test_the_end_of_an_attempt_is_not_delayed(runner, gateway):
    """The harness leaves at once; the wall time with the forwarder is the interpreter's
    start-up more, no wait for the forwarder to end."""
    command = ["/bin/sh", "-c", "exit 3"]

    def wall(given):
        times = []
        for _ in range(5):
            outcome = runner.run(command, given)
            assert outcome.exit_code == 3 and outcome.cleanup_confirmed, outcome
            times.append(outcome.wall_ms)
        return statistics.median(times)

    bare, behind = wall(None), wall(gateway)
    print(f"attempt wall time ({runner.mode}): {bare} ms bare, {behind} ms with the forwarder")
    assert behind - bare < 500


SAME = r"""
echo "argv $0 $*"
echo "pid $$ $PPID"
grep -E '^(SigIgn|SigBlk|SigCgt|NoNewPrivs|Seccomp|CapEff|CapBnd|Uid|Gid):' /proc/self/status \
  | tr '\t' ' ' | sed 's/: */ /'
read -r kids < /proc/$$/task/$$/children
echo "children [$kids]"
echo "fds $(ls /proc/$$/fd | tr '\n' ' ')"
echo "env $(tr '\0' ' ' < /proc/$$/environ)"
echo "umask $(umask)"
echo "cwd $(pwd)"
exit 7
"""


def test_the_harness_sees_the_same_process_behind_the_forwarder(runner, gateway):
    """argv, pid, parent, signal dispositions and mask, privileges, descriptors, environment
    (a coerced locale left out: no LANG given), folder and exit status are the same."""
    command = ["/bin/sh", "-c", SAME, "harness", "one", "two"]
    env = {"PATH": "/usr/bin:/bin", "YYB_T": "x"}
    bare = runner.run(command, None, env=env)
    behind = runner.run(command, gateway, env=env)
    assert bare.exit_code == behind.exit_code == 7, behind.stderr.data
    assert behind.stdout.data.decode() == bare.stdout.data.decode()
    assert "LC_CTYPE" not in behind.stdout.data.decode()
    assert behind.stderr.data == bare.stderr.data == b""


def test_a_harness_killed_by_a_signal_is_reported_so(runner, gateway):
    outcome = runner.run(["/bin/sh", "-c", "kill -TERM $$"], gateway)
    assert outcome.signal == 15 or outcome.exit_code == 128 + 15, outcome


BULK = """
import hashlib, socket, sys
size = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", @PORT@))
body = bytes(range(256)) * (size // 256)
s.sendall(b"POST /bulk HTTP/1.0\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
got = bytearray()
while chunk := s.recv(1 << 16):
    got += chunk
print("sent", hashlib.sha256(body).hexdigest())
print("received", len(got))
"""


def test_large_bodies_pass_intact_both_ways(runner, gateway):
    size = 4 << 20
    script = BULK.replace("@PORT@", str(PORT))
    outcome = runner.run(["/usr/bin/python3", "-c", script, str(size)], gateway)
    assert outcome.exit_code == 0, outcome.stderr.data
    found = lines(outcome.stdout.data.decode())
    body = bytes(range(256)) * (size // 256)
    assert found["sent"] == hashlib.sha256(body).hexdigest()
    # The echo holds the body as text in JSON: at least the body, in whatever escaping.
    assert int(found["received"]) > size


def test_the_port_and_the_folder_are_on_the_command_line_in_order(folder, gateway):
    box = sandbox.Sandbox(
        writable=[str(folder / "work")], gateway=gatewayport.Port(gateway.path, PORT)
    )
    args = box.argv(["/bin/true"], 3, program_fd=4)
    at = args.index("--")
    inside = args[at + 1 :]
    start = inside.index(gatewayport.INTERPRETER)
    assert inside[start:] == [
        gatewayport.INTERPRETER,
        "-I",
        "-S",
        gatewayport.PROGRAM,
        gatewayport.SOCKET,
        str(PORT),
        "--",
        "/bin/true",
    ]
    if os.geteuid() == 0:  # the forwarder starts after the drop, as confined as the harness
        assert inside[0] == sandbox.setpriv_path() and inside[start - 1] == "--"
    run_tmpfs = args.index("/run", args.index("--tmpfs") - 1)
    folder_tmpfs = args.index(gatewayport.FOLDER)
    root_read_only = next(
        i for i, word in enumerate(args) if args[i - 1 : i + 1] == ["--remount-ro", "/"]
    )
    assert run_tmpfs < folder_tmpfs < root_read_only < at
    assert args[args.index("--ro-bind-data") + 1] == "4"
    assert args[args.index(gatewayport.SOCKET) - 1] == gateway.path
    assert args[args.index(gatewayport.FOLDER, folder_tmpfs + 1) - 1] == "--remount-ro"
    assert "--unshare-net" in args  # loopback only, the gateway or not


def test_a_missing_socket_or_interpreter_fails_closed(folder, tmp_path):
    box = sandbox.Sandbox(
        writable=[str(folder)], gateway=gatewayport.Port(str(folder / "none.sock"), PORT)
    )
    with pytest.raises(sandbox.SandboxUnavailable, match="none.sock cannot be reached"):
        with box.launch(["/bin/true"]):
            pass
    (folder / "file").write_text("")
    box.gateway = gatewayport.Port(str(folder / "file"), PORT)
    with pytest.raises(sandbox.SandboxUnavailable, match="is not a socket"):
        with box.launch(["/bin/true"]):
            pass
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    box.os_root = str(root)
    with pytest.raises(sandbox.SandboxUnavailable, match="needs /usr/bin/python3"):
        box.argv(["/bin/true"], 3, program_fd=4)


def test_a_gateway_with_the_network_allowed_is_refused(folder, gateway):
    """Without a network namespace of its own the port would open on the host's loopback."""
    from yyb.errors import InvalidArgument

    port = gatewayport.Port(gateway.path, PORT)
    box = sandbox.Sandbox(writable=[str(folder)], network=True, gateway=port)
    with pytest.raises(InvalidArgument, match="network allowed"):
        box.argv(["/bin/true"], 3, program_fd=4)


@pytest.mark.parametrize("port", [0, 80, 1023, 65536, "8088"])
def test_a_port_the_sandbox_cannot_bind_is_refused(port):
    from yyb.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        gatewayport.Port("/run/gateway.sock", port)
    assert gatewayport.Port("/x.sock", 1024).url == "http://127.0.0.1:1024"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the socket to another uid")
def test_as_root_the_socket_is_given_to_the_sandbox_uid(folder):
    path = str(folder / "own.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        os.chmod(path, 0o500)
        assert gatewayport.admit(gatewayport.Port(path, PORT), 65534) is None
        found = os.stat(path)
        assert (found.st_uid, found.st_gid) == (65534, 65534)
        assert found.st_mode & 0o200
