"""Rebuilding a workspace from a retained listing never writes outside the folder it is given.

The listing comes from the store, so it is treated as an attacker's: a hash-correct,
schema-valid listing can still name ``../../x``. Every path is checked component by component
before anything is written; a listing that fails the check is refused whole.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from yyb.errors import UnsafeListing, YybError
from yyb.harness import manifest

FILE, EXEC, LINK = 0o100644, 0o100755, 0o120000


def stored_listing(store, entries: list[tuple[str, int, bytes]]) -> tuple[str, dict]:
    """Put blobs and a schema-valid listing naming them into ``store``; read it back."""
    files: list[str] = []
    rows = []
    for path, mode, body in entries:
        oid = store.objects.put("blob", body)
        if oid not in files:
            files.append(oid)
        rows.append([path, mode, files.index(oid)])
    record = {"schema_version": manifest.LISTING, "entries": rows, "omitted": []}
    record["links"] = {"files": files}
    oid = store.objects.put_record(record)
    return oid, store.objects.get_record(oid)


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (symlinks not followed): relative path -> what it is."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            kind = "link" if stat.S_ISLNK(info.st_mode) else "dir" if path.is_dir() else "file"
            found[str(path.relative_to(root))] = kind
    return found


@pytest.fixture
def area(tmp_path: Path) -> Path:
    """A folder whose whole content is watched: the rebuild goes to ``area/a/b/dest``."""
    root = tmp_path / "area"
    (root / "a" / "b").mkdir(parents=True)
    (root / "outside").mkdir()
    return root


UNSAFE = [
    ("../../x", "'..'"),
    ("a/../../../x", "'..'"),
    ("./x", "'.'"),
    ("a/./x", "'.'"),
    ("a//x", "empty"),
    ("x/", "empty"),
    ("", "empty"),
    ("x\0y", "NUL"),
    (".git/config", ".git"),
    ("sub/.git/hooks/pre-commit", ".git"),
    (".GIT/config", ".git"),
    ("x" * 256, "255 bytes"),
]


@pytest.mark.parametrize(("path", "why"), UNSAFE)
def test_an_unsafe_path_refuses_the_whole_listing(store, area, path, why):
    before = tree(area)
    _, listing = stored_listing(store, [("ok.txt", FILE, b"fine\n"), (path, FILE, b"evil\n")])
    with pytest.raises(YybError) as info:
        manifest.rebuild(store, listing, str(area / "a" / "b" / "dest"))
    assert isinstance(info.value, UnsafeListing)
    assert info.value.path == path and why in info.value.reason
    assert repr(path) in str(info.value) and "\n" not in str(info.value)
    assert tree(area) == before  # nothing written, not even ok.txt or the destination


def test_an_absolute_path_is_refused(store, area):
    target = area / "outside" / "x"
    _, listing = stored_listing(store, [(str(target), FILE, b"evil\n")])
    with pytest.raises(UnsafeListing, match="absolute"):
        manifest.rebuild(store, listing, str(area / "a" / "b" / "dest"))
    assert not target.exists()


def test_a_path_through_a_symlink_the_listing_made_is_refused(store, area):
    """``link -> outside`` then ``link/x``: the second entry would land in ``outside``."""
    before = tree(area)
    _, listing = stored_listing(
        store,
        [
            ("link", LINK, os.fsencode(area / "outside")),
            ("link/x", FILE, b"evil\n"),
        ],
    )
    with pytest.raises(UnsafeListing, match="also listed as a file") as info:
        manifest.rebuild(store, listing, str(area / "a" / "b" / "dest"))
    assert info.value.path == "link/x"
    assert tree(area) == before


def test_a_file_that_is_also_a_folder_is_refused(store, area):
    _, listing = stored_listing(store, [("a", FILE, b"1\n"), ("a/b/c", FILE, b"2\n")])
    with pytest.raises(UnsafeListing, match="also listed as a file") as info:
        manifest.rebuild(store, listing, str(area / "dest"))
    assert info.value.path == "a/b/c"
    assert not (area / "dest").exists()


def test_a_path_listed_twice_is_refused(store, area):
    _, listing = stored_listing(store, [("x", FILE, b"1\n"), ("x", EXEC, b"2\n")])
    with pytest.raises(UnsafeListing, match="twice"):
        manifest.rebuild(store, listing, str(area / "dest"))
    assert not (area / "dest").exists()


def test_the_error_names_the_listing_oid(store, area):
    oid, listing = stored_listing(store, [("../x", FILE, b"evil\n")])
    with pytest.raises(UnsafeListing) as info:
        manifest.rebuild(store, listing, str(area / "dest"))
    assert info.value.oid == oid and oid in str(info.value)
    assert info.value.exit_code == 1


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ([["x", FILE, 5]], "no file 5"),
        ([["x", FILE, -1]], "no file -1"),
        ([["x", 0o40000, 0]], "mode"),
        ([["x", FILE]], r"entry 0 is not \[path, mode, index\]"),
    ],
)
def test_a_malformed_entry_is_refused_not_a_traceback(store, area, rows, why):
    """``get_record`` proves hash and encoding, not the schema: the shape is checked too."""
    blob = store.objects.put("blob", b"x\n")
    listing = {"schema_version": manifest.LISTING, "entries": rows, "omitted": []}
    listing["links"] = {"files": [blob]}
    with pytest.raises(UnsafeListing, match=why):
        manifest.rebuild(store, listing, str(area / "dest"))
    assert not (area / "dest").exists()


@pytest.mark.parametrize("target", [b"", b"a\0b"])
def test_an_unusable_symlink_target_is_refused_before_writing(store, area, target):
    _, listing = stored_listing(store, [("a.txt", FILE, b"1\n"), ("z", LINK, target)])
    with pytest.raises(UnsafeListing, match="symlink target") as info:
        manifest.rebuild(store, listing, str(area / "dest"))
    assert info.value.path == "z"
    assert not (area / "dest").exists()


def test_a_safe_listing_is_rebuilt_exactly_and_its_links_are_not_followed(store, area):
    outside = area / "outside"
    _, listing = stored_listing(
        store,
        [
            ("README.md", FILE, b"hello\n"),
            ("bin/run", EXEC, b"#!/bin/sh\n"),
            ("deep/er/still/file", FILE, b"deep\n"),
            ("escape", LINK, os.fsencode(outside)),  # a link may point anywhere: it is data
            ("up", LINK, b"../../.."),
            (".gitignore", FILE, b"*.o\n"),  # '.git' only as a whole name is refused
            ("sub/.github/x", FILE, b"ci\n"),
            ("..hidden", FILE, b"dots\n"),
        ],
    )
    dest = area / "dest"
    manifest.rebuild(store, listing, str(dest))
    assert (dest / "README.md").read_bytes() == b"hello\n"
    assert stat.S_IMODE((dest / "bin" / "run").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "README.md").stat().st_mode) == 0o644
    assert (dest / "deep" / "er" / "still" / "file").read_bytes() == b"deep\n"
    assert os.readlink(dest / "escape") == str(outside)
    assert os.readlink(dest / "up") == "../../.."
    assert (dest / "..hidden").read_bytes() == b"dots\n"
    assert list(outside.iterdir()) == []
    assert manifest.entries_of(listing) == manifest.entries_of(
        manifest.listing_record(manifest.scan(store, str(dest)))
    )


def test_a_symlink_planted_in_the_destination_is_not_followed(store, area):
    """Defence in depth: folders are opened without following links, so even a destination
    that already holds ``sub -> outside`` does not send ``sub/x`` there."""
    dest = area / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(area / "outside")
    (dest / "f").symlink_to(area / "outside" / "f")
    for path in ("sub/x", "f"):
        _, listing = stored_listing(store, [(path, FILE, b"evil\n")])
        with pytest.raises(OSError):
            manifest.rebuild(store, listing, str(dest))
    assert list((area / "outside").iterdir()) == []


def test_many_files_are_checked_before_any_is_written(store, area):
    """Past the size where files are written from a thread pool, one bad path among
    hundreds still stops everything before the first write."""
    rows = [(f"d{i % 7}/f{i}", FILE, f"{i}\n".encode()) for i in range(300)]
    rows.append(("d3/../../../escape", FILE, b"evil\n"))
    _, listing = stored_listing(store, rows)
    with pytest.raises(UnsafeListing):
        manifest.rebuild(store, listing, str(area / "a" / "b" / "dest"))
    assert not (area / "a" / "b" / "dest").exists() and not (area / "escape").exists()
    _, good = stored_listing(store, rows[:-1])
    manifest.rebuild(store, good, str(area / "dest"))
    assert len([v for v in tree(area / "dest").values() if v == "file"]) == 300


def test_scan_never_lists_what_rebuild_refuses(store, tmp_path):
    """A candidate may leave a nested repository or a ``.GIT`` folder behind: scan omits them
    (with a reason) so that its own listing always rebuilds."""
    work = tmp_path / "work"
    for path in ("keep.txt", "sub/.git/config", "sub/ok.txt", ".GIT/x", "deep/a/.Git"):
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text("x\n")
    (work / ".git").mkdir()  # the top-level repository: Git state, silently left out
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    scanned = manifest.scan(store, str(work))
    assert sorted(scanned.entries) == ["keep.txt", "sub/ok.txt"]
    assert sorted(path for path, _ in scanned.omitted) == [".GIT", "deep/a/.Git", "sub/.git"]
    listing = manifest.listing_record(scanned)
    manifest.rebuild(store, listing, str(tmp_path / "dest"))
    assert sorted(tree(tmp_path / "dest")) == ["keep.txt", "sub", "sub/ok.txt"]


@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", ".", "..", "", ".git", "/", "c\0"]), max_size=5).map(
            "/".join
        ),
        min_size=1,
        max_size=4,
    )
)
@example(["../x"])
@example(["a", "a/b"])
@example(["/a"])
def test_whatever_the_paths_nothing_lands_outside(paths):
    """Any listing either rebuilds inside the destination or is refused with nothing written.

    The destination is deeper than any path can climb, and absolute paths are rooted in the
    temporary folder, so that a regression shows up in ``tree(root)`` and nowhere else.
    """
    from yyb.store.repo import Store

    store = Store.memory()
    with tempfile.TemporaryDirectory() as top:
        root = Path(top)
        paths = [top + p if p.startswith("/") else p for p in paths]
        folders = ["x", "x/y", "x/y/z", "x/y/z/w", "x/y/z/w/v"]
        dest = root / folders[-1] / "dest"
        dest.parent.mkdir(parents=True)
        _, listing = stored_listing(store, [(p, FILE, b"z") for p in paths])
        try:
            manifest.rebuild(store, listing, str(dest))
        except UnsafeListing:
            assert tree(root) == dict.fromkeys(folders, "dir")
            return
        inside = f"{folders[-1]}/dest"
        for name in tree(root):
            assert name in folders or name == inside or name.startswith(inside + "/")
        assert {f"{inside}/{p}" for p in paths} <= set(tree(root))
