"""Redaction: every configured secret, raw or in a common encoding, out of what is retained.

Each secret value is searched for in these forms, each replaced by ``[REDACTED:NAME]``:

- its bytes (UTF-8), always, whatever their length;
- base64 in the standard and the URL-safe alphabets, at each of the three alignments the
  secret can have inside a longer encoded text: the characters the secret's bytes alone
  decide, with the character it may share with the text before it and the one it may share
  with the text after it (any character holding the secret's bits there, so the text around
  cannot hide it) and the padding after that: no character holding a bit of the secret stays;
- hex in lower and in upper case;
- URL encoding: percent-encoding with ``/`` encoded or kept, ``+`` for spaces, and the
  percent escapes in lower case.

An encoded form shorter than ``MIN_ENCODED`` characters (for base64, its characters the secret
alone decides) is not searched for: that short, it
could not be told from other text. Data with no NUL-free secret form in it is returned as it
is; a large file is searched in pieces that overlap by the longest form, skipping the holes of
a sparse file (no form holds a NUL byte, so a hole can neither hold nor split one).
"""

from __future__ import annotations

import base64
import errno
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED:{name}]"
MIN_ENCODED = 8
CHUNK = 1 << 20


ALPHABETS = (
    (base64.b64encode, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
    (base64.urlsafe_b64encode, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
)
PAD = ord("=")
EXTENSION = 3  # the most a base64 form reaches past its core: a shared character, "=="


@dataclass(frozen=True)
class Form:
    """One form of a secret: the bytes searched for (``core``) and, for base64, the
    characters it may share with the text before it (``before``: every character whose low
    bits are the secret's first ones) and after it (``after``: every character whose high
    bits are its last ones, then up to two ``=``)."""

    core: bytes
    before: frozenset[int] = frozenset()
    after: frozenset[int] = frozenset()


def _chars(alphabet: bytes, keep) -> frozenset[int]:
    """The characters of ``alphabet`` whose value ``keep`` takes."""
    return frozenset(alphabet[v] for v in range(64) if keep(v))


def _base64(raw: bytes, shift: int, encode, alphabet: bytes) -> Form | None:
    """``raw`` base64-encoded ``shift`` bytes into a longer text (None when its core is
    shorter than ``MIN_ENCODED``).

    Character i of the encoding holds bits [6i, 6i + 6); the secret holds bits
    [8 * shift, 8 * (shift + len)). The core is the characters the secret's bits alone make;
    the character before it holds the secret's first bits in its low ones, the one after it
    the secret's last bits in its high ones.
    """
    stream = encode(b"\0" * shift + raw + b"\0\0")
    start, end = 8 * shift, 8 * (shift + len(raw))
    first, last = -(-start // 6), end // 6
    if last - first < MIN_ENCODED:
        return None
    before = after = frozenset()
    if start % 6:
        mask = (1 << (6 * first - start)) - 1
        value = alphabet.index(stream[first - 1 : first])
        before = _chars(alphabet, lambda v: v & mask == value & mask)
    if end % 6:
        low = 6 - (end - 6 * last)  # the low bits of the shared character, not the secret's
        value = alphabet.index(stream[last : last + 1]) >> low
        after = _chars(alphabet, lambda v: v >> low == value)
    return Form(stream[first:last], before, after)


def forms(value: str) -> list[Form]:
    """The forms searched for to redact ``value`` (the raw bytes first)."""
    raw = value.encode("utf-8", "surrogateescape")
    found = [Form(raw)]
    for encode, alphabet in ALPHABETS:
        for shift in range(3):
            encoded = _base64(raw, shift, encode, alphabet)
            if encoded is not None:
                found.append(encoded)
    literal = [raw.hex().encode(), raw.hex().upper().encode()]
    for text in (quote(raw, safe=""), quote(raw, safe="/"), quote_plus(raw, safe="")):
        literal += [text.encode(), re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), text).encode()]
    found += [Form(form) for form in literal if len(form) >= MIN_ENCODED]
    unique: dict[bytes, Form] = {}
    for form in found:
        unique.setdefault(form.core, form)
    return list(unique.values())


class Redactor:
    """The forms of a set of named secrets, and the ways to remove them from retained data."""

    def __init__(self, secrets: dict[str, str]) -> None:
        names: dict[bytes, tuple[str, Form]] = {}
        for name, value in sorted(secrets.items()):
            for form in forms(value) if value else []:
                names.setdefault(form.core, (name, form))
        self._names = names
        # Longest first, so that a secret holding another one is replaced whole.
        self._needles = sorted(names, key=lambda form: (-len(form), form))
        # The longest text one form covers: its core and what it may share around it.
        self.longest = max((len(n) + EXTENSION + 1 for n in self._needles), default=0)
        self._pattern = (
            re.compile(b"|".join(re.escape(n) for n in self._needles)) if self._needles else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found(self, data: bytes) -> set[str]:
        """Names of the secrets some form of which occurs in ``data``."""
        return {self._names[needle][0] for needle in self._needles if needle in data}

    def redact(self, data: bytes) -> bytes:
        """``data`` with every form of every secret replaced by ``[REDACTED:NAME]``."""
        if self._pattern is None or not self.found(data):
            return data
        pieces, done = self._replace(data, len(data))
        return b"".join(pieces) + data[done:]

    def _replace(self, buffer: bytes, cut: int) -> tuple[list[bytes], int]:
        """The pieces of ``buffer``, redacted, up to the end of the last form whose core
        starts before ``cut``, and where they end. A base64 form takes the characters it
        shares with the text around it (one before, one after and its padding) unless an
        earlier form took them."""
        pieces, done = [], 0
        for match in self._pattern.finditer(buffer):
            start, end = match.span()
            if start >= cut:
                break
            if start < done:  # inside what the form before took around its core
                continue
            name, form = self._names[match[0]]
            if start > done and buffer[start - 1] in form.before:
                start -= 1
            if end < len(buffer) and buffer[end] in form.after:
                end += 1
                for _ in range(2):
                    if end < len(buffer) and buffer[end] == PAD:
                        end += 1
            pieces += [buffer[done:start], REDACTED.format(name=name).encode()]
            done = end
        return pieces, done

    def text(self, value: str) -> str:
        """A string, redacted (undecodable bytes of a file name stay as they were)."""
        data = value.encode("utf-8", "surrogateescape")
        redacted = self.redact(data)
        return value if redacted is data else redacted.decode("utf-8", "surrogateescape")

    def value(self, value):
        """A JSON-like value with every string in it redacted, map keys included.

        Two keys that become the same once redacted are both kept: the later one (in sorted
        order) gets `` #2``, `` #3``... appended.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            out: dict = {}
            for key in sorted(value, key=str):
                new = self.text(key) if isinstance(key, str) else key
                candidate, n = new, 1
                while candidate in out:
                    n += 1
                    candidate = f"{new} #{n}"
                out[candidate] = self.value(value[key])
            return out
        return value

    def holds(self, value) -> bool:
        """Whether some string of a JSON-like value (keys included) holds a secret's form."""
        if isinstance(value, str):
            return bool(self.found(value.encode("utf-8", "surrogateescape")))
        if isinstance(value, list):
            return any(self.holds(item) for item in value)
        if isinstance(value, dict):
            return any(self.holds(k) or self.holds(v) for k, v in value.items())
        return False

    # --- files: bounded memory whatever their size ------------------------------------------

    def found_in_file(self, fd: int, size: int) -> set[str]:
        """Names of the secrets found in the first ``size`` bytes of an open file."""
        found: set[str] = set()
        for start, end in _data_extents(fd, size):
            carry = b""
            position = start
            while position < end:
                chunk = os.pread(fd, min(CHUNK, end - position), position)
                if not chunk:
                    break
                position += len(chunk)
                window = carry + chunk
                found |= self.found(window)
                carry = window[-(self.longest - 1) :] if self.longest > 1 else b""
        return found

    def copy_redacted(self, fd: int, size: int, write: Callable[[bytes], object]) -> int:
        """Write the first ``size`` bytes of an open file, redacted, to ``write``.

        Returns the number of bytes written. A match never spans two pieces: the last
        ``longest`` bytes of each piece wait for the next one.
        """
        assert self._pattern is not None
        written = 0
        carry = b""
        position = 0
        while position < size or carry:
            chunk = os.pread(fd, min(CHUNK, size - position), position) if position < size else b""
            position += len(chunk)
            final = not chunk
            buffer = carry + chunk
            cut = len(buffer) if final else max(len(buffer) - (self.longest - 1), 0)
            pieces, done = self._replace(buffer, cut)
            # One byte before the cut waits too: a form found next may share it.
            keep = len(buffer) if final else max(cut - 1, 0)
            if done < keep:
                pieces.append(buffer[done:keep])
                done = keep
            carry = buffer[done:]
            for piece in pieces:
                write(piece)
                written += len(piece)
            if final:
                break
        return written


def _data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the parts of a file that hold data; holes (all zeros) left out."""
    position = 0
    while position < size:
        try:
            start = os.lseek(fd, position, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data past ``position``
                return
            yield position, size  # the file system cannot say: all of it is data
            return
        if start >= size:
            return
        yield start, end
        position = end
