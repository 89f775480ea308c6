"""What is not part of the store's format is reported wherever it lies: a file where one of the
store's folders belongs, a lock below a folder of locks/, a pack whose name is not its
trailer; doctor reports each in one line and goes on (never a traceback)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import Yyb, note
from yyb.store import gc
from yyb.store.repo import Store


def kept(path: str) -> Store:
    store, _ = Store.init(path)
    blob = store.objects.put("blob", b"the evidence itself\n")
    store.refs.update("refs/notes/kept", store.objects.put_record(note("kept", blob=blob)))
    return store


def doctor_errors(store: Store) -> list[str]:
    result = Yyb(store.path)("doctor")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return [line for line in result.lines if line.startswith("error ")]


@pytest.mark.parametrize("folder", ["objects", "refs", "logs", "tmp", "locks"])
def test_a_file_where_a_folder_of_the_store_belongs(tmp_path, folder):
    store, _ = Store.init(str(tmp_path / "s"))
    shutil.rmtree(os.path.join(store.path, folder))
    with open(os.path.join(store.path, folder), "wb") as handle:
        handle.write(b"not a folder\n")
    found = doctor_errors(store)
    assert found == [f"error stray-file {folder}: a file stands where a folder belongs"], found


def test_a_lock_below_a_folder_of_locks_is_stray(tmp_path):
    store = kept(str(tmp_path / "s"))
    os.makedirs(os.path.join(store.path, "locks", "run"))
    open(os.path.join(store.path, "locks", "run", "deep.lock"), "wb").close()
    assert doctor_errors(store) == [
        "error stray-file locks/run/deep.lock: not part of the store's layout"
    ]


def test_a_pack_whose_name_is_not_its_trailer(tmp_path):
    store = kept(str(tmp_path / "s"))
    gc.gc(store)
    path = store.objects.packs(rescan=True)[0].path
    other = os.path.join(os.path.dirname(path), "pack-" + "ab" * 32)
    os.rename(path[: -len(".pack")] + ".idx", other + ".idx")
    os.rename(path, other + ".pack")
    rel = os.path.relpath(other + ".pack", store.path)
    found = doctor_errors(Store.open(store.path))
    assert found and found[0].startswith(f"error bad-pack {rel}: "), found
    assert "its name is not pack-<its trailer in hex>.pack" in found[0]
    result = Yyb(store.path)("verify-pack", other + ".pack")
    assert result.exit_code == 1 and "its name is not" in result.stderr + result.stdout
