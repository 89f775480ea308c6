"""What a plan binds of its candidate harness beyond its configuration: files, as listings.

A harness's configuration is copied into the plan as it is; two things it names are files,
and a plan that named them by path would run whatever lay there on the day of the run. Both
are read when the plan is frozen and bound as listings (``yylo_benchmark_file_listing.v2``)
whose blobs are in the plan's objects, so a run writes exactly what was planned:

- ``home``: a folder of the configuration's (an agent CLI's own settings, say) copied into the
  attempt's private HOME before the candidate starts;
- the adapter program of an agent kind (``yyb.agents``), written into the attempt's control
  folder and started there: a newer yyb changes the adapter of new plans only.
"""

from __future__ import annotations

import os
import stat

from yyb.errors import UsageError
from yyb.harness import manifest

# A home folder is configuration, not a workspace: small, and read whole into memory.
MAX_HOME_FILES = 1000
MAX_HOME_BYTES = 16 << 20


def home_files(folder: str) -> dict[str, tuple[int, bytes]]:
    """path -> (Git mode, bytes) of every file below ``folder``.

    Raises:
        UsageError: it is not a folder, holds something other than folders and regular files
            (a symlink would make HOME point outside it), a path that could not be rebuilt,
            or more than ``MAX_HOME_FILES`` files or ``MAX_HOME_BYTES`` bytes.
    """
    if not os.path.isdir(folder):
        raise UsageError(f"the harness's home {folder} is not a folder")
    found: dict[str, tuple[int, bytes]] = {}
    total = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            reason = manifest.unsafe_path(rel)
            if reason is None and not stat.S_ISREG(info.st_mode):
                reason = "not a regular file or a folder"
            if reason is not None:
                raise UsageError(f"the harness's home {folder}: {rel!r}: {reason}")
            with open(path, "rb") as handle:
                data = handle.read()
            total += len(data)
            if len(found) >= MAX_HOME_FILES or total > MAX_HOME_BYTES:
                raise UsageError(
                    f"the harness's home {folder} holds more than {MAX_HOME_FILES} files or "
                    f"{MAX_HOME_BYTES >> 20} MiB"
                )
            found[rel] = (0o100755 if info.st_mode & 0o111 else 0o100644, data)
    return found


def listing(files: dict[str, tuple[int, bytes]]) -> tuple[dict, list[bytes]]:
    """(the listing record of ``files``, the blobs it links)."""
    entries = {path: (mode, manifest.blob_oid(data)) for path, (mode, data) in files.items()}
    return manifest.listing_of(entries), [data for _, data in files.values()]
