"""A loose file that shadows a packed object of an experiment and does not verify (empty, or
one byte flipped): doctor, doctor --plan and verify-chain each report that copy, and fail."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Yyb, flip_byte
from tests.doctor.forge import attempt_of, leaf
from yyb.store import gc


@pytest.mark.parametrize("how", ["empty", "flipped"])
def test_a_bad_loose_copy_of_a_packed_terminal_fails_every_check(copy, how):
    store, plan_oid, _ = copy
    gc.gc(store)
    attempt_oid, _ = attempt_of(store, plan_oid, "example/fixer")
    ref = leaf(store, plan_oid, attempt_oid, "terminal")
    oid = store.refs.read(ref)
    path = store.objects.path(oid)
    assert not os.path.exists(path) and store.objects.contains(oid)  # packed only
    good = store.objects.read_raw(oid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"" if how == "empty" else good)
    if how == "flipped":
        flip_byte(path, len(good) // 2)
    yyb = Yyb(store.path)
    assert yyb("cat-object", "-e", oid).exit_code == 0  # a reader reads the packed copy
    for args in (("doctor",), ("doctor", "--plan", plan_oid), ("verify-chain", ref)):
        result = yyb(*args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        bad = [line for line in result.lines if line.startswith("error ")]
        assert bad and all(line.startswith(f"error bad-copy {oid}: ") for line in bad), bad
        assert f"objects/{oid[:2]}/{oid[2:]}" in bad[0]
