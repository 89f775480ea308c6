"""Folders made for attempts: where the file system places them."""

from __future__ import annotations

import fcntl
import os
import struct

import pytest

from yyb.harness import scratch, worktree


def test_a_run_folder_spreads_the_folders_made_in_it(tmp_path):
    """Where the file system supports it (ext2/3/4), the run folder carries the top-of-hierarchy
    flag, so each attempt's folder is placed away from those removed before it."""
    folder = scratch.run_folder()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        got = fcntl.ioctl(fd, worktree.FS_IOC_GETFLAGS, struct.pack("i", 0))
    except OSError:
        pytest.skip("this file system has no inode flags")
    finally:
        os.close(fd)
    assert struct.unpack("i", got)[0] & worktree.FS_TOPDIR_FL
    worktree.spread(str(tmp_path / "missing"))  # nothing there: nothing to do, no error
