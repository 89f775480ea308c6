"""A real OpenSSH server on loopback for the tests of ``ssh://`` remotes.

``sshd(folder)`` makes a host key and a client key, writes an sshd_config of its own (nothing
of the machine's: no /etc/ssh/sshd_config, no host key of the machine, no ~/.ssh), starts
``/usr/sbin/sshd -D -e -f CONFIG`` on 127.0.0.1 and a free port, and yields an :class:`Sshd`
saying how to reach it. It works as root and as an unprivileged user (who can only log in as
themselves): see docs/testing.md, "A real sshd on loopback".

The login account is the current user's, made hermetic with nss_wrapper where libnss-wrapper
is installed: sshd reads a passwd file of the fixture's, in which the user's home is the
fixture's ``remote-home`` folder and the login shell is /bin/sh (uid 65534 has
/usr/sbin/nologin and a locked account in Debian's passwd, so without it nobody can log in as
that user). Without nss_wrapper, root logs in with its own passwd entry and ``SetEnv HOME``.

Sessions get ``PATH=<bin>:/usr/local/bin:/usr/bin:/bin`` by ``SetEnv``; ``bin`` holds a
wrapper ``yyb`` that runs this test process's Python (and PYTHONPATH) on ``-m yyb``, so the
far side runs the yyb under test whatever the login's default PATH is.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"  # compiled into Debian's sshd; checked only when run as root
NSS_WRAPPER_NAMES = ("libnss_wrapper.so", "libnss_wrapper.so.0")
NSS_WRAPPER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0

# The variable yyb honours for its ssh:// transport, as git honours GIT_SSH_COMMAND: a shell
# words string that yyb runs with "-p PORT" (when the URL has a port), "user@host" and the
# far side's command appended.
SSH_COMMAND_VARIABLE = "YYB_SSH_COMMAND"


@dataclass(frozen=True)
class Sshd:
    """A running sshd and what a client needs to reach it."""

    host: str
    port: int
    user: str
    key: Path  # the client's private key
    known_hosts: Path  # the host key, for [127.0.0.1]:port
    ssh_command: list[str]  # argv prefix: append "user@host" and the command
    env: dict[str, str]  # for a child process whose ssh must use the options above
    bin: Path  # first on the far side's PATH
    home: Path  # the far side's HOME
    config: Path
    log_path: Path
    nss_wrapper: bool
    process: subprocess.Popen = field(repr=False, compare=False)

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}"

    def url(self, path: str | os.PathLike) -> str:
        text = os.fspath(path)
        if not text.startswith("/"):
            raise ValueError(f"an ssh:// URL needs an absolute path, not {text!r}")
        return f"ssh://{self.user}@{self.host}:{self.port}{text}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ssh(self, command: str, **kwargs) -> subprocess.CompletedProcess:
        """Run ``command`` (one shell string, as ssh sends it) on the far side."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("timeout", 30)
        return subprocess.run([*self.ssh_command, self.destination, command], **kwargs)

    def add_program(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None):
        """Write ``bin/NAME``, a wrapper that runs ``argv`` with the far side's arguments."""
        lines = ["#!/bin/sh"]
        lines += [f"export {key}={shlex.quote(value)}" for key, value in (env or {}).items()]
        lines.append(f'exec {shlex.join(argv)} "$@"')
        path = self.bin / name
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o755)
        return path


def missing_programs() -> list[str]:
    return [
        name
        for name, found in (
            (SSHD, os.access(SSHD, os.X_OK)),
            ("ssh", shutil.which("ssh")),
            ("ssh-keygen", shutil.which("ssh-keygen")),
        )
        if not found
    ]


def nss_wrapper_library() -> str | None:
    for folder in NSS_WRAPPER_DIRS:
        for name in NSS_WRAPPER_NAMES:
            path = os.path.join(folder, name)
            if os.path.exists(path):
                return path
    return None


def openssh_version() -> tuple[int, int]:
    out = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def keygen(path: Path, comment: str) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path


def yyb_wrapper_argv() -> tuple[list[str], dict[str, str]]:
    """This process's Python on ``-m yyb``, with its PYTHONPATH (the far side's env is bare)."""
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return [sys.executable, "-m", "yyb"], env


def _quoted(value: str) -> str:
    if '"' in value or "\n" in value:
        raise ValueError(f"sshd_config cannot hold {value!r}")
    return f'"{value}"'


def write_config(
    path: Path,
    *,
    port: int,
    host_key: Path,
    authorized_keys: Path,
    pid_file: Path,
    user: str,
    setenv: dict[str, str],
    version: tuple[int, int],
) -> None:
    lines = [
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {_quoted(str(host_key))}",
        f"PidFile {_quoted(str(pid_file))}",
        f"AuthorizedKeysFile {_quoted(str(authorized_keys))}",
        "AuthorizedKeysCommand none",
        "AuthenticationMethods publickey",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "UsePAM no",
        # The keys live under /tmp (1777): with StrictModes sshd refuses them.
        "StrictModes no",
        f"PermitRootLogin {'prohibit-password' if os.getuid() == 0 else 'no'}",
        f"AllowUsers {user}",
        "PermitUserEnvironment no",
        "PermitUserRC no",
        "PermitTTY no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "PermitTunnel no",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "LogLevel VERBOSE",
    ]
    if setenv:
        lines.append("SetEnv " + " ".join(_quoted(f"{k}={v}") for k, v in setenv.items()))
    if version >= (9, 8):
        # Failed logins of the tests (a wrong key on purpose) must not lock 127.0.0.1 out.
        lines.append("PerSourcePenalties no")
    path.write_text("\n".join(lines) + "\n")


def _passwd_line(name: str, uid: int, gid: int, home: str, shell: str) -> str:
    return f"{name}:x:{uid}:{gid}:{name}:{home}:{shell}\n"


def write_nss_files(folder: Path, user: str, home: Path) -> tuple[Path, Path]:
    """A passwd with the login (home: ``home``, shell /bin/sh) and, for a root sshd, its
    privilege separation user; a group file with their groups."""
    uid, gid = os.getuid(), os.getgid()
    passwd = [_passwd_line(user, uid, gid, str(home), "/bin/sh")]
    gids = {gid}
    if uid == 0:
        try:
            sep = pwd.getpwnam("sshd")
        except KeyError:
            pass
        else:
            passwd.append(_passwd_line("sshd", sep.pw_uid, sep.pw_gid, PRIVSEP_DIR, "/bin/false"))
            gids.add(sep.pw_gid)
    groups = []
    for number in sorted(gids):
        try:
            name = grp.getgrgid(number).gr_name
        except KeyError:
            name = f"g{number}"
        groups.append(f"{name}:x:{number}:\n")
    passwd_path, group_path = folder / "passwd", folder / "group"
    passwd_path.write_text("".join(passwd))
    group_path.write_text("".join(groups))
    return passwd_path, group_path


def _current_user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:
        return None


@contextmanager
def sshd(folder: Path, *, nss_wrapper: bool | None = None) -> Iterator[Sshd]:
    """Run a hermetic sshd for ``folder``'s lifetime; skip the test where it cannot run.

    ``nss_wrapper``: None uses it where libnss-wrapper is installed, True requires it, False
    logs in with the user's own passwd entry (HOME set by SetEnv)."""
    missing = missing_programs()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install openssh-server openssh-client)")
    library = nss_wrapper_library()
    if nss_wrapper and library is None:
        pytest.skip("needs libnss_wrapper.so (apt-get install libnss-wrapper)")
    use_wrapper = library is not None if nss_wrapper is None else nss_wrapper
    entry = _current_user()
    if not use_wrapper:
        if entry is None:
            pytest.skip(f"uid {os.getuid()} has no passwd entry (apt-get install libnss-wrapper)")
        if os.path.basename(entry.pw_shell) in ("nologin", "false"):
            pytest.skip(
                f"{entry.pw_name}'s login shell is {entry.pw_shell}: sshd cannot run a command "
                "as that user without nss_wrapper's passwd (apt-get install libnss-wrapper)"
            )
    user = entry.pw_name if entry else f"u{os.getuid()}"
    if os.getuid() == 0 and not os.path.isdir(PRIVSEP_DIR):
        # What Debian's ssh.service makes (RuntimeDirectory=sshd): an empty root-owned folder
        # the pre-authentication child chroots into. Left in place: another sshd may use it.
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)

    folder = Path(folder).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    home, bin_dir = folder / "remote-home", folder / "bin"
    home.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    host_key = keygen(folder / "host_ed25519", "yyb-test-host")
    key = keygen(folder / "client_ed25519", "yyb-test-client")
    config, log_path = folder / "sshd_config", folder / "sshd.log"
    known_hosts = folder / "known_hosts"
    host_public = " ".join(Path(f"{host_key}.pub").read_text().split()[:2])

    setenv = {"PATH": f"{bin_dir}:{SYSTEM_PATH}"}
    server_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    if use_wrapper:
        passwd, group = write_nss_files(folder, user, home)
        server_env |= {
            "LD_PRELOAD": library,
            "NSS_WRAPPER_PASSWD": str(passwd),
            "NSS_WRAPPER_GROUP": str(group),
        }
    else:
        setenv["HOME"] = str(home)
    version = openssh_version()

    process = None
    for _attempt in range(5):
        port = free_port()
        write_config(
            config,
            port=port,
            host_key=host_key,
            authorized_keys=Path(f"{key}.pub"),
            pid_file=folder / "sshd.pid",
            user=user,
            setenv=setenv,
            version=version,
        )
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                env=server_env,
                start_new_session=True,
            )
        listening = f"Server listening on 127.0.0.1 port {port}."
        deadline = time.monotonic() + START_TIMEOUT
        while listening not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        else:
            break
        if process.poll() is None:
            process.kill()
            process.wait()
            raise RuntimeError(f"sshd did not listen in {START_TIMEOUT} s:\n{log_path.read_text()}")
        if "Bind to port" not in log_path.read_text():  # not a port someone took meanwhile
            raise RuntimeError(f"sshd exited {process.returncode}:\n{log_path.read_text()}")
    else:
        raise RuntimeError(f"sshd found no free port:\n{log_path.read_text()}")

    known_hosts.write_text(f"[127.0.0.1]:{port} {host_public}\n")
    options = [
        "ssh",
        "-F",
        os.devnull,
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "IdentityAgent=none",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        f"GlobalKnownHostsFile={os.devnull}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "UpdateHostKeys=no",
        "-o",
        "BatchMode=yes",
    ]
    command = shlex.join(options)
    server = Sshd(
        host="127.0.0.1",
        port=port,
        user=user,
        key=key,
        known_hosts=known_hosts,
        ssh_command=[*options[:1], "-p", str(port), *options[1:]],
        env={SSH_COMMAND_VARIABLE: command, "GIT_SSH_COMMAND": command},
        bin=bin_dir,
        home=home,
        config=config,
        log_path=log_path,
        nss_wrapper=use_wrapper,
        process=process,
    )
    argv, env = yyb_wrapper_argv()
    server.add_program("yyb", argv, env)
    try:
        yield server
    finally:
        process.terminate()
        try:
            code = process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError(
                f"sshd ignored SIGTERM for {STOP_TIMEOUT} s:\n{server.log()}"
            ) from None
        if code != 0:
            raise RuntimeError(f"sshd exited {code} on SIGTERM:\n{server.log()}")


def sshd_fixture(name: str = "sshd_server", scope: str = "session"):
    """A pytest fixture NAME running one :func:`sshd` per SCOPE. In a test module:
    ``_server = sshd_fixture()``; in a conftest.py, ``sshd_server`` below, imported."""

    @pytest.fixture(scope=scope, name=name)
    def fixture(tmp_path_factory) -> Iterator[Sshd]:
        with sshd(tmp_path_factory.mktemp("sshd")) as server:
            yield server

    return fixture


sshd_server = sshd_fixture()
