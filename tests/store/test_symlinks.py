"""Symbolic links in a store: never read or written through, always reported by fsck.

A link where an object file or a fan-out folder (``objects/ab``) belongs would make the store
serve, or write, bytes that live elsewhere: another store, a user's files, a folder that
changes under it. The reader opens both without following links; fsck names each link.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Yyb, note
from yyb.errors import CorruptObject, ObjectMissing, StoreIOError
from yyb.store.fsck import fsck


def errors(store) -> set[tuple[str, str]]:
    return {(f.code, f.subject) for f in fsck(store) if f.level == "error"}


def _link_file(store, oid: str, elsewhere: Path) -> str:
    """Move ``oid``'s file out of the store and leave a link to it (same bytes, same hash)."""
    path = store.objects.path(oid)
    elsewhere.mkdir(exist_ok=True)
    moved = elsewhere / oid
    shutil.move(path, moved)
    os.symlink(moved, path)
    return f"objects/{oid[:2]}/{oid[2:]}"


def _link_folder(store, oid: str, elsewhere: Path) -> str:
    """Move ``oid``'s fan-out folder out of the store and leave a link to it."""
    folder = os.path.dirname(store.objects.path(oid))
    shutil.move(folder, elsewhere)
    os.symlink(elsewhere, folder)
    return f"objects/{oid[:2]}"


LINKERS = {"file": _link_file, "folder": _link_folder}


@pytest.mark.parametrize("where", LINKERS)
def test_objects_are_not_read_through_a_link(disk_store, tmp_path, where):
    blob = disk_store.objects.put("blob", b"served from elsewhere\n")
    record = disk_store.objects.put_record(note("links the blob", log=blob))
    disk_store.refs.update("notes/x", record)
    subject = LINKERS[where](disk_store, blob, tmp_path / "elsewhere")
    for read in (disk_store.objects.get, disk_store.objects.read_raw, disk_store.objects.open_body):
        with pytest.raises(CorruptObject) as caught:
            read(blob)
        assert caught.value.code == "symlink" and "symbolic link" in str(caught.value)
    assert not disk_store.objects.contains(blob)
    found = errors(disk_store)
    assert ("symlink", subject) in found
    assert ("broken-link", record) in found  # the object is not in the store
    shown = Yyb(disk_store.path)("cat-object", "-p", blob)
    assert shown.exit_code == 1 and shown.stderr.count("\n") == 1
    assert "symbolic link" in shown.stderr and shown.stdout == ""
    checked = Yyb(disk_store.path)("verify-chain", "notes/x")
    assert checked.exit_code == 1 and f"links {blob}, which is missing" in checked.stdout


def test_nothing_is_written_through_a_linked_folder(disk_store, tmp_path):
    blob = disk_store.objects.put("blob", b"first\n")
    _link_folder(disk_store, blob, tmp_path / "elsewhere")
    before = sorted(os.listdir(tmp_path / "elsewhere"))
    sibling = next(
        body
        for n in range(100_000)
        if (body := b"%d" % n) and _oid(body)[:2] == blob[:2] and _oid(body) != blob
    )
    with pytest.raises(StoreIOError, match="symbolic link"):
        disk_store.objects.put("blob", sibling)
    with pytest.raises(StoreIOError, match="symbolic link"):
        disk_store.objects.put_many(
            [("blob", sibling)] * 8 + [("blob", b"x%d" % n) for n in range(8)]
        )
    assert sorted(os.listdir(tmp_path / "elsewhere")) == before
    # An abbreviation does not resolve through the link either.
    with pytest.raises(ObjectMissing):
        disk_store.objects.resolve(blob[:8])


def _oid(body: bytes) -> str:
    from yyb.store.objects.format import hash_object

    return hash_object("blob", body)


def test_writing_an_object_replaces_a_link_in_its_place(disk_store, tmp_path):
    blob = disk_store.objects.put("blob", b"heal me\n")
    _link_file(disk_store, blob, tmp_path / "elsewhere")
    assert disk_store.objects.put("blob", b"heal me\n") == blob
    assert not os.path.islink(disk_store.objects.path(blob))
    assert disk_store.objects.get(blob).body == b"heal me\n"
    assert errors(disk_store) == set()


def test_fsck_names_every_link_in_the_layout(disk_store, tmp_path):
    blob = disk_store.objects.put("blob", b"x")
    disk_store.refs.update("notes/x", blob)
    outside = tmp_path / "outside"
    outside.mkdir()
    root = Path(disk_store.path)
    os.symlink(outside, root / "refs" / "linked")
    os.symlink(root / "refs" / "notes" / "x", root / "refs" / "notes" / "alias")
    os.symlink(outside, root / "objects" / "zz")
    found = errors(disk_store)
    for subject in ("refs/linked", "refs/notes/alias", "objects/zz"):
        assert ("symlink", subject) in found


def test_a_fifo_in_place_of_an_object_does_not_hang_doctor(disk_store):
    blob = disk_store.objects.put("blob", b"x")
    path = disk_store.objects.path(blob)
    os.chmod(path, 0o644)
    os.unlink(path)
    os.mkfifo(path)
    done = subprocess.run(  # first, in a child: a reader that blocks fails by the timeout
        [sys.executable, "-m", "yyb", "--store", disk_store.path, "doctor"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and f" {blob}: ".encode() in done.stdout
    with pytest.raises(CorruptObject, match="not a regular file"):
        disk_store.objects.get(blob)
