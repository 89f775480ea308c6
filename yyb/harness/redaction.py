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
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED:{name}]"
MIN_ENCODED = 8
CHUNK = 1 << 20


ALPHABETS = (
    (base64.b64encode, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
    (base64.urlsafe_b64encode, b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
)


def _chars(alphabet: bytes, keep) -> bytes:
    """A regex character class of the characters of ``alphabet`` whose value ``keep`` takes."""
    return b"[" + b"".join(re.escape(alphabet[v : v + 1]) for v in range(64) if keep(v)) + b"]"


def _base64(raw: bytes, shift: int, encode, alphabet: bytes) -> tuple[bytes, int] | None:
    """The pattern of ``raw`` base64-encoded ``shift`` bytes into a longer text, and the
    length of its core (None when the core is shorter than ``MIN_ENCODED``).

    Character i of the encoding holds bits [6i, 6i + 6); the secret holds bits
    [8 * shift, 8 * (shift + len)). The core is the characters the secret's bits alone make;
    a character it shares with the text before (its low bits the secret's first ones) or
    after (its high bits the secret's last ones) is matched by a class of every character
    with those bits, and the padding that may follow the last one is matched too.
    """
    stream = encode(b"\0" * shift + raw + b"\0\0")
    start, end = 8 * shift, 8 * (shift + len(raw))
    first, last = -(-start // 6), end // 6
    if last - first < MIN_ENCODED:
        return None
    pattern = re.escape(stream[first:last])
    if start % 6:
        low = 6 * first - start  # how many low bits of the shared character are the secret's
        value = alphabet.index(stream[first - 1 : first])
        mask = (1 << low) - 1
        pattern = _chars(alphabet, lambda v: v & mask == value & mask) + b"?" + pattern
    if end % 6:
        high = end - 6 * last  # how many high bits of the shared character are the secret's
        value = alphabet.index(stream[last : last + 1]) >> (6 - high)
        shared = _chars(alphabet, lambda v: v >> (6 - high) == value)
        pattern += b"(?:" + shared + b"={0,2})?"
    return pattern, last - first


def forms(value: str) -> list[tuple[bytes, int]]:
    """The patterns searched for to redact ``value`` (the raw bytes first), each a regular
    expression over bytes with the length of the text it must hold."""
    raw = value.encode("utf-8", "surrogateescape")
    found = [(re.escape(raw), len(raw))]
    for encode, alphabet in ALPHABETS:
        for shift in range(3):
            encoded = _base64(raw, shift, encode, alphabet)
            if encoded is not None:
                found.append(encoded)
    literal = [raw.hex().encode(), raw.hex().upper().encode()]
    for text in (quote(raw, safe=""), quote(raw, safe="/"), quote_plus(raw, safe="")):
        literal += [text.encode(), re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), text).encode()]
    found += [(re.escape(form), len(form)) for form in literal if len(form) >= MIN_ENCODED]
    unique: list[tuple[bytes, int]] = []
    for form in found:
        if form not in unique:
            unique.append(form)
    return unique


class Redactor:
    """The forms of a set of named secrets, and the ways to remove them from retained data."""

    def __init__(self, secrets: dict[str, str]) -> None:
        names: dict[bytes, tuple[str, int]] = {}
        for name, value in sorted(secrets.items()):
            for pattern, length in forms(value) if value else []:
                names.setdefault(pattern, (name, length))
        # Longest first, so that a secret holding another one is replaced whole.
        self._needles = sorted(names, key=lambda p: (-names[p][1], p))
        self._names = [names[p][0] for p in self._needles]
        self._each = [re.compile(p) for p in self._needles]
        # The longest text a pattern can match: its core, two shared characters, padding.
        self.longest = max((names[p][1] + 4 for p in self._needles), default=0)
        self._pattern = (
            re.compile(b"|".join(b"(" + p + b")" for p in self._needles)) if self._needles else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found(self, data: bytes) -> set[str]:
        """Names of the secrets some form of which occurs in ``data``."""
        if self._pattern is None or self._pattern.search(data) is None:
            return set()
        return {
            name for name, each in zip(self._names, self._each, strict=True) if each.search(data)
        }

    def redact(self, data: bytes) -> bytes:
        """``data`` with every form of every secret replaced by ``[REDACTED:NAME]``."""
        if self._pattern is None or not self.found(data):
            return data
        return self._pattern.sub(self._replacement, data)

    def _replacement(self, match: re.Match) -> bytes:
        return REDACTED.format(name=self._names[match.lastindex - 1]).encode()

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
        ``longest - 1`` bytes of each piece wait for the next one.
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
            pieces, done = [], 0
            for match in self._pattern.finditer(buffer):
                if match.start() >= cut:
                    break
                pieces += [buffer[done : match.start()], self._replacement(match)]
                done = match.end()
            if done < cut:
                pieces.append(buffer[done:cut])
                done = cut
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
