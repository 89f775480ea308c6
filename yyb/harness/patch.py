"""The patch of an attempt: a unified diff from the base listing to the final one.

Built from the blobs already stored (so it is redacted as they are), in bounded time and
memory: text files up to MAX_DIFF_FILE bytes are compared by libgit2's diff (difflib's can be
kept busy for minutes by a crafted pair of 1 MiB files), and any other changed file (binary,
larger, or once the patch holds MAX_PATCH bytes of text) is a note naming the size and blob of
each side, whose bytes are never read. Past MAX_NOTES bytes of notes, one last line counts the
files left out.
"""

from __future__ import annotations

MAX_DIFF_FILE = 1 << 20  # larger or binary files appear in the patch as a note
MAX_PATCH = 16 << 20  # bytes of patch text; past it every file is a note
MAX_NOTES = 16 << 20  # bytes of notes; past it one last line says how many more


def diff(store, before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> bytes:
    """A unified diff (``a/`` and ``b/`` prefixes, Git's headers) from ``before`` to ``after``
    (each path -> (mode, blob oid)); a binary or large file is a note, one line per side:
    ``Binary or large file b/PATH: SIZE bytes, blob OID``."""
    out: list[bytes] = []
    text_bytes = note_bytes = 0
    changed = [
        path
        for path in sorted(set(before) | set(after), key=str.encode)
        if before.get(path) != after.get(path)
    ]
    for number, path in enumerate(changed):
        old, new = before.get(path), after.get(path)
        header = _header(path, old, new)
        old_size, old_text = _blob_text(store, old, text_bytes < MAX_PATCH)
        new_size, new_text = _blob_text(store, new, text_bytes < MAX_PATCH)
        if old_text is None or new_text is None:
            if note_bytes > MAX_NOTES:
                out.append(f"... and {len(changed) - number} more changed files\n".encode())
                break
            note = header + "".join(
                f"Binary or large file {side}/{path}: {size} bytes, blob {entry[1]}\n"
                for side, entry, size in (("a", old, old_size), ("b", new, new_size))
                if entry is not None
            )
            note_bytes += len(note)
            out.append(note.encode("utf-8", "surrogateescape"))
            continue
        body = _hunks(path, old, new, old_text, new_text)
        text_bytes += len(body)
        out.append(header.encode("utf-8", "surrogateescape") + body)
    return b"".join(out)


def _header(path: str, old: tuple[int, str] | None, new: tuple[int, str] | None) -> str:
    header = f"diff --git a/{path} b/{path}\n"
    if old is None:
        return header + f"new file mode {new[0]:o}\n"
    if new is None:
        return header + f"deleted file mode {old[0]:o}\n"
    if old[0] != new[0]:
        return header + f"old mode {old[0]:o}\nnew mode {new[0]:o}\n"
    return header


def _hunks(path: str, old, new, old_text: bytes, new_text: bytes) -> bytes:
    """The ``---``/``+++`` lines and hunks of one text file (empty when only the mode changed)."""
    import pygit2

    patch = pygit2.Patch.create_from(old_text, new_text, path, path, context_lines=3).data
    start = patch.find(b"\n--- ")
    if start < 0:
        return b""
    body = patch[start + 1 :]
    if old is None:
        body = body.replace(f"--- a/{path}\n".encode(), b"--- /dev/null\n", 1)
    if new is None:
        body = body.replace(f"+++ b/{path}\n".encode(), b"+++ /dev/null\n", 1)
    return body


def _blob_text(store, entry: tuple[int, str] | None, read: bool) -> tuple[int, bytes | None]:
    """(size, body) of a blob small enough to diff as text; body None when it is not (too
    large, binary, not UTF-8, or ``read`` false). Only the size of a large blob is read."""
    if entry is None:
        return 0, b""
    _, size, stream = store.objects.open_body(entry[1])
    stream.close()
    if not read or size > MAX_DIFF_FILE:
        return size, None
    body = store.objects.get(entry[1]).body
    if b"\0" in body:
        return size, None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return size, None
    return size, body
