"""Retaining a workspace costs what its size limit allows, in memory as in time.

A candidate can make a file of any apparent size in an instant (``truncate -s``). The scan,
the patch and the rebuild must hold at most a bounded amount of it in memory, and must decide
what to omit from the apparent size alone, before reading a byte. Sparse files stand in for
large ones: the bytes are zeros, the costs are the same for every reader but the disk.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from tests.conftest import flip_byte
from yyb.harness import manifest, patch

MIB = 1 << 20


def sparse(path: Path, size: int, head: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)


def peak_of(work) -> tuple[object, int]:
    """(what ``work()`` returned, the peak of Python allocations while it ran, in bytes)."""
    tracemalloc.start()
    try:
        value = work()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_scan_and_diff_of_large_files_hold_a_bounded_amount(disk_store, tmp_path):
    work = tmp_path / "work"
    (work / "notes.txt").parent.mkdir(parents=True)
    (work / "notes.txt").write_text("a\n")
    base = manifest.scan(disk_store, str(work))
    sparse(work / "big.bin", 100 * MIB, b"text at the start\n")
    for i in range(6):  # just under the size where files are streamed: read whole, one by one
        sparse(work / f"mid{i}.bin", 15 * MIB, f"mid {i}\n".encode())
    (work / "notes.txt").write_text("a\nb\n")

    def retain():
        final = manifest.scan(disk_store, str(work))
        return final, patch.diff(disk_store, base.entries, final.entries)

    (final, diff), peak = peak_of(retain)
    assert sorted(final.entries) == ["big.bin", *(f"mid{i}.bin" for i in range(6)), "notes.txt"]
    assert peak < 48 * MIB, f"retaining held {peak / MIB:.0f} MiB at its peak"
    big = final.entries["big.bin"][1]
    line = f"Binary or large file b/big.bin: {100 * MIB} bytes, blob {big}"
    assert line in diff.decode()
    assert "+b\n" in diff.decode()  # small text files still get a real diff


def test_a_file_past_the_total_is_omitted_unread_and_later_files_are_kept(
    disk_store, tmp_path, monkeypatch
):
    work = tmp_path / "work"
    sparse(work / "aaa-huge.bin", manifest.MAX_TOTAL + 1)
    (work / "calc.sh").write_text("echo ok\n")
    opened: list[str] = []
    real_open = os.open

    def watch(path, *args, **kwargs):
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", watch)
    scanned = manifest.scan(disk_store, str(work))
    monkeypatch.undo()
    assert sorted(scanned.entries) == ["calc.sh"]
    [(path, reason)] = scanned.omitted
    assert path == "aaa-huge.bin" and str(manifest.MAX_TOTAL) in reason
    assert not any(p.endswith("aaa-huge.bin") for p in opened)


def test_rebuild_streams_large_blobs_and_keeps_them_sparse(disk_store, tmp_path):
    work = tmp_path / "work"
    sparse(work / "big.bin", 100 * MIB, b"head\n")
    listing = manifest.listing_record(manifest.scan(disk_store, str(work)))
    dest = tmp_path / "dest"
    _, peak = peak_of(lambda: manifest.rebuild(disk_store, listing, str(dest)))
    assert peak < 16 * MIB, f"rebuild held {peak / MIB:.0f} MiB at its peak"
    rebuilt = dest / "big.bin"
    assert rebuilt.stat().st_size == 100 * MIB
    with open(rebuilt, "rb") as handle:
        assert handle.read(5) == b"head\n"
    assert rebuilt.stat().st_blocks * 512 < 4 * MIB  # its zeros were not written out


def test_a_damaged_large_blob_refuses_the_rebuild(disk_store, tmp_path):
    from yyb.errors import CorruptObject

    work = tmp_path / "work"
    sparse(work / "big.bin", 40 * MIB, b"head\n")
    listing = manifest.listing_record(manifest.scan(disk_store, str(work)))
    oid = listing["links"]["files"][0]
    flip_byte(disk_store.objects.path(oid), 20 * MIB)
    with pytest.raises(CorruptObject):
        manifest.rebuild(disk_store, listing, str(tmp_path / "dest"))


def test_past_the_file_and_omission_limits_the_rest_is_counted(disk_store, tmp_path, monkeypatch):
    from yyb.harness import worktree

    monkeypatch.setattr(worktree, "MAX_FILES", 30)
    monkeypatch.setattr(manifest, "MAX_OMITTED", 5)
    work = tmp_path / "work"
    (work / "a").mkdir(parents=True)
    (work / "b").mkdir()
    for i in range(20):
        os.mkfifo(work / "a" / f"fifo-{i:02d}")
        (work / "b" / f"file-{i:02d}").write_text(f"{i}\n")
    scanned = manifest.scan(disk_store, str(work))
    assert sorted(scanned.entries) == [f"b/file-{i:02d}" for i in range(10)]
    assert len(scanned.omitted) == 6
    last_path, last_reason = scanned.omitted[-1]
    assert last_path == "a/fifo-05" and "and 15 paths after it" in last_reason
    listing = manifest.listing_record(scanned)  # a valid record, whatever was left out
    disk_store.objects.put_record(listing)


def test_past_the_bytes_of_paths_limit_the_walk_stops(disk_store, tmp_path, monkeypatch):
    from yyb.harness import worktree

    monkeypatch.setattr(worktree, "MAX_PATH_BYTES", 100)
    work = tmp_path / "work"
    work.mkdir()
    for i in range(10):
        (work / (f"{i}-" + "x" * 30)).write_text("x\n")
    scanned = manifest.scan(disk_store, str(work))
    assert len(scanned.entries) == 3  # 32 bytes each: the fourth would pass 100
    [(path, reason)] = scanned.omitted
    assert path.startswith("3-") and "bytes of paths" in reason
