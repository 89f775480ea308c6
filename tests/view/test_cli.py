"""`yyb view` as a command: the URL line, a clean stop, and one error line for bad input."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import run_yyb, signalled


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_it_prints_its_url_serves_and_stops_cleanly(example, stop):
    argv = [sys.executable, "-m", "yyb", "--store", example.store_path, "view"]
    with signalled(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        line = process.stdout.readline()
        assert line.startswith("yyb view: http://127.0.0.1:"), line + process.stderr.read()
        try:
            with urllib.request.urlopen(line.split()[-1], timeout=10) as response:
                assert response.status == 200 and b"Experiments" in response.read()
        finally:
            process.send_signal(stop)
            out, err = process.communicate(timeout=10)
    assert process.returncode == 0 and err == "" and out == ""


def test_a_port_in_use_is_one_line_and_exit_2(example):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_yyb("--store", example.store_path, "view", "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f"yyb: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(--port 0 picks a free port)"
    ]


def test_no_store_is_one_line_and_exit_2(tmp_path):
    done = run_yyb("--store", str(tmp_path / "none"), "view")
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("yyb: error: ") and "not a yyb store" in lines[0]
    assert not (tmp_path / "none").exists()
