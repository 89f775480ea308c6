"""A store on a full or read-only file system: one clear error, nothing half-written kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def yyb(store, *args, input=None):
    return subprocess.run(
        [sys.executable, "-m", "yyb", "--store", str(store), *args],
        capture_output=True,
        input=input,
        timeout=60,
    )


def one_line(done, code, needle):
    assert done.returncode == code, done.stderr
    err = done.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("yyb: error: ") and needle in err, err
    assert "Traceback" not in err


def leftovers(root):
    return [
        os.path.join(folder, name)
        for folder, _, names in os.walk(root)
        for name in names
        if name.startswith(".tmp")
    ]


def test_full_file_system(small_fs, tmp_path):
    store = small_fs / "store"
    assert yyb(store, "store", "init").returncode == 0
    small = yyb(store, "hash-object", "-w", "--stdin", input=b"fits\n")
    assert small.returncode == 0
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 << 20))
    one_line(yyb(store, "hash-object", "-w", str(big)), 1, "no space left")
    one_line(
        yyb(store, "hash-object", "-w", "--stdin", input=os.urandom(3 << 20)), 1, "no space left"
    )
    assert leftovers(store) == []
    record = (
        b'{"schema_version": "yyb_note.v1", "message": "m", "data": {"x": "'
        + b"x" * 1_500_000
        + b'"}}'
    )
    one_line(
        yyb(store, "hash-object", "-w", "-t", "record", "--stdin", input=record), 1, "no space left"
    )
    assert leftovers(store) == []
    doctor = yyb(store, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    oid = small.stdout.decode().strip()
    assert yyb(store, "cat-object", "-p", oid).stdout == b"fits\n"


def test_read_only_file_system(small_fs):
    store = small_fs / "store"
    assert yyb(store, "store", "init").returncode == 0
    oid = yyb(store, "hash-object", "-w", "--stdin", input=b"kept\n").stdout.decode().strip()
    assert yyb(store, "update-ref", "notes/a", oid).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    one_line(yyb(store, "hash-object", "-w", "--stdin", input=b"new\n"), 1, "read-only")
    one_line(yyb(store, "update-ref", "notes/b", oid), 1, "read-only")
    assert yyb(store, "cat-object", "-p", "notes/a").stdout == b"kept\n"
    assert yyb(store, "verify-chain", "notes/a").returncode == 0
    assert yyb(store, "doctor").returncode == 0


def test_a_report_of_a_read_only_store_needs_no_layer(small_fs):
    from tests.reports.fabricate import Spec, fabricate
    from yyb.store.repo import Store

    store_path = small_fs / "store"
    store, _ = Store.init(str(store_path))
    plan = fabricate(store, Spec(["m/a"], ["c1"], attempts=2))
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    refused = yyb(store_path, "report", "--plan", plan)
    one_line(refused, 1, "read-only (--no-layer reports without storing a layer)")
    assert refused.stdout == b""
    done = yyb(store_path, "report", "--plan", plan, "--no-layer")
    assert done.returncode == 0, done.stderr
    assert b"layer: not stored (--no-layer)" in done.stdout and b"m/a" in done.stdout
