"""Hostile candidates against the sandbox itself: privilege, mounts, namespaces, what is visible.

CI runs as root, where a sandbox that only masks would keep every capability; these tests run
the real attempt path (prepare, dispatch, sandbox, supervisor) with stand-ins that try to
escape, and also the sandbox as an unprivileged user would start it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from yyb.harness import probe, sandbox

ESCAPER = """
grep -E '^(Uid|CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status
try() {  # try NAME COMMAND...: run it, say whether it worked
  name="$1"; shift
  if "$@" >/dev/null 2>&1; then echo "escape $name: WORKED"; else echo "escape $name: refused"; fi
}
try umount umount -l /tmp
try remount mount -o remount,bind,rw /
try mount-tmpfs mount -t tmpfs none /mnt
try setns-net nsenter --net=/proc/1/ns/net true
try setns-mnt nsenter --mount=/proc/1/ns/mnt true
try nested-umount unshare --user --map-root-user --mount umount -l /tmp
try nested-remount unshare --user --map-root-user --mount mount -o remount,bind,rw /usr
try write-usr sh -c 'echo x > /usr/PWNED-$MARK'
try write-etc sh -c 'echo x > /etc/PWNED-$MARK'
try write-root sh -c 'echo x > /PWNED-$MARK'
try chroot chroot / true
try kill-init sh -c 'kill -9 1; sleep 0.2; [ ! -e /proc/1/status ]'
envelope succeeded
"""


def _status(stdout: str) -> dict[str, str]:
    return {
        line.split(":", 1)[0]: line.split(":", 1)[1].split()[0]
        for line in stdout.splitlines()
        if line.split(":", 1)[0] in ("Uid", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp")
    }


def test_a_candidate_has_no_privilege_and_every_escape_fails(bench):
    model = bench.behaviour("escaper", ESCAPER)
    _, [result] = bench.run([model])
    stdout = bench.linked(result, "stdout").decode()
    status = _status(stdout)
    assert status["CapEff"].strip("0") == "" and status["CapPrm"].strip("0") == ""
    assert status["CapBnd"].strip("0") == "" and status["NoNewPrivs"] == "1"
    if os.geteuid() == 0:
        assert status["Uid"] != "0"  # root dropped to the sandbox uid
    attempts = [line for line in stdout.splitlines() if line.startswith("escape ")]
    assert len(attempts) == 12
    assert all(line.endswith(": refused") for line in attempts), attempts
    assert not Path(f"/usr/PWNED-{bench.mark}").exists()
    assert not Path(f"/etc/PWNED-{bench.mark}").exists()


LOOKER = """
for path in {paths}; do
  if [ -e "$path" ]; then echo "visible $path"; cat "$path" 2>/dev/null; ls -A "$path" 2>/dev/null
  else echo "absent $path"; fi
done
echo "tmp: $(ls -A /tmp | tr '\\n' ' ')"
echo "home: $(ls -A "$HOME" | tr '\\n' ' ')"
ls -A / | tr '\\n' ' '
envelope succeeded
"""


def test_nothing_outside_the_allow_list_is_visible_whatever_the_environment_says(
    bench, tmp_path, monkeypatch
):
    """TMPDIR and HOME pointed elsewhere, a clone of the source repository outside every
    configured place, the signing key, the grader's folder, the host temp folder: none of it
    exists inside the sandbox."""
    tag = uuid.uuid4().hex[:12]
    elsewhere = Path(tempfile.mkdtemp(prefix="yyb-elsewhere-", dir="/var/tmp"))
    try:
        places = {}
        for name in ("tmpdir", "home", "keys"):
            (elsewhere / name).mkdir()
        monkeypatch.setenv("TMPDIR", str(elsewhere / "tmpdir"))
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        monkeypatch.setenv("HOME", str(elsewhere / "home"))
        for place, path in {
            "tmpdir": elsewhere / "tmpdir" / "canary",
            "home": elsewhere / "home" / "canary",
            "host-tmp": Path("/tmp") / f"yyb-canary-{tag}",
            "grader-folder": bench.root / "graders" / "solution.patch",
        }.items():
            path.write_text(f"CANARY-{place}-{tag}\n")
            places[place] = path
        clone = elsewhere / "clone"
        subprocess.run(["git", "clone", "-q", str(bench.repo), str(clone)], check=True)
        places["clone"] = clone / "FUTURE.md"
        key = elsewhere / "keys" / "signing.key"
        from yyb import signing

        signing.generate_key(str(key))
        monkeypatch.setenv(signing.KEY_ENV, str(key))
        places["key"] = key
        places["store"] = Path(bench.store_path) / "format"
        places["repo"] = bench.repo / "calc.sh"
        places["config"] = bench.config_path
        places["grader"] = bench.root / "graders" / "grader.sh"
        paths = " ".join(f'"{p}"' for p in places.values())
        model = bench.behaviour("looker", LOOKER.format(paths=paths))
        _, [result] = bench.run([model])
        stdout = bench.linked(result, "stdout").decode()
        for place, path in places.items():
            assert f"absent {path}" in stdout, (place, stdout)
        assert "CANARY-" not in stdout
        assert "FUTURE-COMMIT" not in stdout
        tmp_line = next(line for line in stdout.splitlines() if line.startswith("tmp: "))
        # A private /tmp: only the folders leading to what is bound (the tools here).
        ways = [n for n in tmp_line.split()[1:] if not n.startswith("pytest-of-")]
        assert [n for n in ways if not n.startswith("yyb-run-")] == [], tmp_line
        assert "BEGIN PRIVATE KEY" not in stdout
        for text in (f"CANARY-home-{tag}", f"CANARY-tmpdir-{tag}", "PRIVATE KEY"):
            assert bench.holding(text) == []
    finally:
        Path("/tmp", f"yyb-canary-{tag}").unlink(missing_ok=True)
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_a_tool_path_that_resolves_into_a_protected_root_is_refused(bench):
    """A read-only tool path that is a symlink into the store would show the store: refused
    before anything is dispatched, with one line."""
    link = bench.root / "innocent-tools"
    link.symlink_to(bench.store_path)
    bench.configure(read_only_paths=[str(link)])
    plan = bench.plan(["stand/fixer"])
    with pytest.raises(sandbox.UnsafeToolPath, match="would expose"):
        bench.context(plan)
    assert bench.run_refs() == []
    done = bench.yyb("run", "--plan", bench.plan_file(["stand/fixer"]))
    assert done.exit_code == 2 and "would expose" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_tool_path_holding_the_temp_folder_is_refused(bench):
    bench.configure(read_only_paths=["/"])
    with pytest.raises(sandbox.UnsafeToolPath):
        bench.context(bench.plan(["stand/fixer"]))


SOCKETS = """
/usr/bin/python3 - "$1" <<'PY'
import socket, sys
for name, address in (("path", sys.argv[1]), ("abstract", "\\0" + sys.argv[1])):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(address)
        s.sendall(b"hello from the sandbox")
        print(f"socket {name}: CONNECTED")
    except OSError as exc:
        print(f"socket {name}: refused ({exc.__class__.__name__})")
PY
envelope succeeded
"""


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs /usr/bin/python3")
def test_host_unix_sockets_are_unreachable_when_the_network_is_denied(bench):
    folder = Path(tempfile.mkdtemp(prefix="yyb-sock-", dir="/var/tmp"))
    path = str(folder / "host.sock")
    heard = []
    servers = []
    for address in (path, "\0" + path):
        server = socket.socket(socket.AF_UNIX)
        server.bind(address)
        server.listen(4)
        server.settimeout(0.2)
        servers.append(server)
    os.chmod(path, 0o777)  # even a socket anyone may use

    def listen():
        for _ in range(60):
            for server in servers:
                try:
                    conn, _ = server.accept()
                    heard.append(conn.recv(100))
                except OSError:
                    continue

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        model = bench.behaviour("sockets", SOCKETS.replace('"$1"', f'"{path}"'))
        _, [result] = bench.run([model])
        stdout = bench.linked(result, "stdout").decode()
        assert "socket path: refused" in stdout and "socket abstract: refused" in stdout, stdout
        assert heard == []
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_the_probe_refuses_a_sandbox_with_privileges():
    good = (
        "Uid:\t65534\nCapEff:\t0000000000000000\nCapPrm:\t0\nCapBnd:\t0\nNoNewPrivs:\t1\n"
        "Seccomp:\t2\n"
    )
    probe._check(good)
    for bad, words in (
        (good.replace("CapEff:\t0000000000000000", "CapEff:\t000001fffeffffff"), "CapEff"),
        (good.replace("CapBnd:\t0", "CapBnd:\t1"), "CapBnd"),
        (good.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"), "no_new_privs"),
        (good + "canary-visible\n", "outside the sandbox"),
        (good.replace("Seccomp:\t2", "Seccomp:\t0"), "no seccomp filter"),
        (good.replace("Seccomp:\t2\n", ""), "no seccomp filter"),
        (good + "userns-made\n", "make a user namespace"),
        ("", "capabilities"),
    ):
        with pytest.raises(sandbox.SandboxUnavailable, match=words):
            probe._check(bad)
    if os.geteuid() == 0:
        with pytest.raises(sandbox.SandboxUnavailable, match="root"):
            probe._check(good.replace("Uid:\t65534", "Uid:\t0"))
    assert probe.probe() == sandbox.version()  # this host provides it all


def test_the_sandbox_holds_for_an_unprivileged_controller(open_folder, monkeypatch):
    """The construction a non-root yyb uses (a user namespace, every capability dropped, no
    further user namespace, the seccomp filter), started for real by an unprivileged user: no
    capability, no escape, nothing visible."""
    tmp_path = open_folder
    work = tmp_path / "work"
    work.mkdir()
    canary = tmp_path / "canary"
    canary.write_text("CANARY\n")
    script = (
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
        f"[ -e {canary} ] && echo canary-visible; "
        "umount -l /tmp 2>/dev/null && echo umount-worked; "
        "nsenter --net=/proc/1/ns/net true 2>/dev/null && echo setns-worked; "
        "unshare --user --map-root-user true 2>/dev/null && echo userns-worked; "
        "echo ok > probe"
    )
    prefix = []
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)  # build the unprivileged argv
        os.chown(work, 65534, 65534)
        os.chmod(tmp_path, 0o755)
        for parent in tmp_path.parents:
            if str(parent) != "/" and not os.stat(parent).st_mode & 0o001:
                pytest.skip(f"{parent} cannot be passed by an unprivileged user")
        prefix = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    box = sandbox.Sandbox(writable=[str(work)], hidden=[str(tmp_path)], cwd=str(work))
    with box.launch(["/bin/sh", "-c", script]) as launch:
        monkeypatch.undo()
        done = subprocess.run(
            prefix + launch.argv,
            capture_output=True,
            text=True,
            timeout=60,
            pass_fds=launch.pass_fds,
        )
    assert done.returncode == 0, done.stderr
    status = _status(done.stdout)
    assert status["CapEff"].strip("0") == "" and status["CapBnd"].strip("0") == ""
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    for word in ("canary-visible", "umount-worked", "setns-worked", "userns-worked"):
        assert word not in done.stdout
    assert (work / "probe").read_text() == "ok\n"
