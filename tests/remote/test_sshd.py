"""The loopback sshd fixture: logins, refusals, a binary-safe pipe, its log."""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import socket
import subprocess
import time

import pytest

from tests.remote.sshd import (
    SSH_COMMAND_VARIABLE,
    SYSTEM_PATH,
    keygen,
    nss_wrapper_library,
    sshd,
)

PIPE_BYTES = 8 << 20


def expected_user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"u{os.getuid()}"


def test_a_command_runs_as_this_user_with_the_fixtures_path_and_home(sshd_server):
    done = sshd_server.ssh('id -u; id -un; echo "$PATH"; echo "$HOME"; yyb --version')
    assert done.returncode == 0, done.stderr.decode()
    uid, name, path, home, version = done.stdout.decode().splitlines()
    assert int(uid) == os.getuid()
    assert name == sshd_server.user == expected_user()
    assert path == f"{sshd_server.bin}:{SYSTEM_PATH}"
    assert home == str(sshd_server.home)
    assert version.startswith("yyb, version ")


def test_the_far_sides_yyb_is_the_one_under_test(sshd_server):
    done = sshd_server.ssh("yyb hash-object --help >/dev/null && command -v yyb")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == str(sshd_server.bin / "yyb")


@pytest.mark.parametrize("wrapped", [True, False], ids=["nss_wrapper", "own-passwd-entry"])
def test_both_login_accounts_work_where_they_can(tmp_path, wrapped):
    if wrapped and nss_wrapper_library() is None:
        pytest.skip("needs libnss-wrapper")
    with sshd(tmp_path, nss_wrapper=wrapped) as server:
        assert server.nss_wrapper is wrapped
        done = server.ssh('id -u; echo "$HOME"; echo "$PATH"; yyb --version')
        assert done.returncode == 0, done.stderr.decode() + server.log()
        uid, home, path, version = done.stdout.decode().splitlines()
        assert (int(uid), home, path) == (
            os.getuid(),
            str(server.home),
            f"{server.bin}:{SYSTEM_PATH}",
        )
        assert version.startswith("yyb, version ")
        if wrapped:  # the login's home and shell are the fixture's, its cwd too
            where = server.ssh('pwd; echo "$SHELL"').stdout.decode().split()
            assert where == [str(server.home), "/bin/sh"]
        process = server.process
    assert process.returncode == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def test_a_key_not_authorized_is_refused(sshd_server, tmp_path):
    other = keygen(tmp_path / "other", "not-authorized")
    argv = list(sshd_server.ssh_command)
    argv[argv.index(str(sshd_server.key))] = str(other)
    done = subprocess.run([*argv, sshd_server.destination, "true"], capture_output=True, timeout=30)
    assert done.returncode == 255
    assert b"Permission denied (publickey)" in done.stderr


def test_a_host_key_other_than_the_known_one_is_refused(sshd_server, tmp_path):
    impostor = keygen(tmp_path / "impostor", "impostor")
    public = " ".join((tmp_path / "impostor.pub").read_text().split()[:2])
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd_server.port} {public}\n")
    argv = [
        f"UserKnownHostsFile={known}" if a.startswith("UserKnownHostsFile=") else a
        for a in sshd_server.ssh_command
    ]
    assert impostor.exists() and argv != sshd_server.ssh_command
    done = subprocess.run([*argv, sshd_server.destination, "true"], capture_output=True, timeout=30)
    assert done.returncode == 255
    assert b"Host key verification failed" in done.stderr


def test_the_environment_variable_reaches_the_server_as_the_url_says(sshd_server, tmp_path):
    url = sshd_server.url(tmp_path)
    assert url == f"ssh://{sshd_server.user}@127.0.0.1:{sshd_server.port}{tmp_path}"
    with pytest.raises(ValueError):
        sshd_server.url("relative/path")
    # What yyb does with an ssh:// URL: its command string, then -p PORT user@host COMMAND.
    command = sshd_server.env[SSH_COMMAND_VARIABLE]
    argv = [*shlex.split(command), "-p", str(sshd_server.port), sshd_server.destination]
    (tmp_path / "marker").write_text("here")
    done = subprocess.run(
        [*argv, f"cat {shlex.quote(str(tmp_path / 'marker'))}"],
        capture_output=True,
        timeout=30,
        env={**os.environ, **sshd_server.env},
    )
    assert (done.returncode, done.stdout) == (0, b"here"), done.stderr.decode()


def test_eight_mib_of_random_bytes_go_through_cat_and_back_intact(sshd_server, record_property):
    data = os.urandom(PIPE_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    started = time.perf_counter()
    there = sshd_server.ssh("sha256sum", input=data)
    back = sshd_server.ssh("cat", input=data)
    seconds = time.perf_counter() - started
    assert there.returncode == 0 and back.returncode == 0, there.stderr + back.stderr
    assert there.stdout.decode().split()[0] == digest  # the bytes as they arrived there
    assert len(back.stdout) == PIPE_BYTES
    assert hashlib.sha256(back.stdout).hexdigest() == digest  # and as they came back
    # Two sessions: 8 MiB up, then 8 MiB up and 8 MiB down.
    record_property("pipe_mib_per_s", round(3 * PIPE_BYTES / 2**20 / seconds, 1))
    print(f"8 MiB up, then up and down through cat: {seconds:.2f} s")


def test_the_log_records_the_login(sshd_server):
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", f"{sshd_server.key}.pub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    assert sshd_server.ssh("true").returncode == 0
    log = sshd_server.log()
    assert f"Accepted publickey for {sshd_server.user} from 127.0.0.1" in log
    assert fingerprint in log
    assert f"Starting session: command for {sshd_server.user} from 127.0.0.1" in log
